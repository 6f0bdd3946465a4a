#pragma once
// The simulated engines of one `cgn-bench sim` run and the routing core's view of them, shared by
// run_policy() (cluster_sim.cpp) and run_pd() (cluster_sim_pd.cpp): the engines with their busy
// time, their registration as static nodes, scrapes of their /metrics at each node's own phase
// (as the gateway's scraper polls), and the next event of the virtual-time loop. Plus the two
// pieces of bookkeeping both runs share: scaled arrivals and the summary of what they measured.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_harness/cluster_sim.h"
#include "core/clock.h"
#include "routing/engine_metrics.h"
#include "routing/router_core.h"
#include "sim/engine.h"
#include "sim/metrics_render.h"

namespace cgn::bench {

class SimFleet {
 public:
  // c.nodes engines with c.node_model, registered with `core` as node-<i> (engine id
  // sim-node-<i>) in the role role_of(i).
  SimFleet(const ClusterConfig& c, routing::RoutingCore& core,
           const std::function<routing::NodeRole(uint32_t)>& role_of);

  uint32_t size() const { return static_cast<uint32_t>(engines_.size()); }
  sim::Engine& engine(uint32_t i) { return *engines_[i]; }
  routing::NodeIndex node(uint32_t i) const { return node_of_[i]; }
  // The engine behind a routing node, or size() for none.
  uint32_t engine_of(routing::NodeIndex n) const;
  // Virtual time each engine spent stepping.
  const std::vector<Nanos>& busy() const { return busy_; }

  // Engine i's /metrics through the router's scraper into the core; schedules its next scrape at
  // phase_i + k * interval (independent timers, as live).
  void scrape(uint32_t i, Nanos now);
  // The earliest engine event and the earliest scrape due (sim::kNever for none), node in `i`.
  Nanos next_engine_event(uint32_t& i) const;
  Nanos next_scrape(uint32_t& i) const;

 private:
  routing::RoutingCore& core_;
  Nanos scrape_interval_;
  std::vector<std::unique_ptr<sim::Engine>> engines_;
  std::vector<Nanos> busy_;
  std::vector<std::string> ids_;
  std::vector<routing::NodeIndex> node_of_;
  std::vector<Nanos> next_scrape_;
  sim::MetricsContext mctx_;
  routing::MapperOptions mopt_;
};

// Request k's arrival in the level's virtual time: the trace's offsets, scaled.
std::vector<Nanos> scaled_arrivals(const Workload& w, const LoadLevel& level);

// What a run measured per completed request, before it is summarised.
struct RunSamples {
  std::vector<double> ttft;
  std::vector<double> itl;
  std::vector<double> e2e;
  uint64_t good = 0;  // within both SLOs
  uint64_t output_tokens = 0;
  Nanos last_done = 0;
};

// Fills res's latency percentiles (sorting the samples), goodput, output rate, hit rate (from
// res.prompt_tokens / res.cached_tokens) and busy statistics (mean, max, imbalance, utilisation).
void summarise_run(RunSamples& s, const std::vector<Nanos>& busy, PolicyResult& res);

}  // namespace cgn::bench
