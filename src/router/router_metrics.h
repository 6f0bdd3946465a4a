// RouterMetrics: the router's Prometheus families (docs/design/principles.md, dashboard/metric_names.txt),
// kept apart from the request logic (a "probe"). Label values come only from configuration and
// live nodes: the gateway maps a model that no node serves to "_unknown" before it gets here.
//
// cgn_cluster_power_watts_total is exposed as `untyped`: the design principles fix the name, but it is a
// gauge, and promtool's lint rejects a gauge whose name ends in _total. Prometheus stores an
// untyped sample exactly like a gauge. core/metrics has no untyped family, so render() appends
// that one family itself.
//
// Power is never invented: a node that reports none has no cgn_cluster_node_power_watts series,
// and while no node reports any, cgn_cluster_power_watts_total and cgn_cluster_tokens_per_watt
// have no sample (their families stay listed), so a dashboard shows "no data", not 0 W. A
// label-less registry family always exports a sample, so render() appends these two itself.
//
// Energy: cgn_cluster_node_energy_joules_total is each node's cumulative energy as its record
// reports it (a counter; absent while unknown). cgn_cluster_node_joules_per_token and the fleet's
// cgn_cluster_joules_per_token are energy deltas over generated-token deltas between two mirror
// refreshes (the tokens the router relayed from that node); no sample when a node's energy is
// unknown in either refresh, went backwards (agent restart) or no token was generated meanwhile.
// The fleet figure sums only the nodes that have a node figure's inputs.
//
// Thread-safety: every method is safe from any thread.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/metrics.h"

namespace cgn::router {

// One node of the cluster mirror (cgn_cluster_node_*).
struct NodeSnapshot {
  std::string name;
  std::vector<std::string> models;
  std::string engine;
  std::string role;
  std::string gpu_name;
  bool up = false;     // routable as far as health goes: healthy and not stale
  bool stale = false;  // polled, and no update for max_staleness
  double queue_depth = 0;
  double running = 0;
  double kv_used_ratio = 0;
  std::optional<double> power_watts;    // nullopt: the node reports none
  std::optional<double> energy_joules;  // cumulative; nullopt: the node reports none
  double watt_limit = 0;                // 0: none
  bool cordoned = false;
};

class RouterMetrics {
 public:
  RouterMetrics();

  metrics::Registry& registry() { return registry_; }

  void request_done(std::string_view model, std::string_view endpoint, unsigned code, double seconds);
  void ttft(double seconds) { ttft_.with({}).observe(seconds); }
  // `node`: the node that generated them ("" for none known, e.g. a federation peer).
  void tokens(std::string_view model, double prompt, double generation, std::string_view node = {});
  void decision(double seconds, double overlap_ratio);
  void admission_rejected(std::string_view model, std::string_view reason);
  // Intake refused a connection or request (router/intake.h reject_reason).
  void rejected(std::string_view reason);
  void retry(std::string_view model, std::string_view reason);
  void index_entries(double n) { index_entries_.with({}).set(n); }
  // Disaggregated serving (disagg.h): one leg ended (leg prefill|decode, outcome below), and the
  // handoff time from the prefill node's answer to the decode node's first byte.
  //   prefill: handoff (params returned), no_params (stop token first), failed (every attempt)
  //   decode:  pull (sent with params), recompute (no params), fallback (no prefill node)
  void pd_leg(std::string_view model, std::string_view leg, std::string_view outcome);
  void pd_handoff(double seconds) { pd_handoff_.with({}).observe(seconds); }
  // A cascade ([router.cascade], cascade_plan.h): one step of `alias` (its 1-based index) ended
  // accepted, escalated, failed or skipped; and the time a gated step added before the answer.
  void cascade_step(std::string_view alias, size_t step, std::string_view outcome) {
    cascade_steps_.with({std::string(alias), std::to_string(step), std::string(outcome)}).inc();
  }
  void cascade_gate(std::string_view alias, double seconds) {
    cascade_gate_.with({std::string(alias)}).observe(seconds);
  }
  // The gRPC API (grpc_api/): calls by method and status code. Declared whether or not gRPC is
  // on (the dashboard's metric contract lists it); the gRPC server counts into it.
  metrics::CounterFamily& grpc_requests() { return grpc_requests_; }

  // Carbon-aware admission ([router.carbon], router/carbon/): the latest reading and its age
  // (nullopt before the first: no sample), the gate's state (one series per state, the current one
  // 1), and a failed poll by reason. Rejections go through admission_rejected(model, "carbon").
  void carbon_state(std::string_view provider, std::string_view zone, std::optional<double> gco2_per_kwh,
                    std::optional<double> age_s, std::string_view state,
                    std::span<const std::string_view> states);
  void carbon_poll_failed(std::string_view reason) { carbon_failures_.with({std::string(reason)}).inc(); }

  // Replaces the cluster mirror with `nodes`; tokens_per_watt is computed by the caller (nullopt:
  // unknown, no sample).
  void refresh_cluster(const std::vector<NodeSnapshot>& nodes, std::optional<double> tokens_per_watt);
  // Cumulative generation tokens over every model (for tokens_per_watt).
  double generation_tokens_total() const;

  // The whole exposition (text format 0.0.4).
  std::string render();

  static constexpr std::string_view kContentType = metrics::Registry::kContentType;

 private:
  metrics::Registry registry_;
  metrics::CounterFamily& requests_;
  metrics::HistogramFamily& ttft_;
  metrics::HistogramFamily& duration_;
  metrics::CounterFamily& generation_tokens_;
  metrics::CounterFamily& prompt_tokens_;
  metrics::HistogramFamily& decision_;
  metrics::HistogramFamily& overlap_;
  metrics::GaugeFamily& index_entries_;
  metrics::CounterFamily& rejections_;
  metrics::CounterFamily& intake_rejections_;
  metrics::CounterFamily& retries_;
  metrics::CounterFamily& federation_;
  metrics::CounterFamily& pd_legs_;
  metrics::HistogramFamily& pd_handoff_;
  metrics::CounterFamily& cascade_steps_;
  metrics::HistogramFamily& cascade_gate_;
  metrics::CounterFamily& grpc_requests_;
  metrics::GaugeFamily& node_info_;
  metrics::GaugeFamily& node_up_;
  metrics::GaugeFamily& node_queue_;
  metrics::GaugeFamily& node_running_;
  metrics::GaugeFamily& node_kv_;
  metrics::GaugeFamily& node_power_;
  metrics::GaugeFamily& node_limit_;
  metrics::GaugeFamily& node_cordoned_;
  metrics::GaugeFamily& carbon_intensity_;
  metrics::GaugeFamily& carbon_age_;
  metrics::GaugeFamily& carbon_gate_;
  metrics::CounterFamily& carbon_failures_;

  mutable std::mutex mirror_mu_;           // refresh_cluster vs render: a scrape never sees half a mirror
  std::optional<double> power_total_;      // nullopt: no node reports power
  std::optional<double> tokens_per_watt_;  // nullopt: unknown
  std::atomic<double> generation_sum_{0};

  struct EnergyMark {
    double joules = 0;
    double tokens = 0;
  };
  void refresh_energy(const std::vector<NodeSnapshot>& nodes);  // under mirror_mu_
  std::string render_energy() const;                            // under mirror_mu_
  mutable std::mutex node_tokens_mu_;
  std::map<std::string, double, std::less<>> node_tokens_;  // guarded by node_tokens_mu_
  std::map<std::string, EnergyMark> energy_marks_;          // guarded by mirror_mu_: the last refresh
  std::map<std::string, double> node_energy_;               // guarded by mirror_mu_
  std::map<std::string, double> node_joules_per_token_;     // guarded by mirror_mu_
  std::optional<double> joules_per_token_;                  // guarded by mirror_mu_
};

}  // namespace cgn::router
