#include "bench_harness/cluster_sim_fleet.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "bench_harness/sample_stats.h"

namespace cgn::bench {

SimFleet::SimFleet(const ClusterConfig& c, routing::RoutingCore& core,
                   const std::function<routing::NodeRole(uint32_t)>& role_of, const Clock& clock)
    : core_(core),
      scrape_interval_(c.scrape_interval),
      busy_(c.nodes, 0),
      node_of_(c.nodes, routing::kNoNode),
      next_scrape_(c.nodes, 0) {
  mctx_.model_name = c.model_name;
  mopt_.model = c.model_name;
  kvcache::BlockNamespace ns;
  ns.model = c.model_name;
  ns.dtype = "bf16";
  ns.block_tokens = c.node_model.block_size;
  for (uint32_t i = 0; c.tiers.enabled() && i < c.nodes; ++i) {
    auto t = StoreTier::open(c.tiers, ns, clock);
    if (!t.ok()) {
      throw std::runtime_error(t.error().message);
    }
    tiers_.push_back(std::move(*t));
  }
  for (uint32_t i = 0; i < c.nodes; ++i) {
    sim::EngineConfig ec;
    ec.model = c.node_model;
    ec.offload = tier(i);
    ec.engine_id = "sim-node-" + std::to_string(i);
    Nanos* acc = &busy_[i];
    ec.on_step = [acc](const sim::StepInfo& s) { *acc += s.end - s.start; };
    engines_.push_back(std::make_unique<sim::Engine>(std::move(ec)));
    ids_.push_back("node-" + std::to_string(i));
    routing::NodeUpdate reg;  // the static node list the gateway starts from
    reg.address = "sim://" + ids_.back();
    reg.models = std::vector<std::string>{c.model_name};
    reg.engine = "vllm";
    reg.role = role_of(i);
    reg.health = routing::Health::kHealthy;
    node_of_[i] = core_.upsert_node(ids_.back(), reg, routing::UpdateSource::kStatic);
  }
}

uint32_t SimFleet::engine_of(routing::NodeIndex n) const {
  uint32_t i = 0;
  while (i < size() && node_of_[i] != n) {
    ++i;
  }
  return i;
}

void SimFleet::scrape(uint32_t i, Nanos now) {
  const std::string text = sim::render_metrics(sim::Flavour::kVllm, *engines_[i], mctx_);
  auto m = routing::scrape_engine_metrics(routing::EngineKind::kVllm, text, mopt_);
  routing::NodeUpdate u;
  if (m.ok()) {
    u = routing::to_node_update(*m);
    u.health = routing::Health::kHealthy;
  } else {
    u.health = routing::Health::kUnhealthy;
  }
  (void)core_.upsert_node(ids_[i], u, routing::UpdateSource::kScrape);
  const auto n = static_cast<Nanos>(size());
  const Nanos phase = scrape_interval_ * static_cast<Nanos>(i) / n;
  next_scrape_[i] = now < phase ? phase : phase + ((now - phase) / scrape_interval_ + 1) * scrape_interval_;
}

Nanos SimFleet::next_engine_event(uint32_t& i) const {
  Nanos t = sim::kNever;
  i = 0;
  for (uint32_t j = 0; j < size(); ++j) {
    const Nanos n = engines_[j]->next_event_time();
    if (n < t) {
      t = n;
      i = j;
    }
  }
  return t;
}

Nanos SimFleet::next_scrape(uint32_t& i) const {
  Nanos t = sim::kNever;
  i = 0;
  for (uint32_t j = 0; j < size(); ++j) {
    if (next_scrape_[j] < t) {
      t = next_scrape_[j];
      i = j;
    }
  }
  return t;
}

std::vector<Nanos> scaled_arrivals(const Workload& w, const LoadLevel& level) {
  const Nanos t0 = w.requests.empty() ? 0 : w.requests.front().arrival;
  std::vector<Nanos> arrival(w.requests.size());
  for (size_t k = 0; k < w.requests.size(); ++k) {
    arrival[k] =
        static_cast<Nanos>(std::llround(static_cast<double>(w.requests[k].arrival - t0) * level.time_scale));
  }
  return arrival;
}

void RunSamples::add_completion(Nanos arrival, Nanos first_token, Nanos done, uint32_t tokens,
                                const ClusterConfig& c) {
  const double t = seconds(first_token - arrival);
  ttft.push_back(t);
  e2e.push_back(seconds(done - arrival));
  const double per_tok = tokens > 1 ? seconds(done - first_token) / (tokens - 1) : 0.0;
  itl.push_back(per_tok);
  good += (t <= c.slo_ttft_s && per_tok <= c.slo_itl_s) ? 1 : 0;
  output_tokens += tokens;
}

void summarise_energy(SimFleet& fleet, const sim::NodeModel& m, const RunSamples& s, PolicyResult& res) {
  double joules = 0;
  for (uint32_t i = 0; i < fleet.size(); ++i) {
    const sim::EngineStats& st = fleet.engine(i).stats();
    joules += m.energy_joules(s.last_done, st.prefill_ns, st.decode_ns);
  }
  res.energy_j = joules;
  res.j_per_token = s.output_tokens > 0 ? joules / static_cast<double>(s.output_tokens) : 0;
  res.j_per_request = res.completed > 0 ? joules / static_cast<double>(res.completed) : 0;
}

void summarise_run(RunSamples& s, const std::vector<Nanos>& busy, PolicyResult& res) {
  std::sort(s.ttft.begin(), s.ttft.end());
  std::sort(s.itl.begin(), s.itl.end());
  std::sort(s.e2e.begin(), s.e2e.end());
  res.ttft_p50_s = percentile(s.ttft, 50);
  res.ttft_p90_s = percentile(s.ttft, 90);
  res.ttft_p99_s = percentile(s.ttft, 99);
  res.ttft_mean_s = mean(s.ttft);
  res.itl_p50_s = percentile(s.itl, 50);
  res.itl_p90_s = percentile(s.itl, 90);
  res.itl_mean_s = mean(s.itl);
  res.e2e_p50_s = percentile(s.e2e, 50);
  res.makespan_s = seconds(s.last_done);
  if (res.makespan_s > 0) {
    res.goodput_rps = static_cast<double>(s.good) / res.makespan_s;
    res.output_tok_s = static_cast<double>(s.output_tokens) / res.makespan_s;
  }
  res.hit_rate = res.prompt_tokens == 0
                     ? 0
                     : static_cast<double>(res.cached_tokens) / static_cast<double>(res.prompt_tokens);
  Nanos busy_sum = 0;
  Nanos busy_max = 0;
  for (Nanos b : busy) {
    busy_sum += b;
    busy_max = std::max(busy_max, b);
  }
  res.busy_mean_s = seconds(busy_sum) / static_cast<double>(std::max<size_t>(busy.size(), 1));
  res.busy_max_s = seconds(busy_max);
  res.imbalance = res.busy_mean_s > 0 ? res.busy_max_s / res.busy_mean_s : 0;
  res.utilisation = res.makespan_s > 0 ? res.busy_mean_s / res.makespan_s : 0;
}

}  // namespace cgn::bench
