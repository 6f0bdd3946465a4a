// `cgn-bench load`: flags in, bench_harness/load/load_gen does the work (docs/benchmarks-live.md).
#include "bench_harness/load/load_cmd.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "bench_harness/load/load_gen.h"
#include "bench_harness/report.h"
#include "core/cli_parse.h"
#include "core/log.h"

namespace cgn::bench {
namespace {

std::string fmt_num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

Error<int> fail(int status, const std::string& msg) {
  return cli_exit(status, "cgn-bench load: " + msg + "\n");
}

// The log level, the arrival mode and the targets.
CliResult<std::vector<LoadTarget>> check_flags(const LoadCommandOptions& f) {
  if (!log::set_level(f.log_level)) {
    return fail(2, "bad --log-level '" + f.log_level + "'");
  }
  const int modes = (f.level > 0 ? 1 : 0) + (f.time_scale > 0 ? 1 : 0) + (f.rate > 0 ? 1 : 0);
  if (modes != 1) {
    return fail(2, "give exactly one of --level, --time-scale, --rate");
  }
  if (f.targets.empty()) {
    return fail(2, "give at least one --target [POLICY=]http://HOST:PORT");
  }
  std::vector<LoadTarget> targets;
  for (const auto& spec : f.targets) {
    auto t = parse_target(spec);
    if (!t) {
      return fail(2, t.error().message);
    }
    targets.push_back(*t);
  }
  return targets;
}

CliResult<Workload> load_workload(const LoadCommandOptions& f) {
  Workload w;
  if (f.workload == "conversation" || f.workload == "synthetic" || !f.trace.empty()) {
    const std::string path = f.trace.empty() ? trace_path(f.workload) : f.trace;
    auto loaded = load_mooncake_trace(path);
    if (!loaded) {
      return fail(1, loaded.error().message);
    }
    w = std::move(*loaded);
  } else {
    auto preset = shared_prefix_preset(f.workload);
    if (!preset) {
      return fail(2, preset.error().message);
    }
    w = make_shared_prefix(*preset, f.seed);
  }
  w = take_first(w, f.limit);
  if (w.requests.empty()) {
    return fail(2, "the workload is empty");
  }
  return w;
}

// The arrival schedule (--level, --time-scale or --rate) into the load options and the level
// the report states.
CliResult<LoadLevel> arrivals(const LoadCommandOptions& f, const Workload& w, LoadOptions& o,
                              ClusterConfig& cc) {
  LoadLevel level;
  const double span_s = static_cast<double>(w.requests.back().arrival - w.requests.front().arrival) * 1e-9;
  if (f.level > 0) {
    if (f.nodes == 0) {
      return fail(2, "--level needs -n/--nodes (the cluster size it is relative to)");
    }
    cc.nodes = f.nodes;
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
    return fail(2, v.error().message);
  }
  return level;
}

nlohmann::json record_json(const std::string& policy, const RequestRecord& q) {
  return {{"policy", policy},
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
          {"error", q.error}};
}

// What the targets' runs add up to.
struct LiveRun {
  WorkloadReport report;
  std::vector<LiveStats> live;
  nlohmann::json records = nlohmann::json::array();
  uint32_t seen_nodes = 0;
};

// Runs the workload against each target in turn.
CliResult<Ok> run_targets(const LoadCommandOptions& f, const Workload& w,
                          const std::vector<LoadTarget>& targets, const LoadOptions& o, LevelReport& lr,
                          LiveRun& run) {
  for (const auto& t : targets) {
    std::fprintf(stderr, "cgn-bench load: %s -> http://%s:%u ...\n", t.policy.c_str(), t.host.c_str(),
                 t.port);
    auto res = run_load(w, t, o);
    if (!res) {
      return fail(2, res.error().message);
    }
    std::fprintf(
        stderr, "cgn-bench load: %s sent %llu, completed %llu, shed %llu, errors %llu (%.1f s wall)%s%s\n",
        t.policy.c_str(), static_cast<unsigned long long>(res->live.sent),
        static_cast<unsigned long long>(res->live.completed), static_cast<unsigned long long>(res->live.shed),
        static_cast<unsigned long long>(res->result.errors), res->live.wall_s,
        res->live.first_error.empty() ? "" : "; first error: ", res->live.first_error.c_str());
    run.seen_nodes = std::max<uint32_t>(run.seen_nodes, static_cast<uint32_t>(res->live.nodes.size()));
    run.report.requests = std::max<size_t>(run.report.requests, res->live.sent);
    if (!f.out_records.empty()) {
      for (const auto& q : res->records) {
        run.records.push_back(record_json(t.policy, q));
      }
    }
    lr.policies.push_back(std::move(res->result));
    run.live.push_back(std::move(res->live));
  }
  return Ok{};
}

// The report's workload facts, ideal bound and throughput, for the requests sent (a --duration
// bound may have cut the workload).
void summarise_run(const LoadCommandOptions& f, const Workload& w, const LoadOptions& o,
                   const LoadLevel& level, ClusterConfig& cc, LevelReport lr, LiveRun& run) {
  WorkloadReport& r = run.report;
  Workload sent = take_first(w, r.requests);
  for (const auto& q : sent.requests) {
    r.mean_input_tokens += q.input_tokens();
    r.mean_output_tokens += q.output_tokens;
  }
  if (!sent.requests.empty()) {
    r.mean_input_tokens /= static_cast<double>(sent.requests.size());
    r.mean_output_tokens /= static_cast<double>(sent.requests.size());
  }
  r.nodes = f.nodes > 0 ? f.nodes : run.seen_nodes;
  cc.nodes = std::max<uint32_t>(r.nodes, 1);
  r.ideal_hit_rate = ideal_hit_rate(sent, cc);
  r.levels.push_back(std::move(lr));
  r.headline_index = 0;
  for (const auto& p : r.levels[0].policies) {
    r.throughput_rps.push_back(p.completed > 0 && p.ttft_p90_s <= o.slo_ttft_s ? level.rate_rps : 0);
  }
}

std::string client_table(const LiveRun& run) {
  const WorkloadReport& r = run.report;
  std::string md =
      "#### Client\n\n| policy | sent | completed | shed (429) | HTTP errors | transport errors | stream "
      "errors | "
      "cut | no usage | no cached_tokens | max send lag ms | wall s | nodes |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (size_t i = 0; i < run.live.size(); ++i) {
    const LiveStats& s = run.live[i];
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
  return md;
}

std::string render_load_markdown(const LoadCommandOptions& f, const LoadOptions& o, const LiveRun& run) {
  std::string md = "## cgn-bench load (live, client-side)\n\n";
  md += "Arrivals: ";
  md += f.level > 0        ? "load level " + fmt_num(f.level) + " of " + std::to_string(f.nodes) + " nodes"
        : f.time_scale > 0 ? "trace timestamps x" + fmt_num(f.time_scale)
                           : fmt_num(f.rate) + " req/s, evenly spaced";
  md += "; wall arrivals = trace x " + fmt_num(o.arrival_scale) + ". Engine time scale " +
        fmt_num(f.engine_time_scale) + ": latencies, makespan and rates below are wall / " +
        fmt_num(f.engine_time_scale) +
        " (engine-model seconds). Busy, imbalance and guarded are not observable from the client (0).\n\n";
  md += render_markdown(run.report);
  md += client_table(run);
  return md;
}

nlohmann::json load_json(const LoadCommandOptions& f, const LoadOptions& o, const LiveRun& run) {
  const WorkloadReport& r = run.report;
  nlohmann::json j = to_json(r);
  j["live"] = true;
  j["arrival_scale"] = o.arrival_scale;
  j["engine_time_scale"] = f.engine_time_scale;
  auto& c = j["client"];
  c = nlohmann::json::object();
  for (size_t i = 0; i < run.live.size(); ++i) {
    const LiveStats& s = run.live[i];
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
  return j;
}

void write_outputs(const LoadCommandOptions& f, const LoadOptions& o, const LiveRun& run) {
  const std::string md = render_load_markdown(f, o, run);
  std::cout << md;
  if (!f.out_md.empty()) {
    std::ofstream(f.out_md) << md;
  }
  if (!f.out_json.empty()) {
    std::ofstream(f.out_json) << load_json(f, o, run).dump(2) << "\n";
  }
  if (!f.out_records.empty()) {
    std::ofstream out(f.out_records);
    for (const auto& q : run.records) {
      out << q.dump() << "\n";
    }
  }
}

CliResult<Ok> run_steps(const LoadCommandOptions& f) {
  auto targets = check_flags(f);
  if (!targets) {
    return targets.error();
  }
  auto w = load_workload(f);
  if (!w) {
    return w.error();
  }
  LoadOptions o;
  o.model = f.model;
  o.engine_time_scale = f.engine_time_scale;
  o.duration_s = f.duration;
  o.drain_s = f.drain;
  o.session_header = !f.no_session;
  ClusterConfig cc;
  cc.model_name = f.model;
  auto level = arrivals(f, *w, o, cc);
  if (!level) {
    return level.error();
  }
  LiveRun run;
  run.report.workload = w->name;
  LevelReport lr;
  lr.level = *level;
  if (auto r = run_targets(f, *w, *targets, o, lr, run); !r) {
    return r.error();
  }
  summarise_run(f, *w, o, *level, cc, std::move(lr), run);
  write_outputs(f, o, run);
  return Ok{};
}

}  // namespace

CliResult<LoadCommandOptions> parse_load_options(int argc, const char* const* argv) {
  LoadCommandOptions f;
  CLI::App app{"live load generator: replay a workload over HTTP against a router"};
  auto* c = &app;
  c->add_option(
      "-w,--workload", f.workload,
      "conversation | synthetic (Mooncake traces) | llmd | small (shared-prefix presets; default small)");
  c->add_option("--trace", f.trace, "a Mooncake trace file (overrides the workload's default path)");
  c->add_option("--limit", f.limit, "replay only the first N requests (0 = all)");
  c->add_option("--seed", f.seed, "synthetic workload seed (as cgn-bench sim)");
  c->add_option("--target", f.targets,
                "[POLICY=]http://HOST:PORT of a router (repeatable; runs one after another, reported side by "
                "side under POLICY)")
      ->required();
  c->add_option("-n,--nodes", f.nodes,
                "engines behind each router (--level needs it; the ideal bound uses it)");
  c->add_option(
      "--level", f.level,
      "arrivals scaled as cgn-bench sim's load level (round_robin-equivalent utilisation of --nodes)");
  c->add_option("--time-scale", f.time_scale, "arrivals at the trace's timestamps x this (wall)");
  c->add_option("--rate", f.rate, "arrivals at this many requests per wall second, evenly spaced");
  c->add_option("--engine-time-scale", f.engine_time_scale,
                "the engines' --time-scale (cgn-engine-sim); arrivals are compressed by it and latencies "
                "reported in engine-model seconds (default 1: real engines)");
  c->add_option("--duration", f.duration, "send no request later than this many wall seconds (0 = no bound)");
  c->add_option("--drain", f.drain, "wall seconds the last requests get after the last send (default 120)");
  c->add_option("--model", f.model, "the model name sent (default as cgn-bench sim)");
  c->add_flag("--no-session-header", f.no_session, "do not send X-Session-Id");
  c->add_option("--md", f.out_md, "write the markdown report here");
  c->add_option("--json", f.out_json, "write the JSON report here");
  c->add_option("--records", f.out_records, "write one JSON line per request here");
  c->add_option("--log-level", f.log_level, "log level (default warn)");
  if (auto parsed = parse_command_line(app, argc, argv); !parsed) {
    return parsed.error();
  }
  return f;
}

int run_load_command(const LoadCommandOptions& f) {
  auto r = run_steps(f);
  return r ? 0 : print_cli_exit(r.error());
}

}  // namespace cgn::bench
