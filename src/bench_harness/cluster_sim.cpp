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

namespace {

routing::RoutingPolicy policy_of(const ClusterConfig& c, const routing::Policy* policy) {
  routing::RoutingPolicy rp = c.routing;
  rp.ranking = policy;
  return rp;
}

// One policy's run over the workload: the routing core and the fleet in virtual time, driven
// event by event (engine events, metric scrapes, arrivals, earliest first).
class PolicyRun {
 public:
  PolicyRun(const Workload& w, const LoadLevel& level, const routing::Policy* policy, const ClusterConfig& c)
      : w_(w),
        c_(c),
        core_(clock_, policy_of(c, policy), routing::IndexConfig{}, c.seed),
        fleet_(
            c, core_, [](uint32_t) { return routing::NodeRole::kBoth; }, clock_),
        pending_(c.nodes),
        arrival_(scaled_arrivals(w, level)),
        seed_(make_digest_seed(DigestSeedFields{kDigestFormatVersion, c.model_name, {}})),
        tokens_per_digest_(core_.policy().weights.block_bytes / 4) {
    res_.policy = policy->name();
    res_.requests = w.requests.size();
    res_.per_node_requests.assign(c.nodes, 0);
    samples_.ttft.reserve(w.requests.size());
    res_.diagnosis.cold_per_node.assign(c.nodes, 0);
  }

  PolicyResult run() {
    // A refused request leaves the engine's queue untouched; accepted ones wake it.
    fleet_.run_event_loop(
        clock_, arrival_, cursor_, [this] { return cursor_ == w_.requests.size() && outstanding_ == 0; },
        [this](uint32_t ei) { handle_events(ei); }, [this](size_t k, Nanos at) { arrive(k, at); });
    summarise_run(samples_, fleet_.busy(), res_);
    summarise_energy(fleet_, c_.node_model, samples_, res_);
    return std::move(res_);
  }

 private:
  uint64_t believed(uint32_t j, size_t prompt_len) {
    return std::min<uint64_t>(static_cast<uint64_t>(diag_overlap_.run(fleet_.node(j))) * tokens_per_digest_,
                              prompt_len);
  }

  // Attributes the chosen node's missing hit tokens (see Diagnosis) for a dispatch to engine i.
  void diagnose_dispatch(uint32_t i, size_t prompt_len) {
    Diagnosis& dg = res_.diagnosis;
    uint64_t best = 0;
    uint32_t best_node = i;
    for (uint32_t j = 0; j < c_.nodes; ++j) {
      if (diag_held_[j] > best) {
        best = diag_held_[j];
        best_node = j;
      }
    }
    const uint64_t held = diag_held_[i];
    ++dg.requests;
    dg.prompt_tokens += prompt_len;
    dg.best_tokens += best;
    dg.chosen_tokens += held;
    dg.believed_chosen_tokens += believed(i, prompt_len);
    dg.overbelief_tokens += believed(i, prompt_len) > held ? believed(i, prompt_len) - held : 0;
    if (best == *std::min_element(diag_held_.begin(), diag_held_.end())) {
      ++dg.cold_requests;
      ++dg.cold_per_node[i];
    }
    if (best <= held) {
      return;
    }
    const uint64_t lost = best - held;
    bool ranked = false;
    for (const auto& cand : decision_.ranked) {
      ranked = ranked || cand.node == fleet_.node(best_node);
    }
    if (!ranked) {
      dg.lost_guard += lost;
      ++dg.n_guard;
    } else if (believed(i, prompt_len) >= held + tokens_per_digest_) {
      dg.lost_stale += lost;
      ++dg.n_stale;
    } else if (believed(best_node, prompt_len) + tokens_per_digest_ <= best) {
      dg.lost_blind += lost;
      ++dg.n_blind;
    } else {
      dg.lost_score += lost;
      ++dg.n_score;
    }
  }

  // Diagnosis: what every engine's pool really holds of the prompt, and what the index believes.
  void measure_held(const std::vector<sim::TokenId>& tokens) {
    diag_held_.assign(c_.nodes, 0);
    const auto ntok = static_cast<uint64_t>(tokens.size());
    const uint64_t cap_blocks = ntok == 0 ? 0 : (ntok - 1) / c_.node_model.block_size;
    // The prompt's block hashes once, asked of every engine's pool (what
    // Engine::cached_prefix_blocks does per engine, without hashing the prompt N times).
    diag_hashes_.clear();
    sim::extend_block_hashes(tokens, c_.node_model.block_size, diag_hashes_);
    for (uint32_t j = 0; j < c_.nodes; ++j) {
      diag_held_[j] =
          std::min<uint64_t>(fleet_.engine(j).pool().count_cached_prefix(diag_hashes_), cap_blocks) *
          c_.node_model.block_size;
    }
    core_.index().match(digests_, core_.policy().weights.credit, c_.nodes, diag_overlap_);
  }

  void arrive(size_t k, Nanos now) {
    const WorkRequest& wr = w_.requests[k];
    build_prompt(w_, wr, prompt_);
    digests_.clear();
    compute_prefix_digests(seed_, prompt_, core_.policy().weights.block_bytes, digests_, 8192);
    routing::RouteRequest rr;
    rr.model = c_.model_name;
    rr.digests = digests_;
    rr.prompt_tokens = static_cast<uint64_t>(static_cast<double>(prompt_.size()) / 4.0);  // as the gateway
    rr.session_key = wr.session_key;
    auto st = core_.decide_into(rr, decision_);
    if (!st.ok()) {
      if (st.error().code == routing::RouteError::kAllOverloaded) {
        ++res_.shed;
      } else {
        ++res_.errors;
      }
      return;
    }
    res_.guarded_out += decision_.guarded_out > 0 ? 1 : 0;
    std::vector<sim::TokenId> tokens = sim::encode(prompt_);
    if (c_.diagnose) {
      measure_held(tokens);
    }
    dispatch(k, now, rr, tokens);
  }

  // To the first ranked engine that accepts it (the gateway fails over on 429).
  void dispatch(size_t k, Nanos now, const routing::RouteRequest& rr,
                const std::vector<sim::TokenId>& tokens) {
    const WorkRequest& wr = w_.requests[k];
    for (const auto& cand : decision_.ranked) {
      const uint32_t i = fleet_.engine_of(cand.node);
      if (i == c_.nodes) {
        continue;
      }
      sim::Request req;
      req.external_id = std::to_string(k);
      req.prompt = tokens;
      req.max_tokens = wr.output_tokens;
      req.stream = true;
      req.ignore_eos = true;
      req.want_text = false;
      auto h = fleet_.engine(i).add_request(std::move(req), now);
      if (!h.ok()) {
        if (h.error().code == sim::EngineError::kQueueFull) {
          continue;  // the gateway fails over on 429
        }
        ++res_.errors;
        return;
      }
      if (c_.diagnose) {
        diagnose_dispatch(i, tokens.size());
      }
      if (c_.tier_credit) {
        publish_tier_residency(i, tokens);
      }
      Pending p;
      p.index = k;
      p.ticket = core_.record_dispatch(cand.node, rr);
      pending_[i].emplace(*h, p);
      ++res_.per_node_requests[i];
      ++outstanding_;
      return;
    }
    ++res_.errors;  // every ranked node refused it
  }

  // What the live agent publishes from its kvcached's lookup: the router digests of the prompt
  // that node i's offload tiers hold beyond its HBM hit, confirmed at their tier.
  void publish_tier_residency(uint32_t i, const std::vector<sim::TokenId>& tokens) {
    StoreTier* tier = fleet_.tier(i);
    if (tier == nullptr) {
      return;
    }
    const uint32_t bs = c_.node_model.block_size;
    tier_hashes_.clear();
    sim::extend_block_hashes(tokens, bs, tier_hashes_);
    const uint32_t hbm = fleet_.engine(i).pool().count_cached_prefix(tier_hashes_);
    tier_run_.clear();
    tier->resident(std::span<const sim::BlockHash>(tier_hashes_).subspan(hbm), tier_run_);
    if (tier_run_.empty()) {
      return;
    }
    // Token ends in bytes of the prompt: a router digest is resident when its block_bytes fit
    // before the end of the resident tokens.
    piece_ends_.clear();
    std::vector<sim::TokenId> ids;
    sim::encode(prompt_, ids, &piece_ends_);
    const uint32_t bb = core_.policy().weights.block_bytes;
    auto digests_before = [&](size_t blocks) -> size_t {
      const size_t tok = std::min(blocks * bs, piece_ends_.size());
      return std::min<size_t>(tok == 0 ? 0 : piece_ends_[tok - 1] / bb, digests_.size());
    };
    size_t ram = 0;
    while (ram < tier_run_.size() && tier_run_[ram] == sim::OffloadTierKind::kRam) {
      ++ram;
    }
    const size_t d0 = digests_before(hbm);
    const size_t d1 = std::max(d0, digests_before(hbm + ram));
    const size_t d2 = std::max(d1, digests_before(hbm + tier_run_.size()));
    const std::span<const Digest> all(digests_);
    if (d1 > d0) {
      core_.confirm_prefixes(fleet_.node(i), all.subspan(d0, d1 - d0), routing::Tier::kRam);
    }
    if (d2 > d1) {
      core_.confirm_prefixes(fleet_.node(i), all.subspan(d1, d2 - d1), routing::Tier::kSsd);
    }
  }

  void handle_events(uint32_t i) {
    events_.clear();
    fleet_.engine(i).take_events(events_);
    for (auto& ev : events_) {
      auto it = pending_[i].find(ev.handle);
      if (it == pending_[i].end()) {
        continue;
      }
      Pending& p = it->second;
      if (ev.kind == sim::EventKind::kToken && ev.token_index == 0) {
        p.first_token = ev.time;
        core_.record_first_token(p.ticket);
      } else if (ev.kind == sim::EventKind::kFinished) {
        core_.record_completion(p.ticket);
        finished(p, ev);
        pending_[i].erase(it);
        --outstanding_;
      }
    }
  }

  void finished(const Pending& p, const sim::Event& ev) {
    const sim::Completion& comp = *ev.completion;
    if (comp.reason == sim::FinishReason::kError || comp.reason == sim::FinishReason::kAbort ||
        p.first_token < 0) {
      ++res_.errors;
    } else {
      ++res_.completed;
      samples_.add_completion(arrival_[p.index], p.first_token, ev.time, comp.usage.completion_tokens, c_);
      res_.prompt_tokens += comp.usage.prompt_tokens;
      res_.cached_tokens += comp.usage.cached_tokens;
      res_.loaded_ram_tokens += comp.usage.loaded_ram_tokens;
      res_.loaded_ssd_tokens += comp.usage.loaded_ssd_tokens;
      res_.diagnosis.reported_tokens += comp.usage.cached_tokens;
    }
    samples_.last_done = std::max(samples_.last_done, ev.time);
  }

  const Workload& w_;
  const ClusterConfig& c_;
  PolicyResult res_;
  ManualClock clock_{0};
  routing::RoutingCore core_;
  SimFleet fleet_;
  std::vector<std::unordered_map<sim::RequestHandle, Pending>> pending_;
  const std::vector<Nanos> arrival_;
  RunSamples samples_;
  size_t cursor_ = 0;
  size_t outstanding_ = 0;
  std::string prompt_;
  std::vector<Digest> digests_;
  const Digest seed_;
  std::vector<sim::Event> events_;
  routing::Decision decision_;
  std::vector<uint64_t> diag_held_;
  std::vector<sim::BlockHash> diag_hashes_;
  routing::OverlapScratch diag_overlap_;
  const uint64_t tokens_per_digest_;
  std::vector<sim::BlockHash> tier_hashes_;
  std::vector<sim::OffloadTierKind> tier_run_;
  std::vector<uint32_t> piece_ends_;
};

}  // namespace

PolicyResult run_policy(const Workload& w, const LoadLevel& level, const routing::Policy* policy,
                        const ClusterConfig& c) {
  return PolicyRun(w, level, policy, c).run();
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
