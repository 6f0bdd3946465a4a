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
#include "bench_harness/cluster_sim_tiers.h"
#include "core/clock.h"
#include "routing/engine_metrics.h"
#include "routing/router_core.h"
#include "sim/engine.h"
#include "sim/metrics_render.h"

namespace cgn::bench {

class SimFleet {
 public:
  // c.nodes engines with c.node_model, registered with `core` as node-<i> (engine id
  // sim-node-<i>) in the role role_of(i). With c.tiers, each engine offloads to its own
  // StoreTier on `clock` (the run's virtual time); a tier that will not open aborts the run
  // (std::runtime_error with the store's message).
  SimFleet(const ClusterConfig& c, routing::RoutingCore& core,
           const std::function<routing::NodeRole(uint32_t)>& role_of, const Clock& clock);

  uint32_t size() const { return static_cast<uint32_t>(engines_.size()); }
  sim::Engine& engine(uint32_t i) { return *engines_[i]; }
  // Engine i's offload tier; nullptr without tiers.
  StoreTier* tier(uint32_t i) { return tiers_.empty() ? nullptr : tiers_[i].get(); }
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

  // The virtual-time loop both runs share. Until done(), takes the earliest of the next engine
  // event, the next scrape and the next arrival (arrivals[cursor], while cursor < arrivals.size()),
  // sets `clock` to it and handles it: an engine event advances that engine, then on_engine(i); a
  // scrape scrapes; an arrival calls on_arrival(cursor, at), then moves the cursor on. Also ends
  // when neither an engine event nor an arrival is left: nothing could make progress (the caller
  // counts what is still in flight as lost).
  template <class Done, class OnEngine, class OnArrival>
  void run_event_loop(ManualClock& clock, const std::vector<Nanos>& arrivals, size_t& cursor, Done done,
                      OnEngine on_engine, OnArrival on_arrival) {
    while (!done()) {
      uint32_t ei = 0;
      uint32_t si = 0;
      const Nanos te = next_engine_event(ei);
      const Nanos ts = next_scrape(si);
      const Nanos ta = cursor < arrivals.size() ? arrivals[cursor] : sim::kNever;
      if (te == sim::kNever && ta == sim::kNever) {
        return;
      }
      if (te <= ts && te <= ta) {
        clock.set(te);
        engine(ei).advance_to(te);
        on_engine(ei);
      } else if (ts <= ta) {
        clock.set(ts);
        scrape(si, ts);
      } else {
        clock.set(ta);
        on_arrival(cursor, ta);
        ++cursor;
      }
    }
  }

 private:
  routing::RoutingCore& core_;
  Nanos scrape_interval_;
  std::vector<std::unique_ptr<StoreTier>> tiers_;  // before engines_: outlives them
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

  // One completed request: TTFT, end-to-end latency and time per output token (seconds), whether
  // both are within c's SLOs, and its output tokens.
  void add_completion(Nanos arrival, Nanos first_token, Nanos done, uint32_t tokens, const ClusterConfig& c);
};

// Fills res's latency percentiles (sorting the samples), goodput, output rate, hit rate (from
// res.prompt_tokens / res.cached_tokens) and busy statistics (mean, max, imbalance, utilisation).
void summarise_run(RunSamples& s, const std::vector<Nanos>& busy, PolicyResult& res);

// Fills res's modelled energy: every engine's NodeModel::energy_joules over the makespan with its
// prefill / decode step time (docs/sim.md "Power model"), and per output token and per request.
void summarise_energy(SimFleet& fleet, const sim::NodeModel& m, const RunSamples& s, PolicyResult& res);

}  // namespace cgn::bench
