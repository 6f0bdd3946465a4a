// Subscribes to the engine's KV events (ZMQ SUB: listens on loopback for an engine it spawned,
// dials an external one) and turns each batch into a withdrawal
// of published prefixes (kv_events.h: decode and plan; docs/agent.md "KV events" for the rule).
//
// Sequence numbers: a batch whose seq is not the previous one plus one means lost batches (a gap,
// e.g. the PUB socket's high-water mark) or a restarted engine (seq went back). Either way the
// agent cannot know what the engine dropped, so it withdraws every published prefix (the set
// refills from traffic). The first batch seen is taken as is (a SUB joins late by design). The
// engine's replay socket is not used (a documented gap: replaying would avoid the full withdraw).
//
// Threads: one thread owns the SUB socket and calls the sink; start()/stop() belong to the owner;
// stats() is safe from any thread. stop() shuts the ZMQ context down, which wakes the blocked
// receive at once.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agent/driver.h"
#include "agent/kv_events.h"
#include "cluster/backend_registry.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/result.h"

namespace cgn::agent {

struct KvSubscriberOptions {
  std::string endpoint;  // tcp://127.0.0.1:5557
  std::string topic;     // SUB prefix filter; "" = every topic
  // Listen on endpoint (the engine the agent spawned dials it, so the engine opens no port)
  // rather than dial it (an external engine that binds its own publisher).
  bool bind = false;
};

struct KvSubscriberStats {
  uint64_t batches = 0;
  uint64_t stored_events = 0;
  uint64_t removed_events = 0;
  uint64_t cleared_events = 0;
  uint64_t unknown_events = 0;
  uint64_t removed_blocks = 0;
  uint64_t decode_errors = 0;  // bad frames or msgpack (counted, logged once per state change)
  uint64_t seq_gaps = 0;       // lost batches or a sequence reset
  uint64_t lost_batches = 0;   // batches a forward gap skipped
  std::optional<int64_t> last_seq;
};

// What the subscriber asks of the published set; `lost` = a sequence gap (withdraw everything).
using KvWithdrawalSink = std::function<void(const cluster::KvWithdrawal&)>;

class KvEventSubscriber {
 public:
  KvEventSubscriber(KvSubscriberOptions options, KvWithdrawalSink sink);
  ~KvEventSubscriber();  // stop()
  KvEventSubscriber(const KvEventSubscriber&) = delete;
  KvEventSubscriber& operator=(const KvEventSubscriber&) = delete;

  // Creates the socket and binds or connects (ZMQ connects in the background: an engine not up
  // yet is fine). Errors: a malformed endpoint, or a bind that fails (port in use).
  Result<Ok, std::string> start();
  void stop();
  KvSubscriberStats stats() const;

  // One received message's frames, as the thread handles them (tests drive it directly).
  void handle(std::span<const std::string> frames);

 private:
  void run();
  void decode_error(const std::string& why);

  KvSubscriberOptions options_;
  KvWithdrawalSink sink_;
  log::Logger log_;
  log::StateChangeLogger changes_;
  void* ctx_ = nullptr;
  void* sub_ = nullptr;
  std::thread thread_;
  mutable std::mutex mu_;
  KvSubscriberStats stats_;
};

// The SUB endpoint for a driver and its launch options: tcp://<engine host>:<kv_events_port>.
// Errors: options.kv_events is set but the driver cannot publish KV events (llama.cpp, ...).
// nullopt: KV events are off.
Result<std::optional<KvSubscriberOptions>, DriverError> kv_events_subscription(const EngineDriver& driver,
                                                                               const LaunchOptions& options);

// cgn_agent_kv_event* counters on the agent's /metrics, refreshed at each scrape; with a
// publisher, also the withdrawals the events caused (cluster::NodePublisher::withdrawal_stats).
void add_kv_event_metrics(metrics::Registry& reg, const KvEventSubscriber& sub,
                          const cluster::NodePublisher* pub);

}  // namespace cgn::agent
