#include "core/config.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

namespace cgn::config {
namespace {

constexpr double kMaxMs = 1e9;

void read_log(TableReader& r, LogConfig& c) {
  r.get_one_of("level", c.level, {"trace", "debug", "info", "warn", "error", "off"});
  r.get("file", c.file);
}

void read_limits(TableReader& r, LimitsConfig& c) {
  r.get("max_body_bytes", c.max_body_bytes, {1, uint64_t{1} << 32});
  r.get("max_json_depth", c.max_json_depth, {1, 1024});
  r.get("max_messages", c.max_messages, {1, 1u << 20});
  r.get("max_header_bytes", c.max_header_bytes, {1024, 1u << 20});
  r.get("max_connections", c.max_connections, {1, 1u << 20});
  r.get("max_buffered_bytes", c.max_buffered_bytes, {1u << 20, uint64_t{1} << 40});
  r.get("reject_log_interval_s", c.reject_log_interval_s, {1, 86'400});
}

void read_timeouts(TableReader& r, TimeoutsConfig& c) {
  constexpr Range<uint32_t> kPositive{1, 86'400'000};
  r.get("connect_ms", c.connect_ms, kPositive);
  r.get("first_token_ms", c.first_token_ms, kPositive);
  r.get("idle_ms", c.idle_ms, kPositive);
  r.get("request_ms", c.request_ms, kPositive);
  r.get("shutdown_grace_ms", c.shutdown_grace_ms, {0, 86'400'000});
  r.get("health_interval_ms", c.health_interval_ms, {10, 3'600'000});
  r.get("continue_ms", c.continue_ms, {0, 86'400'000});
  r.get("passive_retry_ms", c.passive_retry_ms, {10, 3'600'000});
}

void read_weights(TableReader& r, ScoreWeights& c) {
  constexpr Range<double> kMs{0.0, kMaxMs};
  r.get("prefill_ms_per_block", c.prefill_ms_per_block, kMs);
  r.get("queue_ms_per_request", c.queue_ms_per_request, kMs);
  r.get("running_ms_per_request", c.running_ms_per_request, kMs);
  r.get("inflight_prefill_weight", c.inflight_prefill_weight, {0.0, 1000.0});
  r.get("kv_pressure_ms", c.kv_pressure_ms, kMs);
  r.get("power_penalty_ms", c.power_penalty_ms, kMs);
  r.get("ram_tier_credit", c.ram_tier_credit, {0.0, 1.0});
  r.get("ssd_tier_credit", c.ssd_tier_credit, {0.0, 1.0});
  r.get("temperature", c.temperature, {0.0, 1000.0});
}

void read_load_guard(TableReader& r, LoadGuardConfig& c) {
  r.get("max_queue_depth", c.max_queue_depth, {1, 1'000'000});
  r.get("max_kv_used", c.max_kv_used, {0.0, 1.0});
  r.get("spread_min_gap", c.spread_min_gap, {1, 1'000'000});
  r.get("spread_ratio", c.spread_ratio, {1.0, 1e6});
}

void read_routing(TableReader& r, RoutingConfig& c) {
  if (r.get("block_bytes", c.block_bytes, {64, 1024}) && c.block_bytes % 64 != 0) {
    r.fail("block_bytes", ConfigError::bad_value,
           fmt::format("expected a multiple of 64 in [64, 1024], got {}", c.block_bytes));
    c.block_bytes = RoutingConfig{}.block_bytes;
  }
  r.get("index_ttl_s", c.index_ttl_s, {1, 86'400});
  r.get("max_staleness_ms", c.max_staleness_ms, {0, 86'400'000});
  r.get("index_max_entries", c.index_max_entries, {1024, uint64_t{1} << 32});
  r.table("weights", [&](TableReader& t) { read_weights(t, c.weights); });
  r.table("load_guard", [&](TableReader& t) { read_load_guard(t, c.load_guard); });
}

void read_admission(TableReader& r, AdmissionConfig& c) {
  constexpr Range<uint32_t> kQueue{0, 1'000'000};
  r.get("max_queue", c.max_queue, kQueue);
  r.get("retry_after_s", c.retry_after_s, {0, 3600});
  r.table("models", [&](TableReader& models) {
    models.named_tables([&](const std::string& name, TableReader& t) {
      ModelAdmission m;
      t.get("max_queue", m.max_queue, kQueue);
      t.get("prefill_max_queue", m.prefill_max_queue, kQueue);
      t.get("decode_max_queue", m.decode_max_queue, kQueue);
      c.models[name] = m;
    });
  });
}

// "http://host:port/x" -> "host:port".
std::string host_port_of(std::string_view url) {
  auto scheme = url.find("://");
  std::string_view rest = scheme == std::string_view::npos ? url : url.substr(scheme + 3);
  return std::string(rest.substr(0, rest.find('/')));
}

void read_nodes(TableReader& r, std::vector<NodeConfig>& nodes) {
  std::set<std::string> names;
  r.tables("nodes", [&](TableReader& t, size_t) {
    NodeConfig n;
    if (t.has("url")) {
      t.get_url("url", n.url);
    } else {
      t.require("url", n.url);  // reports it missing
    }
    t.get("name", n.name);
    if (n.name.empty()) {
      n.name = host_port_of(n.url);
    }
    if (!n.name.empty() && !names.insert(n.name).second) {
      t.fail(t.has("name") ? "name" : "url", ConfigError::bad_value,
             fmt::format("duplicates node name \"{}\"; node names must be unique", n.name));
    }
    t.get_one_of("role", n.role, kNodeRoles);
    t.get("models", n.models);
    t.get_host_port("agent", n.agent);
    t.get_one_of("engine", n.engine, kNodeEngines);
    nodes.push_back(std::move(n));
  });
}

void read_router(TableReader& r, RouterConfig& c) {
  r.get_host_port("listen", c.listen);
  r.get_one_of("policy", c.policy, kRoutingPolicies);
  r.get_one_of("state_backend", c.state_backend, kStateBackends);
  r.get("api_keys_file", c.api_keys_file);
  r.get_secret_env("api_keys_env", c.api_keys);
  r.get("tls_cert", c.tls_cert);
  r.get("tls_key", c.tls_key);
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    bool cert = !c.tls_cert.empty();
    r.fail(cert ? "tls_cert" : "tls_key", ConfigError::missing_key,
           fmt::format("is set but '{}' is not; give both or neither",
                       r.key_path(cert ? "tls_key" : "tls_cert")));
  }
  r.table("limits", [&](TableReader& t) { read_limits(t, c.limits); });
  r.table("metrics", [&](TableReader& t) {
    t.get_host_port("listen", c.metrics.listen);
    t.get_secret_env("key_env", c.metrics.key);
  });
  r.table("timeouts", [&](TableReader& t) { read_timeouts(t, c.timeouts); });
  r.table("routing", [&](TableReader& t) { read_routing(t, c.routing); });
  r.table("admission", [&](TableReader& t) { read_admission(t, c.admission); });
  r.table("disaggregation", [&](TableReader& t) {
    t.get_one_of("fallback", c.disaggregation.fallback, {"aggregated", "reject"});
  });
  read_nodes(r, c.nodes);
}

bool valid_ip_literal(const std::string& s) {
  in6_addr buf{};
  return ::inet_pton(AF_INET, s.c_str(), &buf) == 1 || ::inet_pton(AF_INET6, s.c_str(), &buf) == 1;
}

bool valid_node_id(std::string_view id) {
  return id.size() <= 128 && std::all_of(id.begin(), id.end(), [](char ch) {
           return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                  ch == '-' || ch == '_' || ch == '.';
         });
}

// Reads a PEM path key; the file must be readable (the error names the key and the path).
void get_pem_path(TableReader& t, std::string_view key, std::string& out) {
  if (!t.get(key, out)) {
    return;
  }
  std::ifstream f(out);
  if (out.empty() || !f) {
    t.fail(key, ConfigError::io, fmt::format("names {}, which cannot be read", quoted(out)));
  }
}

// Two keys that only make sense together: one without the other is an error naming both.
void both_or_neither(TableReader& t, std::string_view a, std::string_view b) {
  if (t.has(a) != t.has(b)) {
    const bool first = t.has(a);
    t.fail(first ? a : b, ConfigError::missing_key,
           fmt::format("is set but '{}' is not; give both or neither", t.key_path(first ? b : a)));
  }
}

void read_tls(TableReader& t, TlsConfig& c) {
  get_pem_path(t, "ca_file", c.ca_file);
  get_pem_path(t, "cert_file", c.cert_file);
  get_pem_path(t, "key_file", c.key_file);
  t.get("require_client_cert", c.require_client_cert);
  both_or_neither(t, "cert_file", "key_file");
  if (t.has("cert_file") && !t.has("ca_file")) {
    t.fail("cert_file", ConfigError::missing_key,
           fmt::format("is set but '{}' is not; peers are verified against it", t.key_path("ca_file")));
  }
}

// Tokens from `text`: one per line (or comma separated), trimmed, '#' lines skipped.
std::vector<std::string> split_tokens(std::string_view text, char sep) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t end = text.find(sep);
    std::string_view t = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) {
      t.remove_prefix(1);
    }
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) {
      t.remove_suffix(1);
    }
    if (!t.empty() && t.front() != '#') {
      out.emplace_back(t);
    }
  }
  return out;
}

constexpr size_t kMinClusterToken = 16;

void read_cluster(TableReader& t, ClusterConfig& c) {
  std::string_view from;
  if (t.get("token_file", c.token_file)) {
    from = "token_file";
    std::ifstream f(c.token_file);
    if (!f) {
      t.fail("token_file", ConfigError::io,
             fmt::format("names {}, which cannot be read", quoted(c.token_file)));
      return;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    c.tokens = split_tokens(ss.str(), '\n');
  }
  if (t.get_secret_env("token_env", c.token_env)) {
    if (!from.empty()) {
      t.fail("token_env", ConfigError::bad_value, "is set beside token_file; give one or the other");
      return;
    }
    from = "token_env";
    c.tokens = split_tokens(c.token_env.reveal(), ',');
  }
  if (from.empty()) {
    return;
  }
  if (c.tokens.empty()) {
    t.fail(from, ConfigError::bad_value, "holds no token");
  }
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    if (c.tokens[i].size() < kMinClusterToken) {
      t.fail(from, ConfigError::bad_value,
             fmt::format("token {} is shorter than {} characters (use e.g. 32 random hex digits)", i + 1,
                         kMinClusterToken));
    }
  }
}

void read_state(TableReader& r, StateConfig& c) {
  r.table("etcd", [&](TableReader& t) {
    if (t.get_url_list("endpoints", c.etcd.endpoints) && c.etcd.endpoints.empty()) {
      t.fail("endpoints", ConfigError::bad_value, "expected at least one endpoint, got []");
    }
    get_pem_path(t, "ca_file", c.etcd.ca_file);
    get_pem_path(t, "cert_file", c.etcd.cert_file);
    get_pem_path(t, "key_file", c.etcd.key_file);
    both_or_neither(t, "cert_file", "key_file");
    const bool any_https = std::any_of(c.etcd.endpoints.begin(), c.etcd.endpoints.end(),
                                       [](const std::string& e) { return e.starts_with("https://"); });
    const bool any_http = std::any_of(c.etcd.endpoints.begin(), c.etcd.endpoints.end(),
                                      [](const std::string& e) { return e.starts_with("http://"); });
    if (any_https && any_http) {
      t.fail("endpoints", ConfigError::bad_value, "mixes http:// and https:// endpoints; use one scheme");
    } else if (any_https && c.etcd.ca_file.empty()) {
      t.fail("endpoints", ConfigError::missing_key,
             fmt::format("are https:// but '{}' is not set (the CA that signed etcd's certificate)",
                         t.key_path("ca_file")));
    } else if (!any_https && (t.has("ca_file") || t.has("cert_file"))) {
      t.fail(t.has("ca_file") ? "ca_file" : "cert_file", ConfigError::bad_value,
             "is set but no endpoint is https://");
    }
    t.get("username", c.etcd.username);
    t.get_secret_env("password_env", c.etcd.password);
    both_or_neither(t, "username", "password_env");
    t.get("lease_ttl_s", c.etcd.lease_ttl_s, {2, 3600});
    if (t.get("prefix", c.etcd.prefix) && !c.etcd.prefix.starts_with('/')) {
      t.fail("prefix", ConfigError::bad_value,
             fmt::format("expected a path starting with '/', got {}", quoted(c.etcd.prefix)));
    }
  });
  r.table("gossip", [&](TableReader& t) {
    t.get_host_port("listen", c.gossip.listen);
    t.get_host_port_list("seeds", c.gossip.seeds);
    if (t.get("cluster_id", c.gossip.cluster_id) && c.gossip.cluster_id.empty()) {
      t.fail("cluster_id", ConfigError::bad_value, "expected a non-empty string, got \"\"");
    }
    t.get_secret_env("secret_env", c.gossip.secret);
    t.get_secret_env("rotation_secret_env", c.gossip.rotation_secret);
    t.get("insecure", c.gossip.insecure);
    if (c.gossip.insecure && t.has("secret_env")) {
      t.fail("insecure", ConfigError::bad_value, "is true but secret_env is set; give one or the other");
    }
    if (t.has("rotation_secret_env") && !t.has("secret_env")) {
      t.fail("rotation_secret_env", ConfigError::missing_key,
             fmt::format("is set but '{}' is not; the rotation key is only accepted beside a signing key",
                         t.key_path("secret_env")));
    }
  });
}

void read_agent(TableReader& r, AgentConfig& c) {
  if (r.get("node_id", c.node_id) && !valid_node_id(c.node_id)) {
    r.fail("node_id", ConfigError::bad_value,
           "expected at most 128 characters from [A-Za-z0-9._-] (it is a key in etcd and a metric label)");
  }
  r.get_host_port("listen", c.listen);
  r.get("watt_limit", c.watt_limit, {0.0, 1e6});
  r.get_host_port("grpc_listen", c.grpc_listen);
  r.get("scrape_interval_ms", c.scrape_interval_ms, {50, 600000});
  r.get("probe_interval_ms", c.probe_interval_ms, {10, 60000});
  r.get("restart_backoff_initial_ms", c.restart_backoff_initial_ms, {10, 3600000});
  r.get("restart_backoff_max_ms", c.restart_backoff_max_ms, {10, 3600000});
  r.get("stop_grace_ms", c.stop_grace_ms, {0, 600000});
  r.get("engine_outlives_agent", c.engine_outlives_agent);
  if (c.restart_backoff_initial_ms > c.restart_backoff_max_ms) {
    r.fail("restart_backoff_initial_ms", ConfigError::bad_value,
           fmt::format("{} is above restart_backoff_max_ms ({})", c.restart_backoff_initial_ms,
                       c.restart_backoff_max_ms));
  }
  r.get_one_of("state_backend", c.state_backend, kStateBackends);
  r.get("publish_interval_ms", c.publish_interval_ms, {10, 60000});
  r.get("max_published_prefixes", c.max_published_prefixes, {0, 4096});
  r.get("engine_metrics", c.engine_metrics);
}

void read_engine(TableReader& r, EngineConfig& c) {
  r.get_one_of("kind", c.kind, kEngineKinds);
  r.get("model", c.model);
  r.get("port", c.port, {1, 65535});
  if (r.get("host", c.host) && !valid_ip_literal(c.host)) {
    r.fail("host", ConfigError::bad_value,
           fmt::format("expected an IP address (127.0.0.1, 0.0.0.0, ::1), got {}", quoted(c.host)));
  }
  r.get("served_name", c.served_name);
  r.get("tensor_parallel", c.tensor_parallel, {1, 64});
  r.get("extra_args", c.extra_args);
  if (r.holds_bool("kv_offload")) {
    bool on = false;
    r.get("kv_offload", on);
    c.kv_offload = on ? "cgn" : "none";
  } else {
    r.get_one_of("kv_offload", c.kv_offload, kKvOffloads);
  }
  r.get("gpus", c.gpus, {0, 1023});
  r.get_one_of("role", c.role, kNodeRoles);
  if (r.get_url("url", c.url) && c.kind != "external") {
    r.fail("url", ConfigError::bad_value,
           "is only for kind = \"external\" (a spawned engine listens on port)");
  }
  r.get_one_of("attach_kind", c.attach_kind, kAttachKinds);
  r.get_one_of("pd_transfer_backend", c.pd_transfer_backend, kPdTransferBackends);
  r.get("nixl_side_channel_host", c.nixl_side_channel_host);
  r.get("nixl_side_channel_port", c.nixl_side_channel_port, {0, 65535});
  r.get("parallel_slots", c.parallel_slots, {1, 1024});
  r.get("page_size", c.page_size, {0, 65536});
  r.get("kv_events", c.kv_events);
  r.get("kv_events_port", c.kv_events_port, {1, 65535});
}

toml::array to_array(const std::vector<std::string>& v) {
  toml::array a;
  for (const auto& s : v) {
    a.push_back(s);
  }
  return a;
}

int64_t as_int(uint64_t v) {
  return static_cast<int64_t>(v);
}

}  // namespace

uint32_t AdmissionConfig::max_queue_for(std::string_view model, std::string_view role) const {
  auto it = models.find(std::string(model));
  if (it == models.end()) {
    return max_queue;
  }
  const ModelAdmission& m = it->second;
  if (role == "prefill" && m.prefill_max_queue) {
    return *m.prefill_max_queue;
  }
  if (role == "decode" && m.decode_max_queue) {
    return *m.decode_max_queue;
  }
  return m.max_queue.value_or(max_queue);
}

std::vector<std::string> RouterConfig::api_keys_from_env() const {
  std::vector<std::string> keys;
  std::string_view all = api_keys.reveal();
  while (!all.empty()) {
    size_t comma = all.find(',');
    std::string_view k = all.substr(0, comma);
    all = comma == std::string_view::npos ? std::string_view{} : all.substr(comma + 1);
    while (!k.empty() && std::isspace(static_cast<unsigned char>(k.front()))) {
      k.remove_prefix(1);
    }
    while (!k.empty() && std::isspace(static_cast<unsigned char>(k.back()))) {
      k.remove_suffix(1);
    }
    if (!k.empty()) {
      keys.emplace_back(k);
    }
  }
  return keys;
}

void read_config(TableReader& root, CognitoraConfig& cfg) {
  root.table("log", [&](TableReader& t) { read_log(t, cfg.log); });
  root.table("router", [&](TableReader& t) { read_router(t, cfg.router); });
  root.table("cluster", [&](TableReader& t) { read_cluster(t, cfg.cluster); });
  root.table("tls", [&](TableReader& t) { read_tls(t, cfg.tls); });
  root.table("state", [&](TableReader& t) { read_state(t, cfg.state); });
  root.table("agent", [&](TableReader& t) { read_agent(t, cfg.agent); });
  root.table("engine", [&](TableReader& t) { read_engine(t, cfg.engine); });
  root.finish();
}

Result<CognitoraConfig, ConfigError> load_config_from_string(std::string_view text,
                                                             const std::string& source_name,
                                                             const EnvLookup& env) {
  auto parsed = parse_toml(text, source_name);
  if (!parsed.ok()) {
    return parsed.error();
  }
  ConfigContext ctx(source_name, env);
  TableReader root(ctx, parsed.value(), "");
  CognitoraConfig cfg;
  cfg.source = source_name;
  read_config(root, cfg);
  if (!ctx.ok()) {
    return ctx.to_error();
  }
  return cfg;
}

Result<CognitoraConfig, ConfigError> load_config(const std::string& path, const EnvLookup& env) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_error(ConfigError::io, fmt::format("{}: cannot open config file: {}", path,
                                                   std::generic_category().message(errno)));
  }
  // Read one byte past the limit so an oversized file is reported, not truncated.
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    return make_error(ConfigError::io, fmt::format("{}: cannot read config file: {}", path,
                                                   std::generic_category().message(errno)));
  }
  text.resize(static_cast<size_t>(in.gcount()));
  return load_config_from_string(text, path, env);
}

std::string dump_config(const CognitoraConfig& c) {
  const RouterConfig& r = c.router;
  toml::table limits{{"max_body_bytes", as_int(r.limits.max_body_bytes)},
                     {"max_json_depth", r.limits.max_json_depth},
                     {"max_messages", r.limits.max_messages},
                     {"max_header_bytes", r.limits.max_header_bytes},
                     {"max_connections", r.limits.max_connections},
                     {"max_buffered_bytes", as_int(r.limits.max_buffered_bytes)},
                     {"reject_log_interval_s", r.limits.reject_log_interval_s}};
  toml::table metrics;
  if (!r.metrics.listen.empty()) {
    metrics.insert("listen", r.metrics.listen);
  }
  if (!r.metrics.key.env_name().empty()) {
    metrics.insert("key_env", r.metrics.key.env_name());  // the variable's name, never its value
  }
  toml::table timeouts{{"connect_ms", r.timeouts.connect_ms},
                       {"first_token_ms", r.timeouts.first_token_ms},
                       {"idle_ms", r.timeouts.idle_ms},
                       {"request_ms", r.timeouts.request_ms},
                       {"shutdown_grace_ms", r.timeouts.shutdown_grace_ms},
                       {"health_interval_ms", r.timeouts.health_interval_ms},
                       {"continue_ms", r.timeouts.continue_ms},
                       {"passive_retry_ms", r.timeouts.passive_retry_ms}};
  const ScoreWeights& w = r.routing.weights;
  toml::table weights{{"prefill_ms_per_block", w.prefill_ms_per_block},
                      {"queue_ms_per_request", w.queue_ms_per_request},
                      {"running_ms_per_request", w.running_ms_per_request},
                      {"inflight_prefill_weight", w.inflight_prefill_weight},
                      {"kv_pressure_ms", w.kv_pressure_ms},
                      {"power_penalty_ms", w.power_penalty_ms},
                      {"ram_tier_credit", w.ram_tier_credit},
                      {"ssd_tier_credit", w.ssd_tier_credit},
                      {"temperature", w.temperature}};
  const LoadGuardConfig& g = r.routing.load_guard;
  toml::table load_guard{{"max_queue_depth", g.max_queue_depth},
                         {"max_kv_used", g.max_kv_used},
                         {"spread_min_gap", g.spread_min_gap},
                         {"spread_ratio", g.spread_ratio}};
  toml::table routing{{"block_bytes", r.routing.block_bytes},
                      {"index_ttl_s", r.routing.index_ttl_s},
                      {"max_staleness_ms", r.routing.max_staleness_ms},
                      {"index_max_entries", as_int(r.routing.index_max_entries)},
                      {"weights", std::move(weights)},
                      {"load_guard", std::move(load_guard)}};
  toml::table models;
  for (const auto& [name, m] : r.admission.models) {
    toml::table t;
    if (m.max_queue) {
      t.insert("max_queue", *m.max_queue);
    }
    if (m.prefill_max_queue) {
      t.insert("prefill_max_queue", *m.prefill_max_queue);
    }
    if (m.decode_max_queue) {
      t.insert("decode_max_queue", *m.decode_max_queue);
    }
    models.insert(name, std::move(t));
  }
  toml::table admission{{"max_queue", r.admission.max_queue}, {"retry_after_s", r.admission.retry_after_s}};
  if (!models.empty()) {
    admission.insert("models", std::move(models));
  }
  toml::array nodes;
  for (const auto& n : r.nodes) {
    nodes.push_back(toml::table{{"url", n.url},
                                {"name", n.name},
                                {"role", n.role},
                                {"models", to_array(n.models)},
                                {"engine", n.engine}});
    if (!n.agent.empty()) {
      nodes.back().as_table()->insert("agent", n.agent);
    }
  }
  toml::table router{{"listen", r.listen},
                     {"policy", r.policy},
                     {"state_backend", r.state_backend},
                     {"api_keys_file", r.api_keys_file},
                     {"tls_cert", r.tls_cert},
                     {"tls_key", r.tls_key},
                     {"limits", std::move(limits)},
                     {"metrics", std::move(metrics)},
                     {"timeouts", std::move(timeouts)},
                     {"routing", std::move(routing)},
                     {"admission", std::move(admission)},
                     {"disaggregation", toml::table{{"fallback", r.disaggregation.fallback}}}};
  // Secrets: only the variable's name is printed, never its value.
  if (!r.api_keys.env_name().empty()) {
    router.insert("api_keys_env", r.api_keys.env_name());
  }
  if (!nodes.empty()) {
    router.insert("nodes", std::move(nodes));
  }
  toml::table gossip{{"listen", c.state.gossip.listen},
                     {"seeds", to_array(c.state.gossip.seeds)},
                     {"cluster_id", c.state.gossip.cluster_id}};
  if (!c.state.gossip.secret.env_name().empty()) {
    gossip.insert("secret_env", c.state.gossip.secret.env_name());
  }
  if (!c.state.gossip.rotation_secret.env_name().empty()) {
    gossip.insert("rotation_secret_env", c.state.gossip.rotation_secret.env_name());
  }
  if (c.state.gossip.insecure) {
    gossip.insert("insecure", true);
  }
  toml::table etcd{{"endpoints", to_array(c.state.etcd.endpoints)},
                   {"lease_ttl_s", c.state.etcd.lease_ttl_s},
                   {"prefix", c.state.etcd.prefix}};
  for (const auto& [key, value] :
       {std::pair<const char*, const std::string*>{"ca_file", &c.state.etcd.ca_file},
        {"cert_file", &c.state.etcd.cert_file},
        {"key_file", &c.state.etcd.key_file},
        {"username", &c.state.etcd.username},
        {"password_env", &c.state.etcd.password.env_name()}}) {
    if (!value->empty()) {
      etcd.insert(key, *value);
    }
  }
  toml::table state{{"etcd", std::move(etcd)}, {"gossip", std::move(gossip)}};
  // The cluster token: where it comes from, never its value.
  toml::table cluster;
  if (!c.cluster.token_file.empty()) {
    cluster.insert("token_file", c.cluster.token_file);
  }
  if (!c.cluster.token_env.env_name().empty()) {
    cluster.insert("token_env", c.cluster.token_env.env_name());
  }
  toml::table tls{{"require_client_cert", c.tls.require_client_cert}};
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"ca_file", &c.tls.ca_file},
                                   {"cert_file", &c.tls.cert_file},
                                   {"key_file", &c.tls.key_file}}) {
    if (!value->empty()) {
      tls.insert(key, *value);
    }
  }
  toml::array gpus;
  for (uint32_t g2 : c.engine.gpus) {
    gpus.push_back(static_cast<int64_t>(g2));
  }
  toml::table engine{{"kind", c.engine.kind},
                     {"model", c.engine.model},
                     {"port", c.engine.port},
                     {"host", c.engine.host},
                     {"served_name", c.engine.served_name},
                     {"tensor_parallel", c.engine.tensor_parallel},
                     {"extra_args", to_array(c.engine.extra_args)},
                     {"kv_offload", c.engine.kv_offload},
                     {"gpus", std::move(gpus)},
                     {"role", c.engine.role},
                     {"pd_transfer_backend", c.engine.pd_transfer_backend},
                     {"nixl_side_channel_host", c.engine.nixl_side_channel_host},
                     {"nixl_side_channel_port", c.engine.nixl_side_channel_port},
                     {"parallel_slots", c.engine.parallel_slots},
                     {"page_size", c.engine.page_size},
                     {"kv_events", c.engine.kv_events},
                     {"kv_events_port", c.engine.kv_events_port}};
  // Only meaningful (and only valid) for kind = "external".
  if (!c.engine.url.empty()) {
    engine.insert("url", c.engine.url);
  }
  if (!c.engine.attach_kind.empty()) {
    engine.insert("attach_kind", c.engine.attach_kind);
  }
  toml::table root{{"log", toml::table{{"level", c.log.level}, {"file", c.log.file}}},
                   {"router", std::move(router)},
                   {"cluster", std::move(cluster)},
                   {"tls", std::move(tls)},
                   {"state", std::move(state)},
                   {"agent", toml::table{{"node_id", c.agent.node_id},
                                         {"listen", c.agent.listen},
                                         {"watt_limit", c.agent.watt_limit},
                                         {"state_backend", c.agent.state_backend},
                                         {"publish_interval_ms", c.agent.publish_interval_ms},
                                         {"max_published_prefixes", c.agent.max_published_prefixes},
                                         {"engine_metrics", c.agent.engine_metrics},
                                         {"grpc_listen", c.agent.grpc_listen},
                                         {"scrape_interval_ms", c.agent.scrape_interval_ms},
                                         {"probe_interval_ms", c.agent.probe_interval_ms},
                                         {"restart_backoff_initial_ms", c.agent.restart_backoff_initial_ms},
                                         {"restart_backoff_max_ms", c.agent.restart_backoff_max_ms},
                                         {"stop_grace_ms", c.agent.stop_grace_ms},
                                         {"engine_outlives_agent", c.agent.engine_outlives_agent}}},
                   {"engine", std::move(engine)}};
  std::ostringstream out;
  out << toml::toml_formatter{root};
  out << '\n';
  return out.str();
}

}  // namespace cgn::config
