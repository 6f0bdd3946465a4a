#include "bench_harness/cluster_sim.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>

#include "bench_harness/cluster_sim_fleet.h"
#include "bench_harness/sample_stats.h"
#include "core/digest.h"
#include "routing/engine_metrics.h"
#include "routing/router_core.h"
#include "sim/engine.h"
#include "sim/kv_cache.h"
#include "sim/metrics_render.h"
#include "sim/tokenizer.h"

namespace cgn::bench {
namespace {

Nanos span_of(const Workload& w) {
  return w.requests.empty() ? 0 : w.requests.back().arrival - w.requests.front().arrival;
}

// One request the router dispatched and the engine has not finished.
struct Pending {
  size_t index = 0;  // into the workload
  routing::DispatchTicket ticket;
  Nanos first_token = -1;
};

}  // namespace

double request_demand_s(const sim::NodeModel& m, uint32_t input_tokens, uint32_t output_tokens) {
  const double prefill = seconds(m.idle_ttft(input_tokens, 0));
  const double per_token_ns =
      m.decode_ns_per_seq +
      m.decode_attention_ns_per_context_token * (static_cast<double>(input_tokens) + output_tokens / 2.0);
  return prefill + static_cast<double>(output_tokens > 0 ? output_tokens - 1 : 0) * per_token_ns * 1e-9;
}

double offered_demand_s(const Workload& w, const sim::NodeModel& m) {
  double d = 0;
  for (const auto& r : w.requests) {
    d += request_demand_s(m, r.input_tokens(), r.output_tokens);
  }
  return d;
}

LoadLevel load_level(const Workload& w, const ClusterConfig& c, double utilisation) {
  LoadLevel l;
  l.utilisation = utilisation;
  const double demand = offered_demand_s(w, c.node_model);
  const double span = seconds(span_of(w));
  if (span <= 0 || demand <= 0 || utilisation <= 0 || c.nodes == 0) {
    return l;
  }
  const double new_span = demand / (utilisation * static_cast<double>(c.nodes));
  l.time_scale = new_span / span;
  l.rate_rps = static_cast<double>(w.requests.size()) / new_span;
  return l;
}

PolicyResult run_policy(const Workload& w, const LoadLevel& level, routing::PolicyKind policy,
                        const ClusterConfig& c) {
  PolicyResult res;
  res.policy = std::string(routing::to_string(policy));
  res.requests = w.requests.size();
  res.per_node_requests.assign(c.nodes, 0);

  ManualClock clock(0);
  routing::RoutingPolicy rp = c.routing;
  rp.kind = policy;
  routing::RoutingCore core(clock, rp, routing::IndexConfig{}, c.seed);

  SimFleet fleet(c, core, [](uint32_t) { return routing::NodeRole::kBoth; });
  std::vector<std::unordered_map<sim::RequestHandle, Pending>> pending(c.nodes);
  const std::vector<Nanos> arrival = scaled_arrivals(w, level);

  RunSamples samples;
  samples.ttft.reserve(w.requests.size());
  size_t cursor = 0;
  size_t outstanding = 0;
  std::string prompt;
  std::vector<Digest> digests;
  const Digest seed = make_digest_seed(DigestSeedFields{kDigestFormatVersion, c.model_name, {}});
  std::vector<sim::Event> events;
  routing::Decision decision;
  std::vector<uint64_t> diag_held;
  std::vector<sim::BlockHash> diag_hashes;
  routing::OverlapScratch diag_overlap;
  Diagnosis& dg = res.diagnosis;
  dg.cold_per_node.assign(c.nodes, 0);
  const uint64_t tokens_per_digest = core.policy().weights.block_bytes / 4;
  // Attributes the chosen node's missing hit tokens (see Diagnosis) for a dispatch to engine i.
  auto diagnose_dispatch = [&](uint32_t i, size_t prompt_len) {
    uint64_t best = 0;
    uint32_t best_node = i;
    for (uint32_t j = 0; j < c.nodes; ++j) {
      if (diag_held[j] > best) {
        best = diag_held[j];
        best_node = j;
      }
    }
    const uint64_t held = diag_held[i];
    auto believed = [&](uint32_t j) {
      return std::min<uint64_t>(static_cast<uint64_t>(diag_overlap.run(fleet.node(j))) * tokens_per_digest,
                                prompt_len);
    };
    ++dg.requests;
    dg.prompt_tokens += prompt_len;
    dg.best_tokens += best;
    dg.chosen_tokens += held;
    dg.believed_chosen_tokens += believed(i);
    dg.overbelief_tokens += believed(i) > held ? believed(i) - held : 0;
    if (best == *std::min_element(diag_held.begin(), diag_held.end())) {
      ++dg.cold_requests;
      ++dg.cold_per_node[i];
    }
    if (best <= held) {
      return;
    }
    const uint64_t lost = best - held;
    bool ranked = false;
    for (const auto& cand : decision.ranked) {
      ranked = ranked || cand.node == fleet.node(best_node);
    }
    if (!ranked) {
      dg.lost_guard += lost;
      ++dg.n_guard;
    } else if (believed(i) >= held + tokens_per_digest) {
      dg.lost_stale += lost;
      ++dg.n_stale;
    } else if (believed(best_node) + tokens_per_digest <= best) {
      dg.lost_blind += lost;
      ++dg.n_blind;
    } else {
      dg.lost_score += lost;
      ++dg.n_score;
    }
  };

  auto arrive = [&](size_t k, Nanos now) {
    const WorkRequest& wr = w.requests[k];
    build_prompt(w, wr, prompt);
    digests.clear();
    compute_prefix_digests(seed, prompt, core.policy().weights.block_bytes, digests, 8192);
    routing::RouteRequest rr;
    rr.model = c.model_name;
    rr.digests = digests;
    rr.prompt_tokens = static_cast<uint64_t>(static_cast<double>(prompt.size()) / 4.0);  // as the gateway
    rr.session_key = wr.session_key;
    auto st = core.decide_into(rr, decision);
    if (!st.ok()) {
      if (st.error().code == routing::RouteError::kAllOverloaded) {
        ++res.shed;
      } else {
        ++res.errors;
      }
      return;
    }
    res.guarded_out += decision.guarded_out > 0 ? 1 : 0;
    std::vector<sim::TokenId> tokens = sim::encode(prompt);
    if (c.diagnose) {
      diag_held.assign(c.nodes, 0);
      const auto ntok = static_cast<uint64_t>(tokens.size());
      const uint64_t cap_blocks = ntok == 0 ? 0 : (ntok - 1) / c.node_model.block_size;
      // The prompt's block hashes once, asked of every engine's pool (what
      // Engine::cached_prefix_blocks does per engine, without hashing the prompt N times).
      diag_hashes.clear();
      sim::extend_block_hashes(tokens, c.node_model.block_size, diag_hashes);
      for (uint32_t j = 0; j < c.nodes; ++j) {
        diag_held[j] =
            std::min<uint64_t>(fleet.engine(j).pool().count_cached_prefix(diag_hashes), cap_blocks) *
            c.node_model.block_size;
      }
      core.index().match(digests, core.policy().weights.credit, c.nodes, diag_overlap);
    }
    for (const auto& cand : decision.ranked) {
      const uint32_t i = fleet.engine_of(cand.node);
      if (i == c.nodes) {
        continue;
      }
      sim::Request req;
      req.external_id = std::to_string(k);
      req.prompt = tokens;
      req.max_tokens = wr.output_tokens;
      req.stream = true;
      req.ignore_eos = true;
      req.want_text = false;
      auto h = fleet.engine(i).add_request(std::move(req), now);
      if (!h.ok()) {
        if (h.error().code == sim::EngineError::kQueueFull) {
          continue;  // the gateway fails over on 429
        }
        ++res.errors;
        return;
      }
      if (c.diagnose) {
        diagnose_dispatch(i, tokens.size());
      }
      Pending p;
      p.index = k;
      p.ticket = core.record_dispatch(cand.node, rr);
      pending[i].emplace(*h, p);
      ++res.per_node_requests[i];
      ++outstanding;
      return;
    }
    ++res.errors;  // every ranked node refused it
  };

  auto handle_events = [&](uint32_t i) {
    events.clear();
    fleet.engine(i).take_events(events);
    for (auto& ev : events) {
      auto it = pending[i].find(ev.handle);
      if (it == pending[i].end()) {
        continue;
      }
      Pending& p = it->second;
      if (ev.kind == sim::EventKind::kToken && ev.token_index == 0) {
        p.first_token = ev.time;
        core.record_first_token(p.ticket);
      } else if (ev.kind == sim::EventKind::kFinished) {
        core.record_completion(p.ticket);
        const sim::Completion& comp = *ev.completion;
        if (comp.reason == sim::FinishReason::kError || comp.reason == sim::FinishReason::kAbort ||
            p.first_token < 0) {
          ++res.errors;
        } else {
          ++res.completed;
          const Nanos arr = arrival[p.index];
          const double t = seconds(p.first_token - arr);
          samples.ttft.push_back(t);
          samples.e2e.push_back(seconds(ev.time - arr));
          const uint32_t n = comp.usage.completion_tokens;
          const double per_tok = n > 1 ? seconds(ev.time - p.first_token) / (n - 1) : 0.0;
          samples.itl.push_back(per_tok);
          samples.good += (t <= c.slo_ttft_s && per_tok <= c.slo_itl_s) ? 1 : 0;
          samples.output_tokens += n;
          res.prompt_tokens += comp.usage.prompt_tokens;
          res.cached_tokens += comp.usage.cached_tokens;
          dg.reported_tokens += comp.usage.cached_tokens;
        }
        samples.last_done = std::max(samples.last_done, ev.time);
        pending[i].erase(it);
        --outstanding;
      }
    }
  };

  for (;;) {
    if (cursor == w.requests.size() && outstanding == 0) {
      break;
    }
    uint32_t ei = 0;
    uint32_t si = 0;
    const Nanos te = fleet.next_engine_event(ei);
    const Nanos ts = fleet.next_scrape(si);
    const Nanos ta = cursor < w.requests.size() ? arrival[cursor] : sim::kNever;
    if (te <= ts && te <= ta) {
      clock.set(te);
      fleet.engine(ei).advance_to(te);
      handle_events(ei);
    } else if (ts <= ta) {
      clock.set(ts);
      fleet.scrape(si, ts);
    } else {
      clock.set(ta);
      arrive(cursor, ta);
      ++cursor;
      // A refused request leaves the engine's queue untouched; accepted ones wake it.
    }
  }

  summarise_run(samples, fleet.busy(), res);
  return res;
}

double ideal_hit_rate(const Workload& w, const ClusterConfig& c) {
  return ideal_bound(w, c).hit_rate;
}

IdealBound ideal_bound(const Workload& w, const ClusterConfig& c) {
  const sim::NodeModel& m = c.node_model;
  std::vector<double> floor;
  floor.reserve(w.requests.size());
  sim::BlockPool pool(c.nodes * m.num_gpu_blocks);
  const uint32_t bs = m.block_size;
  std::string prompt;
  std::vector<sim::BlockHash> hashes;
  std::vector<sim::BlockId> blocks;
  uint64_t hit_tokens = 0;
  uint64_t prompt_tokens = 0;
  for (const auto& r : w.requests) {
    build_prompt(w, r, prompt);
    const std::vector<sim::TokenId> tokens = sim::encode(prompt);
    const auto n = static_cast<uint32_t>(tokens.size());
    if (n == 0 || static_cast<uint64_t>(n) + r.output_tokens > m.max_model_len) {
      continue;  // the engines refuse these too
    }
    hashes.clear();
    sim::extend_block_hashes(tokens, bs, hashes);
    blocks.clear();
    // vLLM always computes the last prompt token, as the engine does.
    const uint32_t max_hit = (n - 1) / bs;
    const uint32_t hit = pool.acquire_cached_prefix(
        std::span<const sim::BlockHash>(hashes).first(std::min<size_t>(hashes.size(), max_hit)), max_hit,
        blocks);
    const uint32_t need = (n + bs - 1) / bs - hit;
    if (pool.allocate(need, blocks)) {
      for (size_t b = hit; b < hashes.size(); ++b) {
        pool.cache_block(blocks[b], hashes[b]);
      }
    }
    pool.release(blocks);
    hit_tokens += static_cast<uint64_t>(hit) * bs;
    prompt_tokens += n;
    floor.push_back(seconds(m.idle_ttft(n, static_cast<uint64_t>(hit) * bs)));
  }
  IdealBound b;
  b.hit_rate = prompt_tokens == 0 ? 0 : static_cast<double>(hit_tokens) / static_cast<double>(prompt_tokens);
  std::sort(floor.begin(), floor.end());
  b.floor_ttft_p50_s = percentile(floor, 50);
  b.floor_ttft_p90_s = percentile(floor, 90);
  return b;
}

}  // namespace cgn::bench
