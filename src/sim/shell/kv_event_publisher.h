// Publishes KV events over ZMQ as vLLM does (kv_events.h has the wire format): a PUB socket that
// binds or connects by vLLM's endpoint rule, sequence numbers from 0, a replay buffer of the last
// buffer_steps batches and, when replay_endpoint is set, a ROUTER that answers
// [id, "", start_seq(8B)] with [id, "", seq, payload] for each buffered seq >= start, then
// [id, "", END_SEQ (-1), ""].
//
// Threads: one ZMQ thread owns both sockets (ZMQ sockets are not thread-safe). publish() is safe
// from any thread and never blocks on the network: it assigns the sequence number, queues the
// events under a mutex and wakes the thread through an eventfd, which encodes and sends. The
// queue is bounded; a batch dropped on overflow keeps its sequence number, so subscribers see
// the gap.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/result.h"
#include "sim/kv_events.h"

namespace cgn::sim {

struct KvPublisherStats {
  uint64_t batches_sent = 0;
  uint64_t events_sent = 0;
  uint64_t batches_dropped = 0;  // queue overflow
  uint64_t replays = 0;          // replay requests answered
};

class KvEventPublisher {
 public:
  // Creates the sockets (bind errors surface here) and starts the thread.
  static Result<std::unique_ptr<KvEventPublisher>, std::string> start(KvEventsConfig config);
  ~KvEventPublisher();  // stop()
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Queues one EventBatch (ts: wall-clock seconds). Empty batches are not sent.
  void publish(std::vector<KvCacheEvent> events, double ts);
  void stop();

  // The PUB socket's endpoint after bind (a "*" port resolved), or the configured one.
  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }
  KvPublisherStats stats() const;

  static constexpr size_t kMaxQueuedBatches = 100'000;

 private:
  explicit KvEventPublisher(KvEventsConfig config);
  void run();
  void send_queued();
  void answer_replay();

  struct Pending {
    int64_t seq = 0;
    double ts = 0;
    std::vector<KvCacheEvent> events;
  };

  KvEventsConfig config_;
  log::Logger log_;
  void* ctx_ = nullptr;
  void* pub_ = nullptr;
  void* router_ = nullptr;
  int wake_fd_ = -1;
  std::string endpoint_;
  std::string replay_endpoint_;

  mutable std::mutex mu_;  // guards the fields below
  std::deque<Pending> queue_;
  int64_t next_seq_ = 0;
  bool stopping_ = false;
  KvPublisherStats stats_;

  // ZMQ thread only.
  std::deque<std::pair<int64_t, std::string>> replay_;  // (seq, payload), oldest first
  std::thread thread_;
};

}  // namespace cgn::sim
