#include "bench_harness/cluster_sim_pd.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <unordered_map>

#include "bench_harness/cluster_sim_fleet.h"
#include "bench_harness/sample_stats.h"
#include "core/digest.h"
#include "routing/engine_metrics.h"
#include "routing/router_core.h"
#include "sim/engine.h"
#include "sim/metrics_render.h"
#include "sim/tokenizer.h"

namespace cgn::bench {
namespace {

// A client request between its legs.
struct Flight {
  size_t index = 0;  // into the workload
  std::vector<sim::TokenId> tokens;
  std::vector<Digest> digests;
  routing::DispatchTicket ticket;  // the leg in flight
  bool decode = false;             // which leg is in flight
  Nanos first_token = -1;          // decode leg
  uint32_t prefill_cached = 0;     // the prefill node's prefix-cache hits
  uint32_t prefill_ram = 0;        // of prefill_cached: loaded from the prefill node's tiers
  uint32_t prefill_ssd = 0;
  Nanos handoff = -1;       // when the prefill leg answered
  bool handed_off = false;  // the decode leg carries the prefill's params
};

}  // namespace

namespace {

routing::RoutingPolicy kv_policy_of(const ClusterConfig& c) {
  routing::RoutingPolicy rp = c.routing;
  rp.ranking = routing::builtin_policy("kv");
  return rp;
}

// One disaggregated run: the first out.prefill_nodes engines prefill, the rest decode; each
// client request is a prefill leg then a decode leg (or the aggregated fallback), driven event by
// event in virtual time like PolicyRun.
class PdRun {
 public:
  PdRun(const Workload& w, const LoadLevel& level, const ClusterConfig& c, PdResult& out)
      : w_(w),
        c_(c),
        out_(out),
        res_(out.r),
        core_(clock_, kv_policy_of(c), routing::IndexConfig{}, c.seed),
        fleet_(
            c, core_,
            [prefill = out.prefill_nodes](uint32_t i) {
              return i < prefill ? routing::NodeRole::kPrefill : routing::NodeRole::kDecode;
            },
            clock_),
        pending_(c.nodes),
        arrival_(scaled_arrivals(w, level)),
        seed_(make_digest_seed(DigestSeedFields{kDigestFormatVersion, c.model_name, {}})) {
    for (uint32_t i = 0; i < c.nodes; ++i) {
      engine_of_id_["sim-node-" + std::to_string(i)] = i;
    }
  }

  void run() {
    // Also ends when nothing left can make progress: a request lost between legs is an error.
    fleet_.run_event_loop(
        clock_, arrival_, cursor_, [this] { return cursor_ == w_.requests.size() && flights_.empty(); },
        [this](uint32_t ei) { handle_events(ei); }, [this](size_t k, Nanos at) { arrive(k, at); });
    res_.errors += flights_.size();
    summarise();
  }

 private:
  routing::RouteRequest route_request(const Flight& f, routing::RoleWanted role) const {
    routing::RouteRequest rr;
    rr.model = c_.model_name;
    rr.role = role;
    rr.digests = f.digests;
    rr.prompt_tokens = static_cast<uint64_t>(static_cast<double>(prompt_.size()) / 4.0);
    rr.session_key = w_.requests[f.index].session_key;
    return rr;
  }

  void finish_error(size_t k) {
    ++res_.errors;
    flights_.erase(k);
  }

  // The leg's request to the first engine of decision_.ranked with room in its queue, recording
  // the dispatch. kRefused: every queue was full; kFailed: an engine refused it otherwise (the
  // flight is finished as an error).
  enum class Sent { kYes, kRefused, kFailed };
  Sent dispatch(size_t k, const routing::RouteRequest& rr, const sim::Request& req, Nanos now) {
    for (const auto& cand : decision_.ranked) {
      const uint32_t i = fleet_.engine_of(cand.node);
      auto h = fleet_.engine(i).add_request(sim::Request(req), now);
      if (!h.ok()) {
        if (h.error().code == sim::EngineError::kQueueFull) {
          continue;
        }
        finish_error(k);
        return Sent::kFailed;
      }
      flights_.at(k).ticket = core_.record_dispatch(cand.node, rr);
      pending_[i].emplace(*h, k);
      ++res_.per_node_requests[i];
      return Sent::kYes;
    }
    return Sent::kRefused;
  }

  // The decode leg (or the aggregated fallback) of flight k at `now`; `params` from the prefill.
  void send_decode(size_t k, std::optional<sim::KvTransferParams> params, Nanos now) {
    Flight& f = flights_.at(k);
    routing::RouteRequest rr = route_request(f, routing::RoleWanted::kDecode);
    rr.prompt_tokens = f.tokens.size();
    auto st = core_.decide_into(rr, decision_);
    if (!st.ok()) {
      if (st.error().code == routing::RouteError::kAllOverloaded) {
        ++res_.shed;
        flights_.erase(k);
      } else {
        finish_error(k);
      }
      return;
    }
    routing::order_for_decode(decision_.ranked);
    sim::Request req;
    req.external_id = std::to_string(k);
    req.prompt = f.tokens;
    req.max_tokens = w_.requests[k].output_tokens;
    req.stream = true;
    req.ignore_eos = true;
    req.want_text = false;
    f.handed_off = params.has_value();
    req.kv_transfer = std::move(params);
    f.decode = true;
    if (dispatch(k, rr, req, now) == Sent::kRefused) {
      finish_error(k);
    }
  }

  void arrive(size_t k, Nanos now) {
    const WorkRequest& wr = w_.requests[k];
    build_prompt(w_, wr, prompt_);
    Flight& f = flights_[k];
    f.index = k;
    compute_prefix_digests(seed_, prompt_, core_.policy().weights.block_bytes, f.digests, 8192);
    f.tokens = sim::encode(prompt_);
    routing::RouteRequest rr = route_request(f, routing::RoleWanted::kPrefill);
    auto st = core_.decide_into(rr, decision_);
    if (!st.ok()) {
      ++out_.fallbacks;  // fallback = "aggregated": the decode leg computes the prompt
      send_decode(k, std::nullopt, now);
      return;
    }
    res_.guarded_out += decision_.guarded_out > 0 ? 1 : 0;
    sim::Request req;  // the router's prefill body (router/disagg.cpp prefill_body)
    req.external_id = std::to_string(k);
    req.prompt = f.tokens;
    req.max_tokens = 1;
    req.stream = false;
    req.ignore_eos = true;
    req.want_text = false;
    req.want_token_events = false;
    req.kv_transfer = sim::KvTransferParams{};
    req.kv_transfer->do_remote_decode = true;
    const Sent sent = dispatch(k, rr, req, now);
    if (sent != Sent::kRefused) {
      return;
    }
    ++out_.fallbacks;  // every prefill node refused it
    send_decode(k, std::nullopt, now);
  }

  // The decode engine i claims the blocks from the engine the pull's params name.
  void pull(uint32_t i, const sim::Event& ev) {
    auto pe = engine_of_id_.find(ev.pull->remote_engine_id);
    const sim::ClaimStatus cs =
        pe == engine_of_id_.end()
            ? sim::ClaimStatus::kUnknown
            : fleet_.engine(pe->second)
                  .claim_blocks(ev.pull->remote_request_id, ev.pull->remote_block_ids, ev.time);
    fleet_.engine(i).complete_kv_pull(ev.handle, cs, ev.time);
  }

  void handle_events(uint32_t i) {
    for (;;) {
      events_.clear();
      fleet_.engine(i).take_events(events_);
      if (events_.empty()) {
        return;
      }
      for (auto& ev : events_) {
        auto it = pending_[i].find(ev.handle);
        if (it == pending_[i].end()) {
          continue;
        }
        const size_t k = it->second;
        Flight& f = flights_.at(k);
        if (ev.kind == sim::EventKind::kKvPull) {
          pull(i, ev);
          continue;  // its events come in the next round
        }
        if (ev.kind == sim::EventKind::kToken) {
          if (f.decode && ev.token_index == 0) {
            f.first_token = ev.time;
            core_.record_first_token(f.ticket);
          }
          continue;
        }
        // kFinished
        pending_[i].erase(it);
        if (!f.decode) {
          prefill_finished(k, f, ev);
        } else {
          decode_finished(k, f, ev);
        }
      }
    }
  }

  void prefill_finished(size_t k, Flight& f, const sim::Event& ev) {
    const sim::Completion& comp = *ev.completion;
    core_.record_first_token(f.ticket);
    core_.record_completion(f.ticket);
    if (comp.reason == sim::FinishReason::kError || comp.reason == sim::FinishReason::kAbort) {
      finish_error(k);
      return;
    }
    f.prefill_cached = comp.usage.cached_tokens;
    f.prefill_ram = comp.usage.loaded_ram_tokens;
    f.prefill_ssd = comp.usage.loaded_ssd_tokens;
    f.handoff = ev.time;
    if (!comp.kv_transfer_params) {
      ++out_.recomputes;
    }
    send_decode(k, comp.kv_transfer_params, ev.time);
  }

  void decode_finished(size_t k, Flight& f, const sim::Event& ev) {
    const sim::Completion& comp = *ev.completion;
    core_.record_completion(f.ticket);
    if (comp.reason == sim::FinishReason::kError || comp.reason == sim::FinishReason::kAbort ||
        f.first_token < 0) {
      finish_error(k);
      return;
    }
    out_.pulls_ok += comp.transferred_tokens > 0 ? 1 : 0;
    out_.pulls_failed += comp.kv_pull_failed ? 1 : 0;
    out_.transferred_tokens += comp.transferred_tokens;
    ++res_.completed;
    const Nanos arr = arrival_[k];
    samples_.add_completion(arr, f.first_token, ev.time, comp.usage.completion_tokens, c_);
    if (f.handoff >= 0) {
      prefill_leg_.push_back(seconds(f.handoff - arr));
      decode_ttft_.push_back(seconds(f.first_token - f.handoff));
    }
    res_.prompt_tokens += comp.usage.prompt_tokens;
    // Prompt tokens nobody computed for this request. Handed off (the pull did not fail): the
    // prefill node computed all but its own hits; the decode node's HBM and tier hits only spared
    // part of the transfer. Otherwise the decode leg computed the prompt less its own HBM and
    // tier hits (a failed pull wasted the prefill's work).
    const bool handed_off = f.handed_off && !comp.kv_pull_failed;
    out_.decode_loaded_tokens += handed_off ? comp.usage.loaded_ram_tokens + comp.usage.loaded_ssd_tokens : 0;
    res_.cached_tokens += handed_off ? f.prefill_cached : comp.usage.cached_tokens;
    res_.loaded_ram_tokens += handed_off ? f.prefill_ram : comp.usage.loaded_ram_tokens;
    res_.loaded_ssd_tokens += handed_off ? f.prefill_ssd : comp.usage.loaded_ssd_tokens;
    samples_.last_done = std::max(samples_.last_done, ev.time);
    flights_.erase(k);
  }

  void summarise() {
    summarise_run(samples_, fleet_.busy(), res_);
    summarise_energy(fleet_, c_.node_model, samples_, res_);
    std::sort(prefill_leg_.begin(), prefill_leg_.end());
    std::sort(decode_ttft_.begin(), decode_ttft_.end());
    out_.prefill_leg_p50_s = percentile(prefill_leg_, 50);
    out_.prefill_leg_p90_s = percentile(prefill_leg_, 90);
    out_.decode_ttft_p50_s = percentile(decode_ttft_, 50);
    out_.decode_ttft_p90_s = percentile(decode_ttft_, 90);
    Nanos busy_p = 0, busy_d = 0, busy_p_max = 0;
    for (uint32_t i = 0; i < c_.nodes; ++i) {
      const Nanos b = fleet_.busy()[i];
      (i < out_.prefill_nodes ? busy_p : busy_d) += b;
      busy_p_max = i < out_.prefill_nodes ? std::max(busy_p_max, b) : busy_p_max;
    }
    if (res_.makespan_s > 0) {
      out_.prefill_utilisation = seconds(busy_p) / out_.prefill_nodes / res_.makespan_s;
      out_.decode_utilisation = seconds(busy_d) / out_.decode_nodes / res_.makespan_s;
      out_.prefill_max_utilisation = seconds(busy_p_max) / res_.makespan_s;
    }
  }

  const Workload& w_;
  const ClusterConfig& c_;
  PdResult& out_;
  PolicyResult& res_;
  ManualClock clock_{0};
  routing::RoutingCore core_;
  SimFleet fleet_;
  std::unordered_map<std::string, uint32_t> engine_of_id_;  // sim-node-<i> -> i
  // Per engine: its requests in flight -> the client request (an index into flights).
  std::vector<std::unordered_map<sim::RequestHandle, size_t>> pending_;
  std::unordered_map<size_t, Flight> flights_;  // by workload index
  const std::vector<Nanos> arrival_;
  RunSamples samples_;
  std::vector<double> prefill_leg_;
  std::vector<double> decode_ttft_;
  size_t cursor_ = 0;
  std::string prompt_;
  const Digest seed_;
  routing::Decision decision_;
  std::vector<sim::Event> events_;
};

}  // namespace

PdResult run_pd(const Workload& w, const LoadLevel& level, uint32_t prefill_nodes, const ClusterConfig& c) {
  PdResult out;
  PolicyResult& res = out.r;
  out.prefill_nodes = std::min(prefill_nodes, c.nodes);
  out.decode_nodes = c.nodes - out.prefill_nodes;
  res.policy = fmt::format("pd {}:{}", out.prefill_nodes, out.decode_nodes);
  res.requests = w.requests.size();
  res.per_node_requests.assign(c.nodes, 0);
  if (out.prefill_nodes == 0 || out.decode_nodes == 0) {
    res.errors = res.requests;
    return out;
  }
  PdRun(w, level, c, out).run();
  return out;
}

PdReport run_pd_comparison(const Workload& w, const ClusterConfig& c, const std::vector<double>& levels,
                           const std::vector<uint32_t>& prefill_counts, unsigned jobs) {
  PdReport rep;
  rep.workload = w.name;
  rep.nodes = c.nodes;
  rep.requests = w.requests.size();
  rep.slo_ttft_s = c.slo_ttft_s;
  rep.slo_itl_s = c.slo_itl_s;
  rep.prefill_counts = prefill_counts;
  double in = 0, outt = 0;
  for (const auto& r : w.requests) {
    in += r.input_tokens();
    outt += r.output_tokens;
  }
  if (!w.requests.empty()) {
    rep.mean_input_tokens = in / static_cast<double>(w.requests.size());
    rep.mean_output_tokens = outt / static_cast<double>(w.requests.size());
  }
  // Every run is independent and deterministic: run them `jobs` at a time.
  struct Job {
    size_t level = 0;
    int split = -1;  // -1: aggregated
  };
  std::vector<Job> runs;
  for (size_t l = 0; l < levels.size(); ++l) {
    PdLevelReport lr;
    lr.level = load_level(w, c, levels[l]);
    lr.splits.resize(prefill_counts.size());
    rep.levels.push_back(std::move(lr));
    runs.push_back({l, -1});
    for (size_t s = 0; s < prefill_counts.size(); ++s) {
      runs.push_back({l, static_cast<int>(s)});
    }
  }
  auto run_one = [&](const Job& j) {
    PdLevelReport& lr = rep.levels[j.level];
    if (j.split < 0) {
      lr.aggregated = run_policy(w, lr.level, routing::builtin_policy("kv"), c);
    } else {
      lr.splits[static_cast<size_t>(j.split)] =
          run_pd(w, lr.level, prefill_counts[static_cast<size_t>(j.split)], c);
    }
  };
  const size_t width = std::max<unsigned>(1, jobs);
  for (size_t at = 0; at < runs.size(); at += width) {
    std::vector<std::future<void>> batch;
    for (size_t k = at; k < std::min(runs.size(), at + width); ++k) {
      batch.push_back(std::async(std::launch::async, run_one, runs[k]));
    }
    for (auto& f : batch) {
      f.get();
    }
  }
  return rep;
}

namespace {

bool within_slo(const PolicyResult& r, double ttft, double itl) {
  return r.completed > 0 && r.errors == 0 && r.shed == 0 && r.ttft_p90_s <= ttft && r.itl_p90_s <= itl;
}

std::string row(const std::string& name, const PolicyResult& r, const std::string& extra) {
  return fmt::format(
      "| {} | {:.3f} | {:.3f} | {:.3f} | {:.1f} | {:.1f} | {:.0f} | {:.3f} | {:.1f} | {} / {} | {} |\n", name,
      r.ttft_p50_s, r.ttft_p90_s, r.ttft_p99_s, r.itl_p50_s * 1e3, r.itl_p90_s * 1e3, r.output_tok_s,
      r.goodput_rps, r.makespan_s, r.errors, r.shed, extra);
}

}  // namespace

std::string render_pd_markdown(const PdReport& r) {
  std::string md = fmt::format(
      "### {} — {} nodes, {} requests (mean {:.0f} in / {:.0f} out tokens): aggregated vs disaggregated\n\n"
      "Aggregated: every node `both`, the kv policy. `pd P:D`: P prefill nodes, D decode nodes, the "
      "router's two legs (kv score for prefill, load then overlap for decode), KV moved by the "
      "simulator's transfer model. Same arrivals for every row of a level.\n\n",
      r.workload, r.nodes, r.requests, r.mean_input_tokens, r.mean_output_tokens);
  for (const auto& lr : r.levels) {
    md += fmt::format(
        "#### Load {:.2f} (round_robin-equivalent utilisation of the aggregated cluster): {:.3f} req/s\n\n",
        lr.level.utilisation, lr.level.rate_rps);
    md +=
        "| mode | TTFT p50 s | p90 s | p99 s | ITL p50 ms | ITL p90 ms | out tok/s | goodput req/s | "
        "makespan s | "
        "errors / shed | notes |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    md += row("aggregated", lr.aggregated,
              fmt::format("hit rate {:.1f}%, busy {:.2f}", lr.aggregated.hit_rate * 100,
                          lr.aggregated.utilisation));
    for (const auto& s : lr.splits) {
      const double mean_tx = s.pulls_ok > 0 ? static_cast<double>(s.transferred_tokens) / s.pulls_ok : 0;
      md += row(s.r.policy, s.r,
                fmt::format(
                    "TTFT = prefill leg p50 {:.2f} / p90 {:.2f} s + handoff to first token p50 {:.3f} / p90 "
                    "{:.3f} s; hit rate {:.1f}%, busy P {:.2f} (max {:.2f}) / D {:.2f}; pulls {} ok "
                    "{} failed, {} "
                    "recompute, {} fallback (no prefill node); "
                    "{:.0f} tokens/pull",
                    s.prefill_leg_p50_s, s.prefill_leg_p90_s, s.decode_ttft_p50_s, s.decode_ttft_p90_s,
                    s.r.hit_rate * 100, s.prefill_utilisation, s.prefill_max_utilisation,
                    s.decode_utilisation, s.pulls_ok, s.pulls_failed, s.recomputes, s.fallbacks, mean_tx));
    }
    md += "\n";
  }
  md += fmt::format(
      "#### Throughput: highest swept level with TTFT p90 <= {:.1f} s and ITL p90 <= {:.0f} ms\n\n",
      r.slo_ttft_s, r.slo_itl_s * 1e3);
  md += "| mode | req/s |\n|---|---:|\n";
  auto best = [&](auto&& pick) {
    double rps = 0;
    for (const auto& lr : r.levels) {
      if (within_slo(pick(lr), r.slo_ttft_s, r.slo_itl_s)) {
        rps = std::max(rps, lr.level.rate_rps);
      }
    }
    return rps > 0 ? fmt::format("{:.3f}", rps) : std::string("none");
  };
  md += "| aggregated | " +
        best([](const PdLevelReport& lr) -> const PolicyResult& { return lr.aggregated; }) + " |\n";
  for (size_t s = 0; s < r.prefill_counts.size(); ++s) {
    const std::string name = r.levels.empty() ? "" : r.levels.front().splits[s].r.policy;
    md += "| " + name + " | " +
          best([s](const PdLevelReport& lr) -> const PolicyResult& { return lr.splits[s].r; }) + " |\n";
  }
  return md + "\n";
}

int pd_main(const Workload& w, const ClusterConfig& c, const std::vector<double>& levels,
            const std::vector<uint32_t>& prefill_counts, unsigned jobs, const std::string& out_md) {
  for (uint32_t p : prefill_counts) {
    if (p == 0 || p >= c.nodes) {
      std::fprintf(stderr, "cgn-bench: --pd-prefill %u leaves a pool empty on %u nodes (use 1 .. %u)\n", p,
                   c.nodes, c.nodes - 1);
      return 2;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const PdReport r = run_pd_comparison(w, c, levels, prefill_counts, jobs);
  const std::string md = render_pd_markdown(r);
  std::fputs(md.c_str(), stdout);
  std::fprintf(stderr, "cgn-bench: %zu runs in %.1f s wall\n", levels.size() * (prefill_counts.size() + 1),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!out_md.empty()) {
    std::ofstream f(out_md);
    f << md;
    if (!f) {
      std::fprintf(stderr, "cgn-bench: cannot write %s\n", out_md.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace cgn::bench
