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

#include "core/config_schema.h"

namespace cgn::config {
namespace {

constexpr double kMaxMs = 1e9;

template <class S>
using SectionPtr = std::shared_ptr<const Section<S>>;

template <class S>
SectionPtr<S> freeze(Section<S> s) {
  return std::make_shared<const Section<S>>(std::move(s));
}

constexpr std::string_view kLogLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
constexpr std::string_view kFallbacks[] = {"aggregated", "reject"};

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

// [cluster]: the tokens come from a file or the environment, never both.
bool readable(const std::string& path) {
  return !path.empty() && std::ifstream(path).good();
}

void load_token_file(TableReader& t, ClusterConfig& c) {
  std::ifstream f(c.token_file);
  if (c.token_file.empty() || !f) {
    t.fail("token_file", ConfigError::io,
           fmt::format("names {}, which cannot be read", quoted(c.token_file)));
    return;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  c.tokens = split_tokens(ss.str(), '\n');
}

void use_token_env(TableReader& t, ClusterConfig& c) {
  if (t.has("token_file")) {
    t.fail("token_env", ConfigError::bad_value, "is set beside token_file; give one or the other");
    return;
  }
  c.tokens = split_tokens(c.token_env.reveal(), ',');
}

void check_cluster_tokens(TableReader& t, ClusterConfig& c) {
  std::string_view from;
  if (t.has("token_file") && !t.has("token_env") && readable(c.token_file)) {
    from = "token_file";
  } else if (t.has("token_env") && !t.has("token_file") && !c.token_env.env_name().empty()) {
    from = "token_env";
  } else {
    return;  // nothing configured, or already reported
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

// A PEM file key: a string naming a readable file, printed only when set.
template <class S>
Field<S> pem(std::string S::*member, std::string key, std::string doc) {
  Field<S> f = value(member, key, std::move(doc));
  f.range = "readable PEM file";
  f.get = [member, key](TableReader& r, S& s) {
    get_pem_path(r, key, s.*member);
    return r.has(key);
  };
  return std::move(f).omit_empty();
}

SectionPtr<LogConfig> log_section() {
  Section<LogConfig> s("log");
  s.add(one_of(&LogConfig::level, "level", kLogLevels, "a `--log-level` flag overrides it"));
  s.add(value(&LogConfig::file, "file", "log file; empty: stderr"));
  return freeze(std::move(s));
}

SectionPtr<LimitsConfig> limits_section() {
  using L = LimitsConfig;
  Section<L> s("router.limits");
  s.add(value(&L::max_body_bytes, "max_body_bytes",
              "largest request body; a longer one gets 413 before it is read to the end",
              Range<uint64_t>{1, uint64_t{1} << 32}));
  s.add(value(&L::max_json_depth, "max_json_depth", "deepest JSON nesting of a body",
              Range<uint32_t>{1, 1024}));
  s.add(value(&L::max_messages, "max_messages", "most chat messages in one request",
              Range<uint32_t>{1, 1u << 20}));
  s.add(value(&L::max_header_bytes, "max_header_bytes", "all request headers together; over: 431",
              Range<uint32_t>{1024, 1u << 20}));
  s.add(value(&L::max_connections, "max_connections",
              "open client connections; one more is answered 503 `server_busy` and closed (keep the "
              "process's file limit above it)",
              Range<uint32_t>{1, 1u << 20}));
  s.add(value(&L::max_buffered_bytes, "max_buffered_bytes",
              "request bodies held in memory over all connections; a body is reserved at its Content-Length "
              "once its headers are in (chunked: as it grows), and one that would go over is answered 503 "
              "`server_busy` before it is read",
              Range<uint64_t>{1u << 20, uint64_t{1} << 40}));
  s.add(value(&L::reject_log_interval_s, "reject_log_interval_s",
              "refusals (bad key, a cap, a client's `kv_transfer_params`) are logged at most once per reason "
              "and client address per interval",
              Range<uint32_t>{1, 86'400}));
  return freeze(std::move(s));
}

SectionPtr<MetricsConfig> metrics_section() {
  Section<MetricsConfig> s("router.metrics");
  s.add(checked(&MetricsConfig::listen, "listen", Form::host_port,
                "a listener that serves only `/metrics` (CORS kept); set, the API listener answers 404 for "
                "`/metrics`; empty: the API listener serves it"));
  s.add(
      secret_env(&MetricsConfig::key, "key_env",
                 "name of an environment variable holding a bearer key (16-512 printable bytes) that "
                 "`/metrics` then requires (`Authorization: Bearer <key>`; the API keys do not open it; CORS "
                 "preflights need none)"));
  return freeze(std::move(s));
}

SectionPtr<AdminConfig> admin_section() {
  Section<AdminConfig> s("router.admin");
  s.add(secret_env(&AdminConfig::key, "key_env",
                   "name of an environment variable holding the admin bearer key (16-512 printable bytes) "
                   "that `/admin/v1/` (`cgn-ctl routes explain`) requires; separate from the API keys, which "
                   "do not open it; unset: the admin endpoints answer 403"));
  return freeze(std::move(s));
}

SectionPtr<TimeoutsConfig> timeouts_section() {
  using T = TimeoutsConfig;
  constexpr Range<uint32_t> kPositive{1, 86'400'000};
  Section<T> s("router.timeouts");
  s.add(value(&T::connect_ms, "connect_ms", "TCP connect to a node", kPositive));
  s.add(value(&T::first_token_ms, "first_token_ms", "request sent to first byte of the node's answer",
              kPositive));
  s.add(value(&T::idle_ms, "idle_ms", "longest gap between two streamed chunks", kPositive));
  s.add(value(&T::request_ms, "request_ms", "the whole request, stream included", kPositive));
  s.add(value(&T::shutdown_grace_ms, "shutdown_grace_ms",
              "in-flight streams may finish this long after SIGTERM", Range<uint32_t>{0, 86'400'000}));
  s.add(value(&T::health_interval_ms, "health_interval_ms", "static backend: health poll period per node",
              Range<uint32_t>{10, 3'600'000}));
  s.add(value(
      &T::continue_ms, "continue_ms",
      "agents only (etcd/gossip nodes, static nodes with `agent`): requests go with `Expect: 100-continue` "
      "and their body only after the agent's `100 Continue`; none within this is a failed connect, so the "
      "request moves to the next node (a killed or hung agent is found in this time, not after "
      "`first_token_ms`). `0` sends no `Expect`. Bare OpenAI endpoints never get `Expect`",
      Range<uint32_t>{0, 86'400'000}));
  s.add(value(&T::passive_retry_ms, "passive_retry_ms",
              "a node that refused a connection (or sent no `100 Continue`) leaves routing at once and is "
              "tried again after this long; a static node's next health poll may bring it back sooner. etcd "
              "and gossip nodes are not polled, so without this a node that refused once would stay out "
              "until its record changed",
              Range<uint32_t>{10, 3'600'000}));
  return freeze(std::move(s));
}

SectionPtr<ScoreWeights> weights_section() {
  using W = ScoreWeights;
  constexpr Range<double> kMs{0.0, kMaxMs};
  Section<W> s("router.routing.weights");
  s.add(value(&W::prefill_ms_per_block, "prefill_ms_per_block",
              "ms to prefill one block the node must still compute, for a node that reports no prefill speed",
              kMs));
  s.add(value(&W::queue_ms_per_request, "queue_ms_per_request", "ms per request waiting in the node's queue",
              kMs));
  s.add(
      value(&W::running_ms_per_request, "running_ms_per_request", "ms per request the node is running", kMs));
  s.add(value(&W::inflight_prefill_weight, "inflight_prefill_weight",
              "how much the prompt tokens this router sent to a node and that are not yet prefilled count as "
              "wait there (0: not at all)",
              Range<double>{0.0, 1000.0}));
  s.add(value(&W::uncached_weight, "uncached_weight",
              "kv policy: weight of the uncached prefill against the wait when ranking (1: pure TTFT)",
              Range<double>{0.0, 1000.0}));
  s.add(value(&W::kv_knee, "kv_knee", "KV-use ratio above which `kv_pressure_ms` starts to apply",
              Range<double>{0.0, 0.999}));
  s.add(value(&W::kv_pressure_ms, "kv_pressure_ms", "added at 100% KV use, linearly less down to `kv_knee`",
              kMs));
  s.add(value(&W::power_penalty_ms, "power_penalty_ms", "added when a node is over its soft `watt_limit`",
              kMs));
  s.add(value(&W::ram_tier_credit, "ram_tier_credit",
              "a block held only in the node's cgn-kvcached RAM tier counts this much",
              Range<double>{0.0, 1.0}));
  s.add(value(&W::ssd_tier_credit, "ssd_tier_credit", "a block held only on the cgn-kvcached SSD tier",
              Range<double>{0.0, 1.0}));
  s.add(value(&W::temperature, "temperature",
              "0: lowest score wins; above 0: softmax sampling over scores (ms)",
              Range<double>{0.0, 1000.0}));
  return freeze(std::move(s));
}

SectionPtr<LoadGuardConfig> load_guard_section() {
  using G = LoadGuardConfig;
  Section<G> s("router.routing.load_guard");
  s.add(value(&G::max_queue_depth, "max_queue_depth", "a node with a deeper queue is not eligible",
              Range<uint32_t>{1, 1'000'000}));
  s.add(value(&G::max_kv_used, "max_kv_used", "a node above this KV-use ratio is not eligible",
              Range<double>{0.0, 1.0}));
  s.add(value(
      &G::spread_min_gap, "spread_min_gap",
      "spread rule: when busiest minus least busy waiting count (queue depth, or the router's in-flight "
      "requests before their first token; decoding requests do not count) is at least this ...",
      Range<uint32_t>{1, 1'000'000}));
  s.add(value(&G::spread_ratio, "spread_ratio",
              "... and busiest / (least busy + 1) is at least this, overlap is ignored",
              Range<double>{1.0, 1e6}));
  return freeze(std::move(s));
}

SectionPtr<RoutingConfig> routing_section() {
  using R = RoutingConfig;
  Section<R> s("router.routing");
  s.add(value(&R::block_bytes, "block_bytes", "bytes of canonical prompt per prefix digest; a multiple of 64",
              Range<uint32_t>{64, 1024})
            .then([](TableReader& r, R& c) {
              if (c.block_bytes % 64 != 0) {
                r.fail("block_bytes", ConfigError::bad_value,
                       fmt::format("expected a multiple of 64 in [64, 1024], got {}", c.block_bytes));
                c.block_bytes = R{}.block_bytes;
              }
            }));
  s.add(value(&R::index_ttl_s, "index_ttl_s",
              "optimistic prefix-index entries expire unless a node confirms them",
              Range<uint32_t>{1, 86'400}));
  s.add(value(
      &R::max_staleness_ms, "max_staleness_ms",
      "`state_backend = \"static\"`: a node whose poll has not answered for this long leaves routing until "
      "the next answer (`/health` counts it in `nodes_stale`, `cgn_cluster_node_up` reads 0, and the router "
      "logs it once); must exceed the poll period (`health_interval_ms` or `--poll-interval-ms`); 0: off. "
      "Under `etcd` and `gossip` it does not apply: a node stays in routing while its record is on a live "
      "lease (etcd) or its member is alive (gossip), however long the record goes unchanged",
      Range<uint32_t>{0, 86'400'000}));
  s.add(
      value(&R::index_max_entries, "index_max_entries",
            "cap on prefix-index (digest, node) entries; over it the node holding the most loses its least "
            "recently used entry. 0: sized from the engines' capacity (each node holds at most its KV pool's "
            "digest capacity, so the index holds at most their sum); else at least 1024",
            Range<uint64_t>{0, uint64_t{1} << 32})
          .then([](TableReader& r, R& c) {
            if (c.index_max_entries != 0 && c.index_max_entries < 1024) {
              r.fail("index_max_entries", ConfigError::out_of_range,
                     fmt::format("expected 0 (sized from the engines' capacity) or a value in [1024, "
                                 "4294967296], got {}",
                                 c.index_max_entries));
              c.index_max_entries = R{}.index_max_entries;
            }
          }));
  s.add(table(&R::weights, "weights", weights_section()));
  s.add(table(&R::load_guard, "load_guard", load_guard_section()));
  return freeze(std::move(s));
}

SectionPtr<ModelAdmission> model_admission_section() {
  using M = ModelAdmission;
  constexpr Range<uint32_t> kQueue{0, 1'000'000};
  Section<M> s("router.admission.models.\"<model>\"");
  s.add(optional(&M::max_queue, "max_queue", "both roles (default: `[router.admission] max_queue`)", kQueue));
  s.add(optional(&M::prefill_max_queue, "prefill_max_queue",
                 "prefill role (default: the model's `max_queue`)", kQueue));
  s.add(optional(&M::decode_max_queue, "decode_max_queue", "decode role (default: the model's `max_queue`)",
                 kQueue));
  return freeze(std::move(s));
}

SectionPtr<AdmissionConfig> admission_section() {
  using A = AdmissionConfig;
  Section<A> s("router.admission");
  s.add(value(&A::max_queue, "max_queue", "default cap per (model, role); 0: unlimited",
              Range<uint32_t>{0, 1'000'000}));
  s.add(value(&A::retry_after_s, "retry_after_s", "`Retry-After` on a 429", Range<uint32_t>{0, 3600}));
  auto models = model_admission_section();
  Field<A> f = custom<A>(
      "models", "table", "", "",
      [models](TableReader& r, A& c) {
        return r.table("models", [&](TableReader& m) {
          m.named_tables([&](const std::string& name, TableReader& t) {
            ModelAdmission one;
            models->read(t, one);
            c.models[name] = one;
          });
        });
      },
      [models](const A& c, toml::table& t) {
        toml::table all;
        for (const auto& [name, m] : c.models) {
          all.insert(name, models->write(m));
        }
        if (!all.empty()) {
          t.insert("models", std::move(all));
        }
      });
  f.children = [models](std::vector<DocTable>& out) { models->document(out); };
  s.add(std::move(f));
  return freeze(std::move(s));
}

// "http://host:port/x" -> "host:port".
std::string host_port_of(std::string_view url) {
  auto scheme = url.find("://");
  std::string_view rest = scheme == std::string_view::npos ? url : url.substr(scheme + 3);
  return std::string(rest.substr(0, rest.find('/')));
}

SectionPtr<NodeConfig> node_section() {
  using N = NodeConfig;
  Section<N> s("router.nodes");
  Field<N> url = checked(&N::url, "url", Form::url, "base URL requests go to").shown_default("**required**");
  url.get = [](TableReader& t, N& n) {
    return t.has("url") ? t.get_url("url", n.url) : t.require("url", n.url);
  };
  s.add(std::move(url));
  s.add(value(&N::name, "name", "node name in logs, metrics and `X-CGN-Node`; unique")
            .shown_default("the URL's `host:port`"));
  s.add(one_of(&N::role, "role", kNodeRoles, "the node's part in disaggregated serving"));
  s.add(value(&N::models, "models", "models served; empty: learned from the node's `/v1/models`"));
  s.add(checked(
      &N::agent, "agent", Form::host_port,
      "the node's cgn-agent gRPC service (`[agent] grpc_listen`). Set: the node is an agent, polled through "
      "`Agent.Health` for its node record (health, role, models, load, KV pool, `kv_epoch`, GPU, power) "
      "instead of `/health`, `/metrics` and `/v1/models`; `url` stays where requests go (the agent's HTTP "
      "`listen`). A configured `models` list wins over the record's. Empty: a bare engine"));
  s.add(one_of(&N::engine, "engine", kNodeEngines,
               "the engine behind the URL, which picks the `/metrics` mapping the router scrapes for load "
               "and KV use (`trtllm`: `/prometheus/metrics`); `mlx` and `cgn-infer` have no mapping: health "
               "and models only, so load-aware routing sees only the router's own in-flight count"));
  return freeze(std::move(s));
}

Field<RouterConfig> nodes_field() {
  auto nodes = node_section();
  Field<RouterConfig> f = custom<RouterConfig>(
      "nodes", "array of tables", "", "",
      [nodes](TableReader& r, RouterConfig& c) {
        std::set<std::string> names;
        return r.tables("nodes", [&](TableReader& t, size_t) {
          NodeConfig n;
          nodes->read(t, n);
          if (n.name.empty()) {
            n.name = host_port_of(n.url);
          }
          if (!n.name.empty() && !names.insert(n.name).second) {
            t.fail(t.has("name") ? "name" : "url", ConfigError::bad_value,
                   fmt::format("duplicates node name \"{}\"; node names must be unique", n.name));
          }
          c.nodes.push_back(std::move(n));
        });
      },
      [nodes](const RouterConfig& c, toml::table& t) {
        toml::array all;
        for (const auto& n : c.nodes) {
          all.push_back(nodes->write(n));
        }
        if (!all.empty()) {
          t.insert("nodes", std::move(all));
        }
      });
  f.children = [nodes](std::vector<DocTable>& out) { nodes->document(out); };
  return f;
}

SectionPtr<DisaggregationConfig> disaggregation_section() {
  Section<DisaggregationConfig> s("router.disaggregation");
  s.add(one_of(
      &DisaggregationConfig::fallback, "fallback", kFallbacks,
      "when no prefill node is eligible (none healthy, all cordoned or overloaded) or every prefill attempt "
      "fails: `aggregated` serves the whole request on a decode (or `both`) node, which computes the prompt "
      "itself; `reject` answers 503 `no_prefill_node` (or the last prefill failure)"));
  return freeze(std::move(s));
}

// Rules of [router.carbon] that span keys: what each provider needs.
void check_carbon(TableReader& r, CarbonConfig& c) {
  const auto need = [&](bool ok, std::string_view key, std::string_view why) {
    if (!ok) {
      r.fail(key, ConfigError::missing_key,
             fmt::format("is required with provider = \"{}\" ({})", c.provider, why));
    }
  };
  if (c.provider == "electricitymaps") {
    need(!c.zone.empty(), "zone", "the Electricity Maps zone, e.g. \"DE\"");
    need(!c.token.env_name().empty(), "token_env", "the variable holding the auth-token");
  } else if (c.provider == "watttime") {
    need(!c.zone.empty(), "zone", "the WattTime region, e.g. \"CAISO_NORTH\"");
    need(!c.username.empty(), "username", "the WattTime login");
    need(!c.password.env_name().empty(), "password_env", "the variable holding the password");
  }
  if (!c.url.empty() && c.url.rfind("http://", 0) != 0 && c.url.rfind("https://", 0) != 0) {
    r.fail("url", ConfigError::bad_value,
           fmt::format("expected an http:// or https:// URL, got \"{}\"", c.url));
  }
}

// WattTime signal types: rates only. A percentile (the signal index) cannot be compared with a
// threshold in gCO2/kWh.
void check_signal_type(TableReader& r, CarbonConfig& c) {
  if (c.signal_type == "co2_moer" || c.signal_type == "co2_aoer") {
    return;
  }
  const bool percentile =
      c.signal_type == "signal_index" || c.signal_type == "percent" || c.signal_type == "co2_moer_index";
  r.fail("signal_type", ConfigError::bad_value,
         percentile
             ? fmt::format("\"{}\" is a 0-100 percentile, not a rate; the threshold is in gCO2/kWh, so use "
                           "\"co2_moer\" or \"co2_aoer\"",
                           c.signal_type)
             : fmt::format("expected \"co2_moer\" or \"co2_aoer\" (an emissions rate), got \"{}\"",
                           c.signal_type));
  c.signal_type = CarbonConfig{}.signal_type;
}

SectionPtr<GrpcConfig> grpc_section() {
  using G = GrpcConfig;
  Section<G> s("router.grpc");
  s.add(checked(&G::listen, "listen", Form::host_port,
                "the gRPC API's listener (`cognitora.v1.Router/Generate` and `grpc.health.v1`, "
                "docs/grpc-api.md); empty: none"));
  s.add(value(
      &G::tls_cert, "tls_cert",
      "PEM certificate for the gRPC listener; give both `tls_cert` and `tls_key` or neither (plaintext)"));
  s.add(value(&G::tls_key, "tls_key", "PEM private key"));
  s.add(value(&G::tls_client_ca, "tls_client_ca",
              "PEM CA; set, every gRPC client must present a certificate it verifies (mutual TLS); needs "
              "`tls_cert`"));
  s.check([](TableReader& r, G& c) {
    if (c.tls_cert.empty() != c.tls_key.empty()) {
      const bool cert = !c.tls_cert.empty();
      r.fail(cert ? "tls_cert" : "tls_key", ConfigError::missing_key,
             fmt::format("is set but '{}' is not; give both or neither",
                         r.key_path(cert ? "tls_key" : "tls_cert")));
    } else if (!c.tls_client_ca.empty() && c.tls_cert.empty()) {
      r.fail("tls_client_ca", ConfigError::missing_key,
             fmt::format("needs '{}' and '{}': mutual TLS is TLS first", r.key_path("tls_cert"),
                         r.key_path("tls_key")));
    }
  });
  return freeze(std::move(s));
}

SectionPtr<CarbonConfig> carbon_section() {
  using C = CarbonConfig;
  Section<C> s("router.carbon");
  s.add(one_of(&C::provider, "provider", kCarbonProviders,
               "grid-intensity source; `off`: no carbon gate (every request passes)"));
  s.add(value(&C::zone, "zone", "Electricity Maps zone (`DE`) or WattTime region (`CAISO_NORTH`)"));
  s.add(value(&C::url, "url",
              "provider base URL; empty: `https://api.electricitymap.org` or "
              "`https://api.watttime.org`"));
  s.add(value(&C::threshold_gco2_per_kwh, "threshold_gco2_per_kwh",
              "`X-CGN-Priority: low` requests get 429 while the reading is strictly above this; at or "
              "below it they pass",
              Range<double>{0.0, 1e5}));
  s.add(value(&C::static_gco2_per_kwh, "static_gco2_per_kwh", "`provider = \"static\"`: the reading",
              Range<double>{0.0, 1e5}));
  s.add(secret_env(&C::token, "token_env", "Electricity Maps: variable holding the `auth-token`"));
  s.add(value(&C::username, "username", "WattTime: login name"));
  s.add(secret_env(&C::password, "password_env", "WattTime: variable holding the password"));
  s.add(value(&C::signal_type, "signal_type",
              "WattTime signal: `co2_moer` or `co2_aoer` (lbs/MWh, converted to gCO2/kWh); a percentile "
              "signal is refused")
            .then(check_signal_type));
  s.add(value(&C::poll_interval_ms, "poll_interval_ms",
              "time between polls; a reading older than 3 intervals is stale and the gate fails open",
              Range<uint32_t>{100, 86'400'000}));
  s.add(value(&C::timeout_ms, "timeout_ms", "connect + answer, per provider request",
              Range<uint32_t>{100, 600'000}));
  s.add(value(&C::max_backoff_ms, "max_backoff_ms",
              "after failures the next poll waits interval x 2^(failures-1), at most this (and at least a "
              "429's `Retry-After`)",
              Range<uint32_t>{100, 86'400'000}));
  s.check(check_carbon);
  return freeze(std::move(s));
}

SectionPtr<CascadeStepConfig> cascade_step_section() {
  using C = CascadeStepConfig;
  Section<C> s("router.cascade.aliases.\"<alias>\".steps");
  Field<C> model = value(&C::model, "model", "the model this step runs on (a model some node serves)")
                       .shown_default("**required**");
  model.get = [](TableReader& t, C& c) {
    if (!t.require("model", c.model)) {
      return false;
    }
    if (c.model.empty()) {
      t.fail("model", ConfigError::bad_value, "must not be empty");
      return false;
    }
    return true;
  };
  s.add(std::move(model));
  s.add(one_of(&C::statistic, "statistic", kCascadeStatistics,
               "gated steps: the confidence of an answer, `mean` or `min` of its token logprobs")
            .shown_default("`mean`"));
  s.add(optional(&C::threshold, "threshold",
                 "gated steps (**required** there): the answer is accepted when its statistic is at least "
                 "this logprob (e.g. `-0.5` = a mean token probability of about 0.61)",
                 Range<double>{-100.0, 0.0}));
  s.add(optional(&C::first_tokens, "first_tokens",
                 "gated steps: the statistic over the answer's first N tokens; 0: over the whole answer",
                 Range<uint32_t>{0, 1'000'000}));
  return freeze(std::move(s));
}

// Rules of one alias that span its steps: at least two, distinct models, every step but the
// last gated (a threshold), the last one not.
void check_cascade_alias(TableReader& r, const CascadeAliasConfig& a) {
  if (a.steps.size() < 2) {
    r.fail("steps", a.steps.empty() ? ConfigError::missing_key : ConfigError::bad_value,
           "needs at least two steps (cheap -> expensive); the last one serves what the others escalate");
    return;
  }
  std::set<std::string> models;
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const CascadeStepConfig& st = a.steps[i];
    const bool last = i + 1 == a.steps.size();
    if (!models.insert(st.model).second) {
      r.fail("steps", ConfigError::bad_value,
             fmt::format("steps[{}]: model \"{}\" appears twice; each step runs a different model", i,
                         st.model));
    }
    if (!last && !st.threshold) {
      r.fail("steps", ConfigError::missing_key,
             fmt::format("steps[{}]: 'threshold' is required on a gated step (every step but the last)", i));
    }
    if (last && (st.threshold || !st.statistic.empty() || st.first_tokens)) {
      r.fail(
          "steps", ConfigError::bad_value,
          fmt::format("steps[{}] is the last step, which is never gated: remove 'threshold', 'statistic' and "
                      "'first_tokens' there",
                      i));
    }
  }
}

SectionPtr<CascadeConfig> cascade_section() {
  using C = CascadeConfig;
  Section<C> s("router.cascade");
  auto steps = cascade_step_section();
  Section<CascadeAliasConfig> alias("router.cascade.aliases.\"<alias>\"");
  alias.add(
      value(&CascadeAliasConfig::deadline_reserve_ms, "deadline_reserve_ms",
            "with `X-CGN-Deadline-Ms`: the part of the budget gated steps leave to the last step (beyond "
            "its estimated time to first token); a gated step is skipped when no more is left and cut "
            "off when it would use it",
            Range<uint32_t>{0, 86'400'000}));
  Field<CascadeAliasConfig> step_field = custom<CascadeAliasConfig>(
      "steps", "array of tables", "", "",
      [steps](TableReader& r, CascadeAliasConfig& a) {
        return r.tables("steps", [&](TableReader& t, size_t) {
          CascadeStepConfig one;
          steps->read(t, one);
          a.steps.push_back(std::move(one));
        });
      },
      [steps](const CascadeAliasConfig& a, toml::table& t) {
        toml::array all;
        for (const auto& st : a.steps) {
          all.push_back(steps->write(st));
        }
        if (!all.empty()) {
          t.insert("steps", std::move(all));
        }
      });
  step_field.children = [steps](std::vector<DocTable>& out) { steps->document(out); };
  alias.add(std::move(step_field));
  alias.check(check_cascade_alias);
  auto aliases = freeze(std::move(alias));
  Field<C> f = custom<C>(
      "aliases", "table", "", "",
      [aliases](TableReader& r, C& c) {
        return r.table("aliases", [&](TableReader& m) {
          m.named_tables([&](const std::string& name, TableReader& t) {
            CascadeAliasConfig one;
            aliases->read(t, one);
            c.aliases[name] = std::move(one);
          });
        });
      },
      [aliases](const C& c, toml::table& t) {
        toml::table all;
        for (const auto& [name, a] : c.aliases) {
          all.insert(name, aliases->write(a));
        }
        if (!all.empty()) {
          t.insert("aliases", std::move(all));
        }
      });
  f.children = [aliases](std::vector<DocTable>& out) { aliases->document(out); };
  s.add(std::move(f));
  return freeze(std::move(s));
}

SectionPtr<RouterConfig> router_section() {
  using R = RouterConfig;
  Section<R> s("router");
  s.add(checked(&R::listen, "listen", Form::host_port, "the OpenAI API (IPv6 as `[::]:8080`)"));
  s.add(one_of(&R::policy, "policy", kRoutingPolicies, "`kv` is the prefix-aware score"));
  s.add(one_of(&R::state_backend, "state_backend", kStateBackends,
               "where nodes come from: `[[router.nodes]]`, `[state.etcd]` or `[state.gossip]`; the top-level "
               "`state_backend` sets it too"));
  s.add(value(&R::api_keys_file, "api_keys_file", "file with one API key per line; empty: none"));
  s.add(secret_env(&R::api_keys, "api_keys_env",
                   "name of an environment variable holding API keys, comma separated"));
  s.add(value(&R::tls_cert, "tls_cert",
              "PEM certificate for HTTPS; give both `tls_cert` and `tls_key` or neither"));
  s.add(value(&R::tls_key, "tls_key", "PEM private key"));
  s.check([](TableReader& r, R& c) {
    if (c.tls_cert.empty() != c.tls_key.empty()) {
      const bool cert = !c.tls_cert.empty();
      r.fail(cert ? "tls_cert" : "tls_key", ConfigError::missing_key,
             fmt::format("is set but '{}' is not; give both or neither",
                         r.key_path(cert ? "tls_key" : "tls_cert")));
    }
  });
  s.add(table(&R::limits, "limits", limits_section()));
  s.add(table(&R::metrics, "metrics", metrics_section()));
  s.add(table(&R::admin, "admin", admin_section()));
  s.add(table(&R::timeouts, "timeouts", timeouts_section()));
  s.add(table(&R::routing, "routing", routing_section()));
  s.add(table(&R::admission, "admission", admission_section()));
  s.add(table(&R::disaggregation, "disaggregation", disaggregation_section()));
  s.add(table(&R::carbon, "carbon", carbon_section()));
  s.add(table(&R::grpc, "grpc", grpc_section()));
  s.add(table(&R::cascade, "cascade", cascade_section()));
  s.add(nodes_field());
  return freeze(std::move(s));
}

SectionPtr<ClusterConfig> cluster_section() {
  using C = ClusterConfig;
  Section<C> s("cluster");
  s.add(
      value(
          &C::token_file, "token_file",
          "file with one token per line (`#` starts a comment line); each at least 16 characters. The first "
          "is presented, every one is accepted, so a rotation lists the new and the old token")
          .omit_empty()
          .then(load_token_file));
  s.add(
      secret_env(&C::token_env, "token_env",
                 "name of an environment variable holding the tokens, comma separated (same rules); not with "
                 "`token_file`")
          .then(use_token_env));
  s.check(check_cluster_tokens);
  return freeze(std::move(s));
}

SectionPtr<TlsConfig> tls_section() {
  using T = TlsConfig;
  Section<T> s("tls");
  s.add(pem(&T::ca_file, "ca_file", "CA that verifies peers; required with `cert_file`"));
  s.add(pem(&T::cert_file, "cert_file",
            "this process's certificate chain (with `key_file`, both or neither). Set: servers serve TLS "
            "with it, clients present it and verify servers (host name against the certificate)"));
  s.add(pem(&T::key_file, "key_file", "the key of `cert_file`"));
  s.add(value(
      &T::require_client_cert, "require_client_cert",
      "servers refuse clients without a certificate `ca_file` verifies; a verified client certificate then "
      "stands in for the cluster token"));
  s.check([](TableReader& t, T&) {
    both_or_neither(t, "cert_file", "key_file");
    if (t.has("cert_file") && !t.has("ca_file")) {
      t.fail("cert_file", ConfigError::missing_key,
             fmt::format("is set but '{}' is not; peers are verified against it", t.key_path("ca_file")));
    }
  });
  return freeze(std::move(s));
}

void check_etcd(TableReader& t, EtcdConfig& c) {
  both_or_neither(t, "cert_file", "key_file");
  const bool any_https = std::any_of(c.endpoints.begin(), c.endpoints.end(),
                                     [](const std::string& e) { return e.starts_with("https://"); });
  const bool any_http = std::any_of(c.endpoints.begin(), c.endpoints.end(),
                                    [](const std::string& e) { return e.starts_with("http://"); });
  if (any_https && any_http) {
    t.fail("endpoints", ConfigError::bad_value, "mixes http:// and https:// endpoints; use one scheme");
  } else if (any_https && c.ca_file.empty()) {
    t.fail("endpoints", ConfigError::missing_key,
           fmt::format("are https:// but '{}' is not set (the CA that signed etcd's certificate)",
                       t.key_path("ca_file")));
  } else if (!any_https && (t.has("ca_file") || t.has("cert_file"))) {
    t.fail(t.has("ca_file") ? "ca_file" : "cert_file", ConfigError::bad_value,
           "is set but no endpoint is https://");
  }
  both_or_neither(t, "username", "password_env");
}

SectionPtr<EtcdConfig> etcd_section() {
  using E = EtcdConfig;
  Section<E> s("state.etcd");
  s.add(checked(&E::endpoints, "endpoints", Form::url_list,
                "etcd v3 endpoints, all of one scheme; at least one")
            .then([](TableReader& t, E& c) {
              if (c.endpoints.empty()) {
                t.fail("endpoints", ConfigError::bad_value, "expected at least one endpoint, got []");
              }
            }));
  s.add(
      pem(&E::ca_file, "ca_file",
          "the CA that signed etcd's certificate; required with `https://` endpoints, refused without them"));
  s.add(pem(&E::cert_file, "cert_file",
            "client certificate (with `key_file`), for etcd's `--client-cert-auth`"));
  s.add(pem(&E::key_file, "key_file", "the key of `cert_file`"));
  s.add(value(&E::username, "username",
              "etcd user (etcd auth), with `password_env`: the client authenticates, sends the token on "
              "every call and stream, and authenticates again when etcd refuses it (expired after "
              "`--auth-token-ttl`, or forgotten by a restart)")
            .omit_empty());
  s.add(secret_env(&E::password, "password_env",
                   "name of the environment variable holding that user's password; with `username`"));
  s.add(
      value(&E::lease_ttl_s, "lease_ttl_s",
            "TTL of the heartbeat lease holding a node's record and KV prefixes (agents keep it alive every "
            "TTL/3)",
            Range<uint32_t>{2, 3600}));
  s.add(value(&E::prefix, "prefix", "key prefix (`<prefix>/nodes/<node>`, `<prefix>/kv/<node>/<digest>`)")
            .then([](TableReader& t, E& c) {
              if (!c.prefix.starts_with('/')) {
                t.fail("prefix", ConfigError::bad_value,
                       fmt::format("expected a path starting with '/', got {}", quoted(c.prefix)));
              }
            }));
  s.check(check_etcd);
  return freeze(std::move(s));
}

SectionPtr<GossipConfig> gossip_section() {
  using G = GossipConfig;
  Section<G> s("state.gossip");
  s.add(checked(&G::listen, "listen", Form::host_port, "UDP address"));
  s.add(checked(&G::seeds, "seeds", Form::host_port_list, "a few members to join through"));
  s.add(value(&G::cluster_id, "cluster_id", "members of other clusters are ignored; not empty")
            .then([](TableReader& t, G& c) {
              if (c.cluster_id.empty()) {
                t.fail("cluster_id", ConfigError::bad_value, "expected a non-empty string, got \"\"");
              }
            }));
  s.add(secret_env(
      &G::secret, "secret_env",
      "name of an environment variable holding the cluster key that signs and checks every packet; "
      "required unless `insecure = true`"));
  s.add(
      secret_env(&G::rotation_secret, "rotation_secret_env",
                 "name of a variable holding a second key, accepted but never used to sign, for the overlap "
                 "while keys rotate; only beside `secret_env`"));
  s.add(
      value(&G::insecure, "insecure",
            "run gossip without a key: packets are unsigned and anyone who reaches the port can join; logged "
            "as a warning at start; not with `secret_env`"));
  s.check([](TableReader& t, G& c) {
    if (c.insecure && t.has("secret_env")) {
      t.fail("insecure", ConfigError::bad_value, "is true but secret_env is set; give one or the other");
    }
    if (t.has("rotation_secret_env") && !t.has("secret_env")) {
      t.fail("rotation_secret_env", ConfigError::missing_key,
             fmt::format("is set but '{}' is not; the rotation key is only accepted beside a signing key",
                         t.key_path("secret_env")));
    }
  });
  return freeze(std::move(s));
}

SectionPtr<StateConfig> state_section() {
  Section<StateConfig> s("state");
  s.add(table(&StateConfig::etcd, "etcd", etcd_section()));
  s.add(table(&StateConfig::gossip, "gossip", gossip_section()));
  return freeze(std::move(s));
}

SectionPtr<AgentConfig> agent_section() {
  using A = AgentConfig;
  Section<A> s("agent");
  s.add(value(&A::node_id, "node_id",
              "at most 128 characters from `[A-Za-z0-9._-]` (an etcd key and a metric label); empty: the "
              "host name")
            .then([](TableReader& r, A& c) {
              if (!valid_node_id(c.node_id)) {
                r.fail(
                    "node_id", ConfigError::bad_value,
                    "expected at most 128 characters from [A-Za-z0-9._-] (it is a key in etcd and a metric "
                    "label)");
              }
            }));
  s.add(checked(&A::listen, "listen", Form::host_port,
                "the agent's HTTP service (data path, health); every interface by default because the router "
                "on another host must reach it: close it with `[cluster]` (and `[tls]`), docs/security.md"));
  s.add(value(&A::watt_limit, "watt_limit", "soft power limit in watts; 0: none", Range<double>{0.0, 1e6}));
  s.add(checked(&A::grpc_listen, "grpc_listen", Form::host_port,
                "the gRPC service `cognitora.v1.Agent` (`Health`: node record + engine state); port 0: any "
                "free port (logged; `cgn-agent --grpc-port-file` writes it). A configured address that "
                "cannot be bound stops the agent; the default one only logs a warning"));
  s.add(value(&A::scrape_interval_ms, "scrape_interval_ms", "engine `/metrics` scrape period",
              Range<uint32_t>{50, 600000}));
  s.add(value(&A::probe_interval_ms, "probe_interval_ms",
              "engine health probe period while starting or unhealthy", Range<uint32_t>{10, 60000}));
  s.add(value(
      &A::restart_backoff_initial_ms, "restart_backoff_initial_ms",
      "first restart delay after the engine exits; doubles per crash; not above `restart_backoff_max_ms`",
      Range<uint32_t>{10, 3600000}));
  s.add(value(&A::restart_backoff_max_ms, "restart_backoff_max_ms", "cap on the restart delay",
              Range<uint32_t>{10, 3600000}));
  s.add(value(&A::stop_grace_ms, "stop_grace_ms",
              "SIGTERM to the engine's process group, then SIGKILL after this", Range<uint32_t>{0, 600000}));
  s.add(value(&A::engine_outlives_agent, "engine_outlives_agent",
              "`false`: the engine gets SIGKILL when its agent dies, however it dies (`kill -9` included), "
              "so its port, GPU memory and the agent's port come free for a replacement. `true`: an agent "
              "that dies leaves its engine running (a graceful stop still stops it); a new agent on the same "
              "`[engine] port` then fails until the old engine is stopped"));
  s.check([](TableReader& r, A& c) {
    if (c.restart_backoff_initial_ms > c.restart_backoff_max_ms) {
      r.fail("restart_backoff_initial_ms", ConfigError::bad_value,
             fmt::format("{} is above restart_backoff_max_ms ({})", c.restart_backoff_initial_ms,
                         c.restart_backoff_max_ms));
    }
  });
  s.add(one_of(
      &A::state_backend, "state_backend", kStateBackends,
      "`static`: publish nothing (the router polls the agent); `etcd`: publish the node record and live "
      "KV prefixes; `gossip`: publish the node record to the members; the top-level `state_backend` sets "
      "it too"));
  s.add(value(&A::publish_interval_ms, "publish_interval_ms",
              "etcd: KV-prefix changes are written at most once per interval, in one txn",
              Range<uint32_t>{10, 60000}));
  s.add(value(&A::max_published_prefixes, "max_published_prefixes",
              "cap on live KV prefix keys; the engine's capacity may bound it lower",
              Range<uint32_t>{0, 4096}));
  s.add(value(&A::engine_metrics, "engine_metrics",
              "the agent's `/metrics` also relays the engine's own exposition"));
  return freeze(std::move(s));
}

SectionPtr<EngineConfig> engine_section() {
  using E = EngineConfig;
  Section<E> s("engine");
  s.add(one_of(&E::kind, "kind", kEngineKinds,
               "the engine the agent spawns; `external`: attach to a running one"));
  s.add(value(&E::model, "model", "model to load (path or hub name)"));
  s.add(value(&E::port, "port", "port the engine listens on", Range<uint16_t>{1, 65535}));
  s.add(value(&E::host, "host",
              "IP address a spawned engine binds its HTTP API to (`--host`); loopback so that only the agent "
              "reaches it. Another address exposes the engine (and, for SGLang P/D, its bootstrap server) "
              "directly; the agent then reaches it there (127.0.0.1 for `0.0.0.0`/`::`)")
            .then([](TableReader& r, E& c) {
              if (!valid_ip_literal(c.host)) {
                r.fail(
                    "host", ConfigError::bad_value,
                    fmt::format("expected an IP address (127.0.0.1, 0.0.0.0, ::1), got {}", quoted(c.host)));
              }
            }));
  s.add(value(&E::served_name, "served_name", "model name clients use; empty: same as `model`"));
  s.add(value(&E::tensor_parallel, "tensor_parallel", "GPUs per replica", Range<uint32_t>{1, 64}));
  s.add(value(&E::extra_args, "extra_args", "passed to the engine verbatim"));
  Field<E> offload = one_of(&E::kv_offload, "kv_offload", kKvOffloads,
                            "what each driver passes (or rejects) is in docs/agent.md. The older boolean "
                            "form is read as `false` = `none`, `true` = `cgn`");
  offload.get = [](TableReader& r, E& c) {
    if (!r.holds_bool("kv_offload")) {
      return r.get_one_of("kv_offload", c.kv_offload, kKvOffloads);
    }
    bool on = false;
    r.get("kv_offload", on);
    c.kv_offload = on ? "cgn" : "none";
    return true;
  };
  s.add(std::move(offload));
  s.add(value(&E::gpus, "gpus", "device indices; empty: all visible", Range<uint32_t>{0, 1023}));
  s.add(one_of(
      &E::role, "role", kNodeRoles,
      "the node's part in disaggregated serving; sets the engine's KV-transfer flags and the record's role"));
  s.add(checked(&E::url, "url", Form::url,
                "`kind = \"external\"` only: the running engine; empty: `http://127.0.0.1:<port>`")
            .then([](TableReader& r, E& c) {
              if (c.kind != "external") {
                r.fail("url", ConfigError::bad_value,
                       "is only for kind = \"external\" (a spawned engine listens on port)");
              }
            }));
  s.add(one_of(
      &E::attach_kind, "attach_kind", kAttachKinds,
      "`kind = \"external\"` only: whose health semantics and metrics mapping apply; empty: `GET /health` "
      "200 and no scrape"));
  s.add(one_of(&E::pd_transfer_backend, "pd_transfer_backend", kPdTransferBackends,
               "KV transfer for prefill/decode roles (`mooncake`: SGLang only)"));
  s.add(value(&E::nixl_side_channel_host, "nixl_side_channel_host",
              "vLLM `VLLM_NIXL_SIDE_CHANNEL_HOST` (the address decode nodes reach this prefill node's side "
              "channel at; it binds there); always exported with NIXL, empty: `127.0.0.1` (P/D on one host). "
              "For P/D across hosts set this node's address"));
  s.add(value(&E::nixl_side_channel_port, "nixl_side_channel_port",
              "vLLM `VLLM_NIXL_SIDE_CHANNEL_PORT`; 0: not exported (vLLM's default 5600)",
              Range<uint16_t>{0, 65535}));
  s.add(value(&E::parallel_slots, "parallel_slots", "llama.cpp `--parallel`", Range<uint32_t>{1, 1024}));
  s.add(value(&E::page_size, "page_size",
              "SGLang `--page-size`; 0: not passed (SGLang's default 1). Also the divisor for SGLang's pool "
              "size in blocks",
              Range<uint32_t>{0, 65536}));
  s.add(value(
      &E::kv_events, "kv_events",
      "KV events: `vllm`, `sglang` and `sim` launch the engine with `--kv-events-config` (ZMQ PUB bound on "
      "`tcp://*:<kv_events_port>`), and the agent subscribes and withdraws the prefixes the engine evicts "
      "(docs/agent.md \"KV events\"); `external` subscribes only; other kinds reject it"));
  s.add(value(&E::kv_events_port, "kv_events_port",
              "the engine's KV-events port; give each engine on a host its own", Range<uint16_t>{1, 65535}));
  return freeze(std::move(s));
}

SectionPtr<KvcachedConfig> kvcached_section() {
  using K = KvcachedConfig;
  Section<K> s("kvcached");
  s.add(checked(
      &K::listen, "listen", Form::host_port,
      "the gRPC service `cognitora.v1.KvCache` (PutBlock, GetBlock, BatchLookup, Stats), with `[tls]` "
      "when set; port 0: any free port (`cgn-kvcached --port-file` writes it)"));
  s.add(checked(&K::metrics_listen, "metrics_listen", Form::host_port,
                "HTTP `/metrics` (`cgn_kvcached_*`); port 0: any free port"));
  s.add(value(&K::socket, "socket",
              "the local fast path's Unix socket (SOCK_SEQPACKET, mode 0660; a stale file is replaced at "
              "start and removed at stop); empty: no fast path"));
  s.add(value(&K::ram_bytes, "ram_bytes", "the RAM tier: one arena allocated at start",
              Range<uint64_t>{1ull << 20, 1ull << 42}));
  s.add(value(&K::page_bytes, "page_bytes", "arena allocation unit; a power of two",
              Range<uint32_t>{4096, 1u << 24})
            .then([](TableReader& r, K& c) {
              if ((c.page_bytes & (c.page_bytes - 1)) != 0) {
                r.fail("page_bytes", ConfigError::bad_value,
                       fmt::format("{} is not a power of two", c.page_bytes));
              }
            }));
  s.add(value(&K::max_block_bytes, "max_block_bytes", "the largest block accepted; at most `ram_bytes`",
              Range<uint64_t>{1, 1ull << 32}));
  s.add(value(&K::high_watermark, "high_watermark",
              "RAM use above this fraction starts a background spill round", Range<double>{0.1, 1.0}));
  s.add(value(&K::spill_fraction, "spill_fraction",
              "the fraction of the arena one spill round moves to SSD (or frees, without SSD)",
              Range<double>{0.001, 1.0}));
  s.add(
      value(&K::max_lease_ms, "max_lease_ms",
            "a BatchLookup / LOOKUP lease longer than this is cut to it; 0: leases are refused silently (no "
            "lease)",
            Range<uint32_t>{0, 600000}));
  s.add(value(&K::ssd_dir, "ssd_dir",
              "the SSD tier's segment files (created if missing; rescanned at start); empty: no SSD tier"));
  s.add(value(&K::ssd_max_bytes, "ssd_max_bytes",
              "the SSD tier's size bound (oldest segments go first); 0: bounded by the filesystem"));
  s.add(value(&K::ssd_segment_bytes, "ssd_segment_bytes", "a segment file is closed past this size",
              Range<uint64_t>{1ull << 20, 1ull << 36}));
  s.add(value(&K::ssd_ttl_s, "ssd_ttl_s", "SSD records older than this are dropped; 0: no TTL",
              Range<uint32_t>{0, 31'536'000}));
  s.add(one_of(&K::direct_io, "direct_io", kDirectIoModes,
               "`auto`: O_DIRECT where the filesystem accepts it, buffered where it refuses (tmpfs); `on`: "
               "O_DIRECT or the daemon does not start; `off`: buffered"));
  s.add(value(&K::max_connections, "max_connections",
              "local fast path connections at once; one more is closed at accept", Range<uint32_t>{1, 4096}));
  s.add(value(&K::max_handles_per_connection, "max_handles_per_connection",
              "open puts and pinned gets per fast path connection; one more is refused (`BUSY`)",
              Range<uint32_t>{1, 65536}));
  s.check([](TableReader& r, K& c) {
    if (c.max_block_bytes > c.ram_bytes) {
      r.fail("max_block_bytes", ConfigError::bad_value,
             fmt::format("{} is above ram_bytes ({}): a block must fit the RAM tier", c.max_block_bytes,
                         c.ram_bytes));
    }
    if (c.ssd_dir.empty() && (c.ssd_max_bytes != 0 || c.ssd_ttl_s != 0)) {
      r.fail(c.ssd_max_bytes != 0 ? "ssd_max_bytes" : "ssd_ttl_s", ConfigError::bad_value,
             "is set but ssd_dir is not (there is no SSD tier)");
    }
  });
  return freeze(std::move(s));
}

SectionPtr<PowerSourceConfig> power_source_section() {
  using P = PowerSourceConfig;
  Section<P> s("power.sources");
  s.add(value(&P::name, "name", "the source's name: the `source` label of its samples; unique")
            .shown_default("the kind"));
  Field<P> kind = one_of(&P::kind, "kind", kPowerSourceKinds, "what the source reads (docs/power.md)")
                      .shown_default("**required**");
  kind.get = [](TableReader& t, P& p) {
    return t.has("kind") ? t.get_one_of("kind", p.kind, kPowerSourceKinds) : t.require("kind", p.kind);
  };
  s.add(std::move(kind));
  s.add(checked(
      &P::url, "url", Form::url,
      "`dcgm_exporter`: the exporter's `/metrics` URL; `redfish`: the BMC's base URL; required there"));
  s.add(checked(&P::target, "target", Form::host_port,
                "`cgn_power`: `HOST:PORT` of a running cgn-power's `[power] listen`, reached with this "
                "file's `[tls]` when set; required there"));
  s.add(
      value(&P::path, "path",
            "`rapl`: the powercap root (`/sys/class/powercap`); `nvml`: the library (`libnvidia-ml.so.1`); "
            "`rocm_smi`: the library (`librocm_smi64.so`); `ipmi`: the ipmitool binary (`ipmitool`); empty: "
            "the default in parentheses"));
  s.add(value(&P::device, "device",
              "`static`: the device label (default `node`); `redfish`: the chassis id "
              "(default `1`)"));
  s.add(
      value(&P::watts, "watts", "`static`: the configured draw in W; required there", Range<double>{0, 1e6}));
  s.add(one_of(&P::redfish_schema, "redfish_schema", kRedfishSchemas,
               "`redfish`: `power` reads the legacy `Chassis/<id>/Power`, `environment` reads "
               "`Chassis/<id>/EnvironmentMetrics`"));
  s.add(
      one_of(&P::auth, "auth", kRedfishAuths,
             "`redfish`: `basic` sends the credentials on every request, `session` logs in once per BMC and "
             "sends `X-Auth-Token`"));
  s.add(value(&P::ca_file, "ca_file",
              "`redfish` with an `https://` url: a PEM CA bundle the BMC's certificate must chain to (BMCs "
              "often carry a certificate from a site CA); empty: the system CAs"));
  s.add(value(&P::username, "username", "`redfish`: the BMC user; with `password_env`"));
  s.add(secret_env(&P::password, "password_env", "`redfish`: the variable holding that user's password"));
  s.add(value(&P::timeout_ms, "timeout_ms", "one reading (an HTTP exchange, an ipmitool run)",
              Range<uint32_t>{10, 600000}));
  s.check([](TableReader& r, P& p) {
    if ((p.kind == "dcgm_exporter" || p.kind == "redfish") && p.url.empty()) {
      r.fail("url", ConfigError::bad_value, fmt::format("is required for kind = \"{}\"", p.kind));
    }
    if (p.kind == "cgn_power" && p.target.empty()) {
      r.fail("target", ConfigError::bad_value, "is required for kind = \"cgn_power\"");
    }
    if (p.kind == "static" && !r.has("watts")) {
      r.fail("kind", ConfigError::bad_value, "static needs `watts`");
    }
    if (p.username.empty() != p.password.env_name().empty()) {
      r.fail(p.username.empty() ? "password_env" : "username", ConfigError::bad_value,
             "needs the other of `username` and `password_env`; give both or neither");
    }
  });
  return freeze(std::move(s));
}

Field<PowerConfig> power_sources_field() {
  auto sources = power_source_section();
  Field<PowerConfig> f = custom<PowerConfig>(
      "sources", "array of tables", "", "",
      [sources](TableReader& r, PowerConfig& c) {
        std::set<std::string> names;
        return r.tables("sources", [&](TableReader& t, size_t) {
          PowerSourceConfig p;
          sources->read(t, p);
          if (p.name.empty()) {
            p.name = p.kind;
          }
          if (!p.name.empty() && !names.insert(p.name).second) {
            t.fail(t.has("name") ? "name" : "kind", ConfigError::bad_value,
                   fmt::format("duplicates source name \"{}\"; give each source a unique name", p.name));
          }
          c.sources.push_back(std::move(p));
        });
      },
      [sources](const PowerConfig& c, toml::table& t) {
        toml::array all;
        for (const auto& p : c.sources) {
          all.push_back(sources->write(p));
        }
        if (!all.empty()) {
          t.insert("sources", std::move(all));
        }
      });
  f.children = [sources](std::vector<DocTable>& out) { sources->document(out); };
  return f;
}

SectionPtr<PowerConfig> power_section() {
  using P = PowerConfig;
  Section<P> s("power");
  s.add(checked(&P::listen, "listen", Form::host_port,
                "cgn-power's gRPC service `cognitora.v1.Power`, with `[tls]` when set; port 0: any free port "
                "(`cgn-power --port-file` writes it)"));
  s.add(checked(&P::metrics_listen, "metrics_listen", Form::host_port,
                "HTTP `/metrics` (`cgn_power_*`); port 0: any free port"));
  s.add(value(&P::poll_interval_ms, "poll_interval_ms", "how often every source is read",
              Range<uint32_t>{10, 3'600'000}));
  s.add(power_sources_field());
  return freeze(std::move(s));
}

// The top-level state_backend is the value of [router] and [agent] state_backend; one of them
// set to something else is an error naming both places.
void apply_state_backend(TableReader& root, const std::string& top, std::string_view section,
                         std::string& value) {
  if (root.has_in(section, "state_backend") && value != top) {
    root.fail("state_backend", ConfigError::bad_value,
              fmt::format("is {} but '{}.state_backend' is {}; give one value or set it in one place",
                          quoted(top), section, quoted(value)));
    return;
  }
  value = top;
}

SectionPtr<CognitoraConfig> root_section() {
  using C = CognitoraConfig;
  Section<C> s("");
  s.add(one_of(&C::state_backend, "state_backend", kStateBackends,
               "sets `[router] state_backend` and `[agent] state_backend` at once; either one set to another "
               "value is an error")
            .shown_default("unset"));
  s.add(table(&C::log, "log", log_section()));
  s.add(table(&C::router, "router", router_section()));
  s.add(table(&C::cluster, "cluster", cluster_section()));
  s.add(table(&C::tls, "tls", tls_section()));
  s.add(table(&C::state, "state", state_section()));
  s.add(table(&C::agent, "agent", agent_section()));
  s.add(table(&C::engine, "engine", engine_section()));
  s.add(table(&C::kvcached, "kvcached", kvcached_section()));
  s.add(table(&C::power, "power", power_section()));
  s.check([](TableReader& root, C& c) {
    if (!c.state_backend.empty()) {
      apply_state_backend(root, c.state_backend, "router", c.router.state_backend);
      apply_state_backend(root, c.state_backend, "agent", c.agent.state_backend);
    }
  });
  return freeze(std::move(s));
}

const Section<CognitoraConfig>& schema() {
  static const SectionPtr<CognitoraConfig> root = root_section();
  return *root;
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
  schema().read(root, cfg);
  root.finish();
}

std::vector<DocTable> reference_tables() {
  std::vector<DocTable> out;
  schema().document(out);
  return out;
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
  std::ostringstream out;
  out << toml::toml_formatter{schema().write(c)};
  out << '\n';
  return out.str();
}

}  // namespace cgn::config
