// The agent's node: runs the engine under a Supervisor, scrapes its metrics through the routing
// core's scraper (routing/engine_metrics.h) while it is ready, and keeps the node record
// (node_record.h) current, kv_epoch included. Publishing the record (etcd, gossip) is a later
// slice; record() is what it will publish.
//
// Threads: the supervisor's threads and one scrape thread. The record is guarded by a mutex;
// record() is safe from any thread. start()/stop() belong to the owning thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/driver.h"
#include "agent/supervisor.h"
#include "cluster/node_record.h"
#include "routing/engine_metrics.h"

namespace cgn::agent {

// What the node's power reader says (agent/agent_app.cpp fills it from a power::Reader); every
// figure absent while unknown.
struct PowerFigures {
  std::optional<double> watts;          // the node's draw over its configured sources
  std::optional<double> energy_joules;  // cumulative, from counter deltas
  std::optional<double> enforced_limit_watts;
};
using PowerProbe = std::function<PowerFigures()>;

// The watt_limit the record carries: the configured one ([agent] watt_limit, 0 = none) or the
// enforced one the hardware reports, whichever is lower; 0 when neither is known.
double effective_watt_limit(double configured, std::optional<double> enforced);

// Power figures applied to a record (watts, energy and the effective watt_limit).
void apply_power(cluster::NodeRecord& record, double configured_limit, const PowerFigures& p);

struct NodeAgentOptions {
  cluster::NodeRecord
      base;  // identity fields: node_id, address, models, engine, role, gpu, watt_limit, version
  config::EngineConfig engine;
  LaunchOptions launch;
  SupervisorOptions supervisor;  // host/port are filled from [engine] when port is 0
  std::chrono::milliseconds scrape_interval{2000};
  std::chrono::milliseconds scrape_timeout{2000};
  routing::MapperOptions mapper;  // model defaults to the served name
  PowerProbe power;               // read every scrape interval; unset: no power figures
};

// The routing metrics of one scrape applied to a record: load, pool size, free blocks and the
// kv_epoch (through the tracker). Pure apart from the tracker. Returns the bump, if any.
std::optional<cluster::EpochBump> apply_scrape(cluster::NodeRecord& record, cluster::KvEpochTracker& tracker,
                                               const routing::NodeMetrics& m, uint64_t engine_starts);

// SGLang's --page-size N (or --page-size=N) from extra args; 1 (SGLang's default) when absent or
// not a positive number.
uint32_t sglang_page_size(const std::vector<std::string>& extra_args);

// GET the engine's metrics page and map it. Errors as text (the caller logs them).
Result<routing::NodeMetrics, std::string> scrape_engine(const std::string& host, uint16_t port,
                                                        const std::string& path, routing::EngineKind kind,
                                                        const routing::MapperOptions& mapper,
                                                        std::chrono::milliseconds timeout);

class NodeAgent {
 public:
  static Result<std::unique_ptr<NodeAgent>, DriverError> create(const EngineDriver& driver,
                                                                NodeAgentOptions options);
  ~NodeAgent();
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  void start();
  void stop();
  cluster::NodeRecord record() const;
  // A new configured watt_limit ([agent] watt_limit on reload); the record reflects it at once.
  void set_watt_limit(double configured);
  const Supervisor& supervisor() const { return *supervisor_; }
  const LaunchCommand& command() const { return command_; }

 private:
  NodeAgent(const EngineDriver& driver, NodeAgentOptions options, LaunchCommand command);
  void on_state(const StateChange& change);
  void scrape_loop();

  NodeAgentOptions options_;
  LaunchCommand command_;
  std::optional<std::string> metrics_path_;
  std::optional<routing::EngineKind> metrics_kind_;
  std::unique_ptr<Supervisor> supervisor_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                 // guarded by mu_
  cluster::NodeRecord record_;            // guarded by mu_
  cluster::KvEpochTracker tracker_;       // guarded by mu_
  double configured_limit_ = 0;           // guarded by mu_
  std::optional<double> enforced_limit_;  // guarded by mu_
  std::thread scraper_;
};

}  // namespace cgn::agent
