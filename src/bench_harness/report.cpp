#include "bench_harness/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

namespace cgn::bench {
namespace {

double ratio(double a, double b) {
  return b > 0 ? a / b : 0;
}

// Max over mean of the requests each node served.
double request_imbalance(const PolicyResult& p) {
  uint64_t sum = 0;
  uint64_t max = 0;
  for (uint64_t n : p.per_node_requests) {
    sum += n;
    max = std::max(max, n);
  }
  return sum == 0 ? 0
                  : static_cast<double>(max) * static_cast<double>(p.per_node_requests.size()) /
                        static_cast<double>(sum);
}

std::string yes_no(bool b) {
  return b ? "met" : "**missed**";
}

}  // namespace

WorkloadReport run_workload(const Workload& w, const ClusterConfig& c, const SuiteOptions& o) {
  WorkloadReport r;
  r.workload = w.name;
  r.nodes = c.nodes;
  r.requests = w.requests.size();
  for (const auto& q : w.requests) {
    r.mean_input_tokens += q.input_tokens();
    r.mean_output_tokens += q.output_tokens;
  }
  if (!w.requests.empty()) {
    r.mean_input_tokens /= static_cast<double>(w.requests.size());
    r.mean_output_tokens /= static_cast<double>(w.requests.size());
  }
  for (size_t i = 0; i < o.levels.size(); ++i) {
    LevelReport lr;
    lr.level = load_level(w, c, o.levels[i]);
    lr.policies.resize(o.policies.size());
    r.levels.push_back(std::move(lr));
    if (o.levels[i] == o.headline) {
      r.headline_index = i;
    }
  }
  // Tasks: the ideal bound, then every (level, policy) run.
  const size_t runs = o.levels.size() * o.policies.size();
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (;;) {
      const size_t t = next.fetch_add(1);
      if (t > runs) {
        return;
      }
      if (t == runs) {
        const IdealBound b = ideal_bound(w, c);
        r.ideal_hit_rate = b.hit_rate;
        r.floor_ttft_p50_s = b.floor_ttft_p50_s;
        r.floor_ttft_p90_s = b.floor_ttft_p90_s;
        continue;
      }
      const size_t li = t / o.policies.size();
      const size_t pi = t % o.policies.size();
      r.levels[li].policies[pi] = run_policy(w, r.levels[li].level, o.policies[pi], c);
    }
  };
  const unsigned jobs = std::max(1u, o.jobs);
  std::vector<std::thread> threads;
  for (unsigned j = 1; j < jobs; ++j) {
    threads.emplace_back(worker);
  }
  worker();
  for (auto& th : threads) {
    th.join();
  }
  r.throughput_rps.assign(o.policies.size(), 0);
  for (size_t pi = 0; pi < o.policies.size(); ++pi) {
    for (const auto& lr : r.levels) {
      const PolicyResult& p = lr.policies[pi];
      if (p.completed > 0 && p.ttft_p90_s <= c.slo_ttft_s) {
        r.throughput_rps[pi] = std::max(r.throughput_rps[pi], lr.level.rate_rps);
      }
    }
  }
  return r;
}

const PolicyResult* find_policy(const WorkloadReport& r, std::string_view policy) {
  if (r.levels.empty()) {
    return nullptr;
  }
  for (const auto& p : r.levels[r.headline_index].policies) {
    if (p.policy == policy) {
      return &p;
    }
  }
  return nullptr;
}

namespace {

// One load level's modelled energy per policy, against round_robin where it ran.
void render_energy(std::string& s, const LevelReport& lr) {
  const sim::NodeModel m = sim::default_node_model();
  s += fmt::format(
      "Energy, **modelled** (the simulator's power model, docs/sim.md: per GPU {:.0f} W idle, {:.0f} W "
      "prefilling, {:.0f} W decoding; all nodes over the makespan; not a measurement):\n\n",
      m.idle_watts, m.prefill_watts, m.decode_watts);
  const PolicyResult* rr = nullptr;
  for (const auto& p : lr.policies) {
    rr = p.policy == "round_robin" ? &p : rr;
  }
  s += "| policy | J/token | J/request | energy kJ | J/token vs round_robin |\n|---|---:|---:|---:|---:|\n";
  for (const auto& p : lr.policies) {
    const std::string vs = rr != nullptr && rr->j_per_token > 0
                               ? fmt::format("{:+.1f}%", 100.0 * (p.j_per_token / rr->j_per_token - 1.0))
                               : "-";
    s += fmt::format("| {} | {:.3f} | {:.1f} | {:.1f} | {} |\n", p.policy, p.j_per_token, p.j_per_request,
                     p.energy_j / 1e3, vs);
  }
  s += "\n";
}

// One load level's table.
void render_level(std::string& s, const WorkloadReport& r, size_t li) {
  const LevelReport& lr = r.levels[li];
  s += fmt::format(
      "#### Load {:.2f} (round_robin-equivalent utilisation){}: {:.3f} req/s (arrivals x{:.4f})\n\n",
      lr.level.utilisation, li == r.headline_index ? ", headline" : "", lr.level.rate_rps,
      lr.level.time_scale);
  s += "| policy | TTFT p50 s | p90 s | p99 s | ITL p50 ms | ITL p90 ms | goodput req/s | out tok/s | "
       "errors | "
       "shed | hit rate | hit / ideal | imbalance | req imbalance | busy | guarded | p50 / floor |\n";
  s += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& p : lr.policies) {
    const double n = static_cast<double>(std::max<uint64_t>(p.requests, 1));
    s += fmt::format(
        "| {} | {:.3f} | {:.3f} | {:.3f} | {:.1f} | {:.1f} | {:.3f} | {:.0f} | {:.2f}% | {:.2f}% | {:.1f}% "
        "| {:.2f} | "
        "{:.2f} | {:.2f} | {:.2f} | {} | {:.2f} |\n",
        p.policy, p.ttft_p50_s, p.ttft_p90_s, p.ttft_p99_s, 1e3 * p.itl_p50_s, 1e3 * p.itl_p90_s,
        p.goodput_rps, p.output_tok_s, 100.0 * static_cast<double>(p.errors) / n,
        100.0 * static_cast<double>(p.shed) / n, 100 * p.hit_rate, ratio(p.hit_rate, r.ideal_hit_rate),
        p.imbalance, request_imbalance(p), p.utilisation, p.guarded_out,
        ratio(p.ttft_p50_s, r.floor_ttft_p50_s));
  }
  s += "\n";
}

// The hit attribution of a --diagnose run (nothing when the level has none).
void render_diagnosis(std::string& s, const LevelReport& lr) {
  bool diagnosed = false;
  for (const auto& p : lr.policies) {
    diagnosed = diagnosed || p.diagnosis.requests > 0;
  }
  if (diagnosed) {
    s += "Where the hits went (% of prompt tokens; best = longest prefix any engine held at dispatch, "
         "chosen = the chosen engine's; the gap split by cause, requests in brackets):\n\n";
    s += "| policy | best | chosen | reported | lost: guard | stale | blind | score | over-belief | "
         "new prefixes | new-prefix req imbalance |\n";
    s += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& p : lr.policies) {
      const Diagnosis& d = p.diagnosis;
      if (d.requests == 0) {
        continue;
      }
      const double pt = static_cast<double>(std::max<uint64_t>(d.prompt_tokens, 1)) / 100.0;
      auto pc = [&](uint64_t v) { return static_cast<double>(v) / pt; };
      uint64_t cmax = 0;
      for (uint64_t x : d.cold_per_node) {
        cmax = std::max(cmax, x);
      }
      const double cimb = d.cold_requests == 0
                              ? 0
                              : static_cast<double>(cmax) * static_cast<double>(d.cold_per_node.size()) /
                                    static_cast<double>(d.cold_requests);
      s += fmt::format(
          "| {} | {:.1f}% | {:.1f}% | {:.1f}% | {:.1f}% ({}) | {:.1f}% ({}) | {:.1f}% ({}) | {:.1f}% ({}) "
          "| "
          "{:.1f}% | {} | {:.2f} |\n",
          p.policy, pc(d.best_tokens), pc(d.chosen_tokens), pc(d.reported_tokens), pc(d.lost_guard),
          d.n_guard, pc(d.lost_stale), d.n_stale, pc(d.lost_blind), d.n_blind, pc(d.lost_score), d.n_score,
          pc(d.overbelief_tokens), d.cold_requests, cimb);
    }
    s += "\n";
  }
}

void render_throughput(std::string& s, const WorkloadReport& r) {
  s += "#### Throughput (highest swept rate with TTFT p90 <= 2 s)\n\n| policy | req/s |\n|---|---:|\n";
  if (!r.levels.empty()) {
    for (size_t pi = 0; pi < r.levels[0].policies.size(); ++pi) {
      s += fmt::format("| {} | {} |\n", r.levels[0].policies[pi].policy,
                       r.throughput_rps[pi] > 0 ? fmt::format("{:.3f}", r.throughput_rps[pi])
                                                : std::string("< lowest level"));
    }
  }
  s += "\n";
}

// kv against the routing targets, when kv, round_robin and random all ran.
void render_targets(std::string& s, const WorkloadReport& r) {
  const PolicyResult* kv = find_policy(r, "kv");
  const PolicyResult* rr = find_policy(r, "round_robin");
  const PolicyResult* rnd = find_policy(r, "random");
  if (kv != nullptr && rr != nullptr && rnd != nullptr) {
    double tput_kv = 0;
    double tput_rnd = 0;
    for (size_t pi = 0; pi < r.levels[0].policies.size(); ++pi) {
      if (r.levels[0].policies[pi].policy == "kv") {
        tput_kv = r.throughput_rps[pi];
      } else if (r.levels[0].policies[pi].policy == "random") {
        tput_rnd = r.throughput_rps[pi];
      }
    }
    const double kv_hit_ratio = ratio(kv->hit_rate, r.ideal_hit_rate);
    const double p50_gain = ratio(rr->ttft_p50_s, kv->ttft_p50_s);
    const double p90_gain = ratio(rnd->ttft_p90_s, kv->ttft_p90_s);
    // What the trace allows: the baseline over the floor is the gain a policy reaching the floor
    // (every request at the ideal hit, never queued) would show.
    const double p50_ceiling = ratio(rr->ttft_p50_s, r.floor_ttft_p50_s);
    const double p90_ceiling = ratio(rnd->ttft_p90_s, r.floor_ttft_p90_s);
    s += "#### kv against the routing targets (headline level)\n\n"
         "The ceiling is the gain a perfect router would show on this trace: the baseline's percentile "
         "over the TTFT floor's (every request on an idle node holding the ideal prefix). A target above "
         "the ceiling cannot be met by routing on this trace and node model.\n\n"
         "| measure | value | target | | ceiling (floor) |\n|---|---:|---:|---|---:|\n";
    s += fmt::format("| kv hit rate / ideal bound | {:.2f} | >= 0.90 (Mooncake) | {} | 1.00 |\n",
                     kv_hit_ratio, yes_no(kv_hit_ratio >= 0.9));
    s += fmt::format("| TTFT p50 round_robin / kv | {:.2f}x | >= 5x (Mooncake) | {} | {:.2f}x |\n", p50_gain,
                     yes_no(p50_gain >= 5), p50_ceiling);
    s += fmt::format("| errors + shed, kv vs round_robin | {} vs {} | kv <= rr | {} | |\n",
                     kv->errors + kv->shed, rr->errors + rr->shed,
                     yes_no(kv->errors + kv->shed <= rr->errors + rr->shed));
    s += fmt::format("| kv imbalance (max/mean busy) | {:.2f} | <= 1.3 (Mooncake) | {} | |\n", kv->imbalance,
                     yes_no(kv->imbalance <= 1.3));
    s += fmt::format("| TTFT p90 random / kv | {:.2f}x | >= 20x (shared-prefix) | {} | {:.2f}x |\n", p90_gain,
                     yes_no(p90_gain >= 20), p90_ceiling);
    s += fmt::format("| throughput kv / random | {} | >= 1.5x (shared-prefix) | {} | |\n",
                     tput_rnd > 0 ? fmt::format("{:.2f}x", ratio(tput_kv, tput_rnd))
                                  : fmt::format("{:.3f} vs none", tput_kv),
                     yes_no(tput_rnd > 0 ? tput_kv >= 1.5 * tput_rnd : tput_kv > 0));
    s += "\n";
  }
}

}  // namespace

std::string render_markdown(const WorkloadReport& r) {
  std::string s;
  s += fmt::format("### {} — {} nodes, {} requests (mean {:.0f} in / {:.0f} out tokens)\n\n", r.workload,
                   r.nodes, r.requests, r.mean_input_tokens, r.mean_output_tokens);
  s += fmt::format(
      "Ideal-node bound (one node with the whole cluster's KV, LRU): prefix hit rate **{:.1f}%**; "
      "TTFT floor (idle node holding the ideal prefix: pure prefill of what even the ideal node "
      "misses) p50 **{:.3f} s**, p90 **{:.3f} s**.\n\n",
      100 * r.ideal_hit_rate, r.floor_ttft_p50_s, r.floor_ttft_p90_s);
  for (size_t li = 0; li < r.levels.size(); ++li) {
    render_level(s, r, li);
    render_energy(s, r.levels[li]);
    render_diagnosis(s, r.levels[li]);
  }
  render_throughput(s, r);
  render_targets(s, r);
  return s;
}

bool write_plot_data(const WorkloadReport& r, const std::string& prefix) {
  if (r.levels.empty()) {
    return false;
  }
  std::ofstream h(prefix + "-headline.dat");
  h << fmt::format("# {} at utilisation {:.2f}; ideal-node hit rate {:.4f}\n", r.workload,
                   r.levels[r.headline_index].level.utilisation, r.ideal_hit_rate);
  h << "# policy ttft_p50_s ttft_p90_s ttft_p99_s itl_p50_ms itl_p90_ms hit_rate hit_over_ideal goodput_rps "
       "imbalance error_pct shed_pct ideal_hit_rate\n";
  for (const auto& p : r.levels[r.headline_index].policies) {
    const double n = static_cast<double>(std::max<uint64_t>(p.requests, 1));
    h << fmt::format(
        "{} {:.6f} {:.6f} {:.6f} {:.3f} {:.3f} {:.6f} {:.4f} {:.4f} {:.4f} {:.4f} {:.4f} {:.6f}\n", p.policy,
        p.ttft_p50_s, p.ttft_p90_s, p.ttft_p99_s, 1e3 * p.itl_p50_s, 1e3 * p.itl_p90_s, p.hit_rate,
        ratio(p.hit_rate, r.ideal_hit_rate), p.goodput_rps, p.imbalance,
        100.0 * static_cast<double>(p.errors) / n, 100.0 * static_cast<double>(p.shed) / n, r.ideal_hit_rate);
  }
  std::ofstream sw(prefix + "-sweep.dat");
  for (size_t pi = 0; pi < r.levels[0].policies.size(); ++pi) {
    sw << fmt::format("# {}\n# utilisation rate_rps ttft_p50_s ttft_p90_s ttft_p99_s hit_rate goodput_rps\n",
                      r.levels[0].policies[pi].policy);
    for (const auto& lr : r.levels) {
      const PolicyResult& p = lr.policies[pi];
      sw << fmt::format("{:.2f} {:.4f} {:.6f} {:.6f} {:.6f} {:.6f} {:.4f}\n", lr.level.utilisation,
                        lr.level.rate_rps, p.ttft_p50_s, p.ttft_p90_s, p.ttft_p99_s, p.hit_rate,
                        p.goodput_rps);
    }
    sw << "\n\n";
  }
  return h.good() && sw.good();
}

nlohmann::json to_json(const WorkloadReport& r) {
  nlohmann::json j;
  j["workload"] = r.workload;
  j["nodes"] = r.nodes;
  j["requests"] = r.requests;
  j["mean_input_tokens"] = r.mean_input_tokens;
  j["mean_output_tokens"] = r.mean_output_tokens;
  j["ideal_hit_rate"] = r.ideal_hit_rate;
  j["floor_ttft_p50_s"] = r.floor_ttft_p50_s;
  j["floor_ttft_p90_s"] = r.floor_ttft_p90_s;
  j["headline_utilisation"] = r.levels.empty() ? 0.0 : r.levels[r.headline_index].level.utilisation;
  auto& levels = j["levels"];
  levels = nlohmann::json::array();
  for (const auto& lr : r.levels) {
    nlohmann::json l;
    l["utilisation"] = lr.level.utilisation;
    l["time_scale"] = lr.level.time_scale;
    l["rate_rps"] = lr.level.rate_rps;
    auto& ps = l["policies"];
    ps = nlohmann::json::array();
    for (const auto& p : lr.policies) {
      ps.push_back({{"policy", p.policy},
                    {"requests", p.requests},
                    {"completed", p.completed},
                    {"errors", p.errors},
                    {"shed", p.shed},
                    {"ttft_p50_s", p.ttft_p50_s},
                    {"ttft_p90_s", p.ttft_p90_s},
                    {"ttft_p99_s", p.ttft_p99_s},
                    {"ttft_mean_s", p.ttft_mean_s},
                    {"itl_p50_s", p.itl_p50_s},
                    {"itl_p90_s", p.itl_p90_s},
                    {"itl_mean_s", p.itl_mean_s},
                    {"e2e_p50_s", p.e2e_p50_s},
                    {"makespan_s", p.makespan_s},
                    {"goodput_rps", p.goodput_rps},
                    {"output_tok_s", p.output_tok_s},
                    {"hit_rate", p.hit_rate},
                    {"hit_over_ideal", ratio(p.hit_rate, r.ideal_hit_rate)},
                    {"prompt_tokens", p.prompt_tokens},
                    {"cached_tokens", p.cached_tokens},
                    {"busy_mean_s", p.busy_mean_s},
                    {"busy_max_s", p.busy_max_s},
                    {"imbalance", p.imbalance},
                    {"utilisation", p.utilisation},
                    {"guarded_decisions", p.guarded_out},
                    {"energy_j_modelled", p.energy_j},
                    {"j_per_token_modelled", p.j_per_token},
                    {"j_per_request_modelled", p.j_per_request},
                    {"per_node_requests", p.per_node_requests}});
      if (p.diagnosis.requests > 0) {
        const Diagnosis& d = p.diagnosis;
        ps.back()["diagnosis"] = {{"prompt_tokens", d.prompt_tokens},
                                  {"best_tokens", d.best_tokens},
                                  {"chosen_tokens", d.chosen_tokens},
                                  {"reported_tokens", d.reported_tokens},
                                  {"lost_guard", d.lost_guard},
                                  {"lost_stale", d.lost_stale},
                                  {"lost_blind", d.lost_blind},
                                  {"lost_score", d.lost_score},
                                  {"n_guard", d.n_guard},
                                  {"n_stale", d.n_stale},
                                  {"n_blind", d.n_blind},
                                  {"n_score", d.n_score},
                                  {"overbelief_tokens", d.overbelief_tokens},
                                  {"cold_requests", d.cold_requests},
                                  {"cold_per_node", d.cold_per_node}};
      }
    }
    levels.push_back(std::move(l));
  }
  auto& t = j["throughput_rps"];
  t = nlohmann::json::object();
  if (!r.levels.empty()) {
    for (size_t pi = 0; pi < r.levels[0].policies.size(); ++pi) {
      t[r.levels[0].policies[pi].policy] = r.throughput_rps[pi];
    }
  }
  return j;
}

}  // namespace cgn::bench
