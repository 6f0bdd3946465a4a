#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>
#include <thread>

#include "cluster/node_record.h"
#include "ctl/verbs.h"

namespace cgn::ctl {

namespace {

nlohmann::json row_json(const NodeRow& n) {
  return {{"id", n.id},
          {"address", n.address},
          {"engine", n.engine},
          {"models", n.models},
          {"role", n.role},
          {"ready", n.ready},
          {"queue", n.queue},
          {"kv_used", n.kv_used},
          {"gpu", n.gpu},
          {"cordoned", n.cordoned},
          {"kv_epoch", n.kv_epoch},
          {"heartbeat_age_s", n.heartbeat_age_s},
          {"power_watts", n.power_watts ? nlohmann::json(*n.power_watts) : nlohmann::json(nullptr)}};
}

int nodes_verb(Ctx& ctx) {
  auto client = ctx.etcd("nodes");
  if (!client) {
    return client.error().code;
  }
  auto rows = etcd_nodes(ctx, **client);
  if (!rows) {
    return rows.error().code;
  }
  nlohmann::json j = nlohmann::json::array();
  std::vector<std::vector<std::string>> t = {{"ID", "ENGINE", "MODEL", "ROLE", "HEALTH", "QUEUE", "KV%",
                                              "GPU", "CORDONED", "KV_EPOCH", "HEARTBEAT"}};
  for (const auto& n : *rows) {
    j.push_back(row_json(n));
    t.push_back({n.id, n.engine, n.models, n.role, n.ready ? "ready" : "not-ready",
                 fmt::format("{:g}", n.queue), fmt::format("{:.0f}", n.kv_used * 100),
                 n.gpu.empty() ? "-" : n.gpu, n.cordoned ? "yes" : "no", std::to_string(n.kv_epoch),
                 n.heartbeat_age_s < 0 ? "-" : std::to_string(n.heartbeat_age_s) + "s"});
  }
  ctx.emit(j, table(t));
  return kOk;
}

// One histogram's quantile from its cumulative buckets (linear within a bucket); nullopt: no data.
std::optional<double> quantile(const routing::PromDocument& doc, std::string_view name, double q) {
  std::vector<std::pair<double, double>> buckets;  // le, count (summed over label sets)
  std::map<double, double> by_le;
  for (const auto& s : doc.samples) {
    if (s.name != std::string(name) + "_bucket") {
      continue;
    }
    const std::string* le = s.label("le");
    if (le != nullptr) {
      by_le[*le == "+Inf" ? INFINITY : std::stod(*le)] += s.value;
    }
  }
  if (by_le.empty() || by_le.rbegin()->second <= 0) {
    return std::nullopt;
  }
  const double total = by_le.rbegin()->second;
  double prev_le = 0;
  double prev_n = 0;
  for (const auto& [le, n] : by_le) {
    if (n >= q * total) {
      if (std::isinf(le)) {
        return prev_le;
      }
      const double f = n > prev_n ? (q * total - prev_n) / (n - prev_n) : 1.0;
      return prev_le + f * (le - prev_le);
    }
    prev_le = le;
    prev_n = n;
  }
  return prev_le;
}

double sum_of(const routing::PromDocument& doc, std::string_view name) {
  double v = 0;
  for (const auto& s : doc.samples) {
    v += s.name == name ? s.value : 0;
  }
  return v;
}

std::string cluster_summary(const routing::PromDocument& doc, nlohmann::json& j) {
  std::set<std::string> models;
  double up = 0;
  double nodes = 0;
  double kv = 0;
  for (const auto& s : doc.samples) {
    if (s.name == "cgn_cluster_node_info" && s.label("model") != nullptr) {
      models.insert(*s.label("model"));
    } else if (s.name == "cgn_cluster_node_up") {
      nodes += 1;
      up += s.value;
    } else if (s.name == "cgn_cluster_node_kv_used_ratio") {
      kv += s.value;
    }
  }
  j["nodes"] = nodes;
  j["nodes_up"] = up;
  j["nodes_cordoned"] = sum_of(doc, "cgn_cluster_node_cordoned");
  j["models"] = models;
  j["kv_used_mean"] = nodes > 0 ? kv / nodes : 0;
  j["prefix_index_entries"] = sum_of(doc, "cgn_router_prefix_index_entries");
  const double watts = sum_of(doc, "cgn_cluster_node_power_watts");
  j["power_watts"] = watts > 0 ? nlohmann::json(watts) : nlohmann::json(nullptr);
  std::string model_list;
  for (const auto& m : models) {
    model_list += (model_list.empty() ? "" : ", ") + m;
  }
  return fmt::format(
      "nodes: {:g} ({:g} up, {:g} cordoned)\nmodels: {}\nKV use (mean): {:.0f}%\n"
      "prefix index: {:g} entries\npower: {}\n",
      nodes, up, j["nodes_cordoned"].get<double>(), model_list.empty() ? "-" : model_list,
      j["kv_used_mean"].get<double>() * 100, j["prefix_index_entries"].get<double>(),
      watts > 0 ? fmt::format("{:.0f} W", watts) : "unknown");
}

int status_verb(Ctx& ctx, int interval_ms) {
  auto first = ctx.router_metrics();
  if (!first) {
    return first.error().code;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  auto doc = ctx.router_metrics();
  if (!doc) {
    return doc.error().code;
  }
  nlohmann::json j;
  j["router"] = ctx.opt().router;
  std::string human = "router: " + ctx.opt().router + "\n" + cluster_summary(*doc, j);
  const double rps =
      (sum_of(*doc, "cgn_router_requests_total") - sum_of(*first, "cgn_router_requests_total")) /
      (interval_ms / 1000.0);
  const auto p95 = quantile(*doc, "cgn_router_chat_ttft_seconds", 0.95);
  j["requests_per_s"] = rps;
  j["requests_total"] = sum_of(*doc, "cgn_router_requests_total");
  j["ttft_p95_s"] = p95 ? nlohmann::json(*p95) : nlohmann::json(nullptr);
  human +=
      fmt::format("requests: {:.1f}/s ({:g} total)\nTTFT p95: {}\n", rps, j["requests_total"].get<double>(),
                  p95 ? fmt::format("{:.3f} s", *p95) : "no requests yet");
  auto cfg = ctx.config();
  const std::string backend = cfg ? (*cfg)->router.state_backend : "?";
  j["state_backend"] = backend;
  human += "state backend: " + backend + "\n";
  if (backend == "etcd") {
    if (auto client = ctx.etcd("status"); client) {
      if (auto rows = etcd_nodes(ctx, **client); rows) {
        std::map<std::string, int> by;
        for (const auto& n : *rows) {
          by[n.role + "/" + (n.cordoned ? "cordoned" : n.ready ? "ready" : "not-ready")] += 1;
        }
        j["etcd_nodes"] = by;
        for (const auto& [k, v] : by) {
          human += fmt::format("  {}: {}\n", k, v);
        }
      }
    }
  }
  ctx.emit(j, human);
  return kOk;
}

int cordon_verb(Ctx& ctx, const std::string& node, bool on, std::string_view verb) {
  auto client = ctx.etcd(verb);
  if (!client) {
    return client.error().code;
  }
  auto rec = (*client)->get(ctx.key("nodes/" + node));
  if (!rec) {
    return ctx.fail(kNoEtcd, "etcd: " + rec.error().message);
  }
  if (rec->kvs.empty()) {
    return ctx.fail(kNotFound, "no node '" + node + "' in etcd (" + ctx.key("nodes/") + ")");
  }
  if (on) {
    if (auto st = (*client)->put(ctx.key("cordon/" + node), "true"); !st) {
      return ctx.fail(kNoEtcd, "etcd: " + st.error().message);
    }
  } else if (auto st = (*client)->del(ctx.key("cordon/" + node)); !st) {
    return ctx.fail(kNoEtcd, "etcd: " + st.error().message);
  }
  ctx.emit({{"node", node}, {"cordoned", on}}, node + (on ? " cordoned\n" : " uncordoned\n"));
  return kOk;
}

// The agent's cgn_agent_requests_in_flight; nullopt when the agent does not answer.
std::optional<double> agent_in_flight(Ctx& ctx, const std::string& address) {
  auto r = ctx.http("http://" + address, "GET", "/metrics");
  if (!r || r->status != 200) {
    return std::nullopt;
  }
  auto doc = routing::parse_prometheus_text(r->body);
  if (!doc) {
    return std::nullopt;
  }
  for (const auto& s : doc->samples) {
    if (s.name == "cgn_agent_requests_in_flight") {
      return s.value;
    }
  }
  return std::nullopt;
}

int drain_verb(Ctx& ctx, const std::string& node, int timeout_s) {
  if (int rc = cordon_verb(ctx, node, true, "drain"); rc != kOk) {
    return rc;
  }
  auto client = ctx.etcd("drain");
  if (!client) {
    return client.error().code;
  }
  auto rec = (*client)->get(ctx.key("nodes/" + node));
  auto parsed = rec && !rec->kvs.empty() ? cluster::parse_node_record(rec->kvs[0].value)
                                         : Result<cluster::NodeRecord, cluster::RecordError>(
                                               make_error(cluster::RecordError::kShape, "record gone"));
  if (!parsed) {
    return ctx.fail(kFailed, "node '" + node + "': " + parsed.error().message);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::optional<double> last;
  while (true) {
    auto n = agent_in_flight(ctx, parsed->address);
    if (!n) {
      return ctx.fail(kNoRouter, "the agent of '" + node + "' at " + parsed->address +
                                     " does not answer /metrics with cgn_agent_requests_in_flight");
    }
    if (!ctx.opt().json && (!last || *last != *n)) {
      ctx.out() << node << ": " << *n << " request(s) in flight\n" << std::flush;
    }
    last = n;
    if (*n <= 0) {
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return ctx.fail(kFailed,
                      fmt::format("drain of '{}' timed out after {} s with {:g} request(s) in flight "
                                  "(the node stays cordoned)",
                                  node, timeout_s, *n));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ctx.emit({{"node", node}, {"drained", true}, {"cordoned", true}},
           node + " drained (cordoned, 0 in flight)\n");
  return kOk;
}

}  // namespace

Result<std::vector<NodeRow>, int> etcd_nodes(Ctx& ctx, etcd::EtcdClient& client) {
  auto recs = client.get_prefix(ctx.key("nodes/"));
  auto cordons = client.get_prefix(ctx.key("cordon/"));
  if (!recs || !cordons) {
    return make_error(
        ctx.fail(kNoEtcd, std::string("etcd: ") + (!recs ? recs.error() : cordons.error()).message), "etcd");
  }
  std::set<std::string> cordoned;
  for (const auto& kv : cordons->kvs) {
    cordoned.insert(kv.key.substr(ctx.key("cordon/").size()));
  }
  std::vector<NodeRow> rows;
  for (const auto& kv : recs->kvs) {
    auto r = cluster::parse_node_record(kv.value);
    if (!r) {
      continue;  // a record this version cannot read: the router ignores it too
    }
    NodeRow n{r->node_id, r->address, r->engine};
    for (const auto& m : r->models) {
      n.models += (n.models.empty() ? "" : ",") + m;
    }
    n.role = std::string(routing::to_string(r->role));
    n.ready = r->ready;
    n.queue = r->queue_depth.value_or(0);
    n.kv_used = r->total_blocks > 0 && r->free_blocks
                    ? 1.0 - static_cast<double>(*r->free_blocks) / static_cast<double>(r->total_blocks)
                    : 0;
    n.gpu = r->gpu ? r->gpu->gpu_name : "";
    n.cordoned = r->cordon || cordoned.contains(r->node_id);
    n.kv_epoch = r->kv_epoch;
    n.power_watts = r->power_watts;
    if (kv.lease != 0) {
      if (auto ttl = client.lease_time_to_live(kv.lease); ttl && ttl->ttl_seconds >= 0) {
        n.heartbeat_age_s = ttl->granted_seconds - ttl->ttl_seconds;
      }
    }
    rows.push_back(std::move(n));
  }
  return rows;
}

void register_cluster_verbs(Registry& r) {
  r.push_back({"status", "the cluster at a glance: nodes, models, requests/s, TTFT p95, KV use, index, power",
               [](CLI::App& cmd) -> VerbRun {
                 auto ms = std::make_shared<int>(1000);
                 cmd.add_option("--interval-ms", *ms, "the window requests/s is measured over")
                     ->check(CLI::Range(100, 60000));
                 return [ms](Ctx& ctx) { return status_verb(ctx, *ms); };
               }});
  r.push_back({"nodes", "every node in etcd: engine, model, role, health, queue, KV %, GPU, cordon, kv_epoch",
               [](CLI::App&) -> VerbRun { return nodes_verb; }});
  for (const bool on : {true, false}) {
    r.push_back({on ? "cordon" : "uncordon",
                 on ? "take a node out of routing (needs etcd)"
                    : "put a cordoned node back into routing (needs etcd)",
                 [on](CLI::App& cmd) -> VerbRun {
                   auto node = std::make_shared<std::string>();
                   cmd.add_option("node", *node, "the node id")->required();
                   return [node, on](Ctx& ctx) {
                     return cordon_verb(ctx, *node, on, on ? "cordon" : "uncordon");
                   };
                 }});
  }
  r.push_back({"drain", "cordon a node, then wait until its agent serves no request (needs etcd)",
               [](CLI::App& cmd) -> VerbRun {
                 auto node = std::make_shared<std::string>();
                 auto timeout = std::make_shared<int>(300);
                 cmd.add_option("node", *node, "the node id")->required();
                 cmd.add_option("--timeout-s", *timeout,
                                "give up (exit 1, node left cordoned) after this long")
                     ->check(CLI::Range(1, 86400));
                 return [node, timeout](Ctx& ctx) { return drain_verb(ctx, *node, *timeout); };
               }});
}

}  // namespace cgn::ctl
