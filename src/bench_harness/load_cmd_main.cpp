// `cgn-bench load`: flags in, bench_harness/load_gen does the work (docs/benchmarks.md).
// Part of the cgn-bench binary (main.cpp registers it), not of the library.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "bench_harness/load_cmd.h"
#include "bench_harness/load_gen.h"
#include "bench_harness/report.h"
#include "core/log.h"

namespace cgn::bench {
namespace {

struct LoadFlags {
  std::string workload = "small";
  std::string trace;
  size_t limit = 0;
  uint64_t seed = 1;
  std::vector<std::string> targets;
  uint32_t nodes = 0;
  double level = 0;
  double time_scale = 0;
  double rate = 0;
  double engine_time_scale = 1.0;
  double duration = 0;
  double drain = 120;
  std::string model = "meta-llama/Llama-3.1-8B-Instruct";
  bool no_session = false;
  std::string out_md;
  std::string out_json;
  std::string out_records;
  std::string log_level = "warn";
};

std::string fmt_num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

int run(const LoadFlags& f) {
  if (!log::set_level(f.log_level)) {
    std::fprintf(stderr, "cgn-bench load: bad --log-level '%s'\n", f.log_level.c_str());
    return 2;
  }
  const int modes = (f.level > 0 ? 1 : 0) + (f.time_scale > 0 ? 1 : 0) + (f.rate > 0 ? 1 : 0);
  if (modes != 1) {
    std::fprintf(stderr, "cgn-bench load: give exactly one of --level, --time-scale, --rate\n");
    return 2;
  }
  if (f.targets.empty()) {
    std::fprintf(stderr, "cgn-bench load: give at least one --target [POLICY=]http://HOST:PORT\n");
    return 2;
  }
  std::vector<LoadTarget> targets;
  for (const auto& spec : f.targets) {
    auto t = parse_target(spec);
    if (!t) {
      std::fprintf(stderr, "cgn-bench load: %s\n", t.error().message.c_str());
      return 2;
    }
    targets.push_back(*t);
  }

  Workload w;
  uint32_t nodes = f.nodes;
  if (f.workload == "conversation" || f.workload == "synthetic" || !f.trace.empty()) {
    const std::string path = f.trace.empty() ? trace_path(f.workload) : f.trace;
    auto loaded = load_mooncake_trace(path);
    if (!loaded) {
      std::fprintf(stderr, "cgn-bench load: %s\n", loaded.error().message.c_str());
      return 1;
    }
    w = std::move(*loaded);
  } else {
    auto preset = shared_prefix_preset(f.workload);
    if (!preset) {
      std::fprintf(stderr, "cgn-bench load: %s\n", preset.error().message.c_str());
      return 2;
    }
    w = make_shared_prefix(*preset, f.seed);
  }
  w = take_first(w, f.limit);
  if (w.requests.empty()) {
    std::fprintf(stderr, "cgn-bench load: the workload is empty\n");
    return 2;
  }

  LoadOptions o;
  o.model = f.model;
  o.engine_time_scale = f.engine_time_scale;
  o.duration_s = f.duration;
  o.drain_s = f.drain;
  o.session_header = !f.no_session;
  ClusterConfig cc;
  cc.model_name = f.model;
  LoadLevel level;
  const double span_s = static_cast<double>(w.requests.back().arrival - w.requests.front().arrival) * 1e-9;
  if (f.level > 0) {
    if (nodes == 0) {
      std::fprintf(stderr, "cgn-bench load: --level needs -n/--nodes (the cluster size it is relative to)\n");
      return 2;
    }
    cc.nodes = nodes;
    level = load_level(w, cc, f.level);
    o.arrival_scale = level.time_scale * f.engine_time_scale;
  } else if (f.time_scale > 0) {
    o.arrival_scale = f.time_scale;
    level.utilisation = 0;
    level.time_scale = f.time_scale / f.engine_time_scale;
    level.rate_rps = span_s > 0 ? static_cast<double>(w.requests.size()) / (span_s * level.time_scale) : 0;
  } else {
    o.rate_rps = f.rate;
    level.utilisation = 0;
    level.time_scale = 0;
    level.rate_rps = f.rate * f.engine_time_scale;
  }
  if (auto v = validate(o); !v) {
    std::fprintf(stderr, "cgn-bench load: %s\n", v.error().message.c_str());
    return 2;
  }

  WorkloadReport r;
  r.workload = w.name;
  LevelReport lr;
  lr.level = level;
  std::vector<LiveStats> live;
  nlohmann::json records = nlohmann::json::array();
  uint32_t seen_nodes = 0;
  for (const auto& t : targets) {
    std::fprintf(stderr, "cgn-bench load: %s -> http://%s:%u ...\n", t.policy.c_str(), t.host.c_str(),
                 t.port);
    auto res = run_load(w, t, o);
    if (!res) {
      std::fprintf(stderr, "cgn-bench load: %s\n", res.error().message.c_str());
      return 2;
    }
    std::fprintf(
        stderr, "cgn-bench load: %s sent %llu, completed %llu, shed %llu, errors %llu (%.1f s wall)%s%s\n",
        t.policy.c_str(), static_cast<unsigned long long>(res->live.sent),
        static_cast<unsigned long long>(res->live.completed), static_cast<unsigned long long>(res->live.shed),
        static_cast<unsigned long long>(res->result.errors), res->live.wall_s,
        res->live.first_error.empty() ? "" : "; first error: ", res->live.first_error.c_str());
    seen_nodes = std::max<uint32_t>(seen_nodes, static_cast<uint32_t>(res->live.nodes.size()));
    r.requests = std::max<size_t>(r.requests, res->live.sent);
    if (!f.out_records.empty()) {
      for (const auto& q : res->records) {
        records.push_back({{"policy", t.policy},
                           {"index", q.index},
                           {"outcome", to_string(q.outcome)},
                           {"status", q.status},
                           {"node", q.node},
                           {"due_ns", q.due},
                           {"sent_ns", q.sent},
                           {"first_token_ns", q.first_token},
                           {"last_token_ns", q.last_token},
                           {"done_ns", q.done},
                           {"prompt_tokens", q.prompt_tokens},
                           {"completion_tokens", q.completion_tokens},
                           {"cached_tokens", q.cached_tokens},
                           {"error", q.error}});
      }
    }
    lr.policies.push_back(std::move(res->result));
    live.push_back(std::move(res->live));
  }
  // The report describes the requests sent (a --duration bound may have cut the workload).
  Workload sent = take_first(w, r.requests);
  for (const auto& q : sent.requests) {
    r.mean_input_tokens += q.input_tokens();
    r.mean_output_tokens += q.output_tokens;
  }
  if (!sent.requests.empty()) {
    r.mean_input_tokens /= static_cast<double>(sent.requests.size());
    r.mean_output_tokens /= static_cast<double>(sent.requests.size());
  }
  r.nodes = nodes > 0 ? nodes : seen_nodes;
  cc.nodes = std::max<uint32_t>(r.nodes, 1);
  r.ideal_hit_rate = ideal_hit_rate(sent, cc);
  r.levels.push_back(std::move(lr));
  r.headline_index = 0;
  for (const auto& p : r.levels[0].policies) {
    r.throughput_rps.push_back(p.completed > 0 && p.ttft_p90_s <= o.slo_ttft_s ? level.rate_rps : 0);
  }

  std::string md = "## cgn-bench load (live, client-side)\n\n";
  md += "Arrivals: ";
  md += f.level > 0        ? "load level " + fmt_num(f.level) + " of " + std::to_string(nodes) + " nodes"
        : f.time_scale > 0 ? "trace timestamps x" + fmt_num(f.time_scale)
                           : fmt_num(f.rate) + " req/s, evenly spaced";
  md += "; wall arrivals = trace x " + fmt_num(o.arrival_scale) + ". Engine time scale " +
        fmt_num(f.engine_time_scale) + ": latencies, makespan and rates below are wall / " +
        fmt_num(f.engine_time_scale) +
        " (engine-model seconds). Busy, imbalance and guarded are not observable from the client (0).\n\n";
  md += render_markdown(r);
  md +=
      "#### Client\n\n| policy | sent | completed | shed (429) | HTTP errors | transport errors | stream "
      "errors | "
      "cut | no usage | no cached_tokens | max send lag ms | wall s | nodes |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (size_t i = 0; i < live.size(); ++i) {
    const LiveStats& s = live[i];
    std::string nodes_txt;
    for (size_t n = 0; n < s.nodes.size(); ++n) {
      nodes_txt +=
          (n ? ", " : "") + s.nodes[n] + ": " + std::to_string(r.levels[0].policies[i].per_node_requests[n]);
    }
    char row[512];
    std::snprintf(row, sizeof row,
                  "| %s | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %.1f | %.1f | ",
                  r.levels[0].policies[i].policy.c_str(), static_cast<unsigned long long>(s.sent),
                  static_cast<unsigned long long>(s.completed), static_cast<unsigned long long>(s.shed),
                  static_cast<unsigned long long>(s.http_errors),
                  static_cast<unsigned long long>(s.transport_errors),
                  static_cast<unsigned long long>(s.stream_errors), static_cast<unsigned long long>(s.cut),
                  static_cast<unsigned long long>(s.usage_missing),
                  static_cast<unsigned long long>(s.cached_missing), 1e3 * s.max_send_lag_s, s.wall_s);
    md += row + nodes_txt + " |\n";
  }
  md += "\n";
  std::cout << md;
  if (!f.out_md.empty()) {
    std::ofstream(f.out_md) << md;
  }
  if (!f.out_json.empty()) {
    nlohmann::json j = to_json(r);
    j["live"] = true;
    j["arrival_scale"] = o.arrival_scale;
    j["engine_time_scale"] = f.engine_time_scale;
    auto& c = j["client"];
    c = nlohmann::json::object();
    for (size_t i = 0; i < live.size(); ++i) {
      const LiveStats& s = live[i];
      c[r.levels[0].policies[i].policy] = {{"sent", s.sent},
                                           {"completed", s.completed},
                                           {"shed", s.shed},
                                           {"http_errors", s.http_errors},
                                           {"transport_errors", s.transport_errors},
                                           {"stream_errors", s.stream_errors},
                                           {"cut", s.cut},
                                           {"usage_missing", s.usage_missing},
                                           {"cached_missing", s.cached_missing},
                                           {"max_send_lag_s", s.max_send_lag_s},
                                           {"wall_s", s.wall_s},
                                           {"nodes", s.nodes},
                                           {"first_error", s.first_error}};
    }
    std::ofstream(f.out_json) << j.dump(2) << "\n";
  }
  if (!f.out_records.empty()) {
    std::ofstream out(f.out_records);
    for (const auto& q : records) {
      out << q.dump() << "\n";
    }
  }
  return 0;
}

}  // namespace

std::function<int()> add_load_command(CLI::App& app) {
  auto f = std::make_shared<LoadFlags>();
  auto* c = app.add_subcommand("load", "live load generator: replay a workload over HTTP against a router");
  c->add_option(
      "-w,--workload", f->workload,
      "conversation | synthetic (Mooncake traces) | llmd | small (shared-prefix presets; default small)");
  c->add_option("--trace", f->trace, "a Mooncake trace file (overrides the workload's default path)");
  c->add_option("--limit", f->limit, "replay only the first N requests (0 = all)");
  c->add_option("--seed", f->seed, "synthetic workload seed (as cgn-bench sim)");
  c->add_option("--target", f->targets,
                "[POLICY=]http://HOST:PORT of a router (repeatable; runs one after another, reported side by "
                "side under POLICY)")
      ->required();
  c->add_option("-n,--nodes", f->nodes,
                "engines behind each router (--level needs it; the ideal bound uses it)");
  c->add_option(
      "--level", f->level,
      "arrivals scaled as cgn-bench sim's load level (round_robin-equivalent utilisation of --nodes)");
  c->add_option("--time-scale", f->time_scale, "arrivals at the trace's timestamps x this (wall)");
  c->add_option("--rate", f->rate, "arrivals at this many requests per wall second, evenly spaced");
  c->add_option("--engine-time-scale", f->engine_time_scale,
                "the engines' --time-scale (cgn-engine-sim); arrivals are compressed by it and latencies "
                "reported in engine-model seconds (default 1: real engines)");
  c->add_option("--duration", f->duration,
                "send no request later than this many wall seconds (0 = no bound)");
  c->add_option("--drain", f->drain, "wall seconds the last requests get after the last send (default 120)");
  c->add_option("--model", f->model, "the model name sent (default as cgn-bench sim)");
  c->add_flag("--no-session-header", f->no_session, "do not send X-Session-Id");
  c->add_option("--md", f->out_md, "write the markdown report here");
  c->add_option("--json", f->out_json, "write the JSON report here");
  c->add_option("--records", f->out_records, "write one JSON line per request here");
  c->add_option("--log-level", f->log_level, "log level (default warn)");
  return [c, f]() -> int { return c->parsed() ? run(*f) : -1; };
}

}  // namespace cgn::bench
