#include "agent/kv_event_subscriber.h"

#include <zmq.h>

#include <vector>

namespace cgn::agent {

KvEventSubscriber::KvEventSubscriber(KvSubscriberOptions options, KvWithdrawalSink sink)
    : options_(std::move(options)),
      sink_(std::move(sink)),
      log_(log::get("agent.kv_events")),
      changes_(log_) {}

KvEventSubscriber::~KvEventSubscriber() {
  stop();
}

Result<Ok, std::string> KvEventSubscriber::start() {
  if (thread_.joinable()) {
    return Ok{};
  }
  ctx_ = zmq_ctx_new();
  if (ctx_ == nullptr) {
    return make_error(std::string("kv events"), std::string("zmq_ctx_new failed"));
  }
  sub_ = zmq_socket(ctx_, ZMQ_SUB);
  const int linger = 0;
  zmq_setsockopt(sub_, ZMQ_LINGER, &linger, sizeof(linger));
  zmq_setsockopt(sub_, ZMQ_SUBSCRIBE, options_.topic.data(), options_.topic.size());
  const int rc = options_.bind ? zmq_bind(sub_, options_.endpoint.c_str())
                               : zmq_connect(sub_, options_.endpoint.c_str());
  if (rc != 0) {
    const std::string why = zmq_strerror(zmq_errno());
    zmq_close(sub_);
    sub_ = nullptr;
    zmq_ctx_term(ctx_);
    ctx_ = nullptr;
    return make_error(std::string("kv events"),
                      (options_.bind ? "listen on " : "connect ") + options_.endpoint + ": " + why);
  }
  CGN_LOG_INFO(log_, "subscribed to the engine's KV events", log::kv("endpoint", options_.endpoint),
               log::kv("mode", options_.bind ? "listen" : "dial"), log::kv("topic", options_.topic));
  thread_ = std::thread([this] { run(); });
  return Ok{};
}

void KvEventSubscriber::stop() {
  if (ctx_ == nullptr) {
    return;
  }
  zmq_ctx_shutdown(ctx_);  // the blocked receive returns ETERM
  if (thread_.joinable()) {
    thread_.join();
  }
  zmq_ctx_term(ctx_);
  ctx_ = nullptr;
}

KvSubscriberStats KvEventSubscriber::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void KvEventSubscriber::run() {
  constexpr size_t kMaxFrames = 8;
  std::vector<std::string> frames;
  while (true) {
    frames.clear();
    int more = 1;
    bool too_many = false;
    while (more != 0) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      if (zmq_msg_recv(&m, sub_, 0) < 0) {
        const int err = zmq_errno();
        zmq_msg_close(&m);
        if (err == EINTR) {
          continue;
        }
        zmq_close(sub_);  // ETERM: stop() shut the context down
        sub_ = nullptr;
        return;
      }
      if (frames.size() < kMaxFrames && zmq_msg_size(&m) <= kMaxKvEventBatchBytes) {
        frames.emplace_back(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
      } else {
        too_many = true;
      }
      more = zmq_msg_more(&m);
      zmq_msg_close(&m);
    }
    if (too_many) {
      decode_error("a message with too many or too large frames");
      continue;
    }
    handle(frames);
  }
}

void KvEventSubscriber::decode_error(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    ++stats_.decode_errors;
  }
  changes_.update("decode", "error", spdlog::level::warn, "KV event message rejected", log::kv("error", why));
}

void KvEventSubscriber::handle(std::span<const std::string> frames) {
  if (frames.size() != 3) {
    decode_error("expected 3 frames [topic, seq, payload], got " + std::to_string(frames.size()));
    return;
  }
  const auto seq = decode_kv_event_seq(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(frames[1].data()), frames[1].size()));
  if (!seq) {
    decode_error("the sequence frame is not 8 bytes");
    return;
  }
  auto batch = decode_kv_event_batch(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(frames[2].data()), frames[2].size()));
  cluster::KvWithdrawal w;
  bool gap = false;
  {
    std::lock_guard lock(mu_);
    if (stats_.last_seq.has_value() && *seq != *stats_.last_seq + 1) {
      gap = true;
      ++stats_.seq_gaps;
      if (*seq > *stats_.last_seq) {
        stats_.lost_batches += static_cast<uint64_t>(*seq - *stats_.last_seq - 1);
      }
    }
    stats_.last_seq = *seq;
    if (batch) {
      ++stats_.batches;
      stats_.unknown_events += batch->unknown_events;
      for (const KvEvent& e : batch->events) {
        switch (e.kind) {
          case KvEvent::Kind::kStored:
            ++stats_.stored_events;
            break;
          case KvEvent::Kind::kRemoved:
            ++stats_.removed_events;
            stats_.removed_blocks += e.block_hashes.size();
            break;
          case KvEvent::Kind::kAllCleared:
            ++stats_.cleared_events;
            break;
        }
      }
    }
  }
  if (gap) {
    CGN_LOG_WARN(log_, "KV event sequence gap; withdrawing every published prefix", log::kv("seq", *seq));
  }
  if (!batch) {
    decode_error(batch.error().message);
    // The batch counts as lost: what it said is unknown.
    w.all = true;
  } else {
    changes_.update("decode", "ok", spdlog::level::info, "KV events decoding");
    w = plan_withdrawal(*batch);
  }
  if (gap) {
    w.all = true;
  }
  if (!w.empty() && sink_) {
    sink_(w);
  }
}

Result<std::optional<KvSubscriberOptions>, DriverError> kv_events_subscription(const EngineDriver& driver,
                                                                               const LaunchOptions& options) {
  if (!options.kv_events) {
    return std::optional<KvSubscriberOptions>();
  }
  if (!driver.publishes_kv_events()) {
    return make_error(
        DriverError::kUnsupported,
        std::string(driver.name()) +
            ": kv_events (this engine publishes no vLLM-format KV events; set kv_events = false)");
  }
  KvSubscriberOptions o;
  // A spawned engine dials the agent on loopback (detail::kv_events_config_json); an external one
  // publishes where it was configured to.
  o.bind = driver.spawns();
  const std::string host =
      o.bind || options.engine_host.empty() ? std::string("127.0.0.1") : options.engine_host;
  o.endpoint = "tcp://" + host + ":" + std::to_string(options.kv_events_port);
  o.topic = options.kv_events_topic;
  return std::optional<KvSubscriberOptions>(std::move(o));
}

void add_kv_event_metrics(metrics::Registry& reg, const KvEventSubscriber& sub,
                          const cluster::NodePublisher* pub) {
  auto& events = reg.counter(
      "cgn_agent_kv_events_received_total",
      "KV events received from the engine, by type (stored, removed, cleared, unknown).", {"type"});
  auto stored = events.with({"stored"});
  auto removed = events.with({"removed"});
  auto cleared = events.with({"cleared"});
  auto unknown = events.with({"unknown"});
  auto batches = reg.counter("cgn_agent_kv_event_batches_total", "KV event batches decoded.").with({});
  auto errors = reg.counter("cgn_agent_kv_event_decode_errors_total",
                            "KV event messages rejected (bad frames or msgpack).")
                    .with({});
  auto gaps = reg.counter("cgn_agent_kv_event_seq_gaps_total",
                          "KV event sequence gaps or resets (each withdraws every published prefix).")
                  .with({});
  auto& withdrawals = reg.counter("cgn_agent_kv_event_withdrawals_total",
                                  "Withdrawals of published prefixes caused by KV events, by kind (all: "
                                  "AllBlocksCleared or a sequence gap; oldest: BlockRemoved).",
                                  {"kind"});
  auto w_all = withdrawals.with({"all"});
  auto w_oldest = withdrawals.with({"oldest"});
  auto withdrawn = reg.counter("cgn_agent_kv_event_withdrawn_prefixes_total",
                               "Published prefixes withdrawn oldest-first for BlockRemoved events.")
                       .with({});
  auto last = std::make_shared<KvSubscriberStats>();
  auto last_pub = std::make_shared<cluster::WithdrawalStats>();
  (void)reg.add_collect_callback([=, &sub] {
    if (pub != nullptr) {
      const auto p = pub->withdrawal_stats();
      w_all.inc(p.clears - last_pub->clears);
      w_oldest.inc(p.withdrawals - last_pub->withdrawals);
      withdrawn.inc(p.withdrawn - last_pub->withdrawn);
      *last_pub = p;
    }
    const auto s = sub.stats();
    stored.inc(s.stored_events - last->stored_events);
    removed.inc(s.removed_events - last->removed_events);
    cleared.inc(s.cleared_events - last->cleared_events);
    unknown.inc(s.unknown_events - last->unknown_events);
    batches.inc(s.batches - last->batches);
    errors.inc(s.decode_errors - last->decode_errors);
    gaps.inc(s.seq_gaps - last->seq_gaps);
    *last = s;
  });
}

}  // namespace cgn::agent
