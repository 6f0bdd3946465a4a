// The simulator's KV events into the agent's subscriber over real ZMQ on loopback: a
// cgn-engine-sim process publishing with --kv-events-config (array and map encodings), requests
// and admin evictions over HTTP, and the replay ROUTER answered to a DEALER.
#include <gtest/gtest.h>
#include <zmq.h>

#include <atomic>
#include <mutex>

#include "agent/kv_event_subscriber.h"
#include "router/etcd_testing.h"
#include "testing/engine_sim.h"
#include "testing/process.h"

namespace cgn::agent {
namespace {

using namespace std::chrono_literals;
using cgn::router::etcdtest::chat_body;
using cgn::router::etcdtest::http_call;
using cgn::router::etcdtest::long_prompt;
using cgn::testing::Process;
using cgn::testing::TempDir;
using cgn::testing::wait_until;

struct SimWithEvents {
  int pub_port = cgn::testing::free_port();
  int replay_port = cgn::testing::free_port();
  cgn::testing::EngineSim sim;
  uint16_t port = sim.port();

  explicit SimWithEvents(const std::string& encoding) : sim(options(encoding)) {}
  cgn::testing::EngineSimOptions options(const std::string& encoding) const {
    const std::string cfg = R"({"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:)" +
                            std::to_string(pub_port) +
                            R"(","topic":"kv-events","replay_endpoint":"tcp://*:)" +
                            std::to_string(replay_port) + R"("})";
    cgn::testing::EngineSimOptions o;
    o.admin = true;
    // 48 blocks of 16 tokens: a few long prompts overflow it (LRU evictions).
    o.args = {"--time-scale",       "0.01", "--num-gpu-blocks",     "48",    "--block-size", "16",
              "--kv-events-config", cfg,    "--kv-events-encoding", encoding};
    return o;
  }
};

class KvEventsOverZmq : public ::testing::TestWithParam<std::string> {};

TEST_P(KvEventsOverZmq, StoresEvictionsAndClearsReachTheSubscriberInOrder) {
  SimWithEvents sim(GetParam());
  ASSERT_GT(sim.port, 0) << sim.sim.process().log();
  std::mutex mu;
  std::vector<cluster::KvWithdrawal> got;
  KvEventSubscriber sub({"tcp://127.0.0.1:" + std::to_string(sim.pub_port), "kv-events"},
                        [&](const cluster::KvWithdrawal& w) {
                          std::lock_guard lock(mu);
                          got.push_back(w);
                        });
  ASSERT_TRUE(sub.start().ok());
  // A SUB joins asynchronously: send requests until one batch arrives.
  int warm = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        if (sub.stats().batches > 0) {
          return true;
        }
        EXPECT_EQ(http_call(sim.port, "POST", "/v1/chat/completions",
                            chat_body("m", long_prompt("warm" + std::to_string(warm++), 1)))
                      .status,
                  200u);
        return sub.stats().batches > 0;
      },
      15s))
      << sim.sim.process().log();

  // A stored prefix, then its eviction by prompt: BlockRemoved of its blocks.
  const std::string body = chat_body("m", long_prompt("evict-me", 2));
  const auto stored_before = sub.stats().stored_events;
  ASSERT_EQ(http_call(sim.port, "POST", "/v1/chat/completions", body).status, 200u);
  ASSERT_TRUE(wait_until([&] { return sub.stats().stored_events > stored_before; }, 5s));
  const auto removed_before = sub.stats().removed_blocks;
  auto ev = http_call(sim.port, "POST", "/admin/evict", body);
  ASSERT_EQ(ev.status, 200u) << ev.body;
  ASSERT_TRUE(wait_until([&] { return sub.stats().removed_blocks > removed_before; }, 5s));
  const uint64_t evicted = std::stoull(ev.body.substr(ev.body.find(':') + 1));
  EXPECT_GT(evicted, 0u);
  EXPECT_EQ(sub.stats().removed_blocks - removed_before, evicted);
  {
    std::lock_guard lock(mu);
    ASSERT_FALSE(got.empty());
    EXPECT_FALSE(got.back().all);
    EXPECT_EQ(got.back().removed_blocks, evicted);
  }

  // LRU pressure: distinct long prompts overflow the 48-block pool.
  const auto lru_before = sub.stats().removed_events;
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(http_call(sim.port, "POST", "/v1/chat/completions",
                        chat_body("m", long_prompt("pressure" + std::to_string(i), 3)))
                  .status,
              200u);
  }
  ASSERT_TRUE(wait_until([&] { return sub.stats().removed_events > lru_before; }, 5s))
      << sim.sim.process().log();

  // Evict all: one AllBlocksCleared, a withdrawal of everything.
  ASSERT_EQ(http_call(sim.port, "POST", "/admin/evict", R"({"all":true})").status, 200u);
  ASSERT_TRUE(wait_until([&] { return sub.stats().cleared_events == 1; }, 5s));
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(got.back().all);
  }
  // vLLM's /reset_prefix_cache on an empty cache clears again.
  ASSERT_EQ(http_call(sim.port, "POST", "/reset_prefix_cache", "").status, 200u);
  ASSERT_TRUE(wait_until([&] { return sub.stats().cleared_events == 2; }, 5s));
  const auto s = sub.stats();
  EXPECT_EQ(s.decode_errors, 0u);
  EXPECT_EQ(s.seq_gaps, 0u);
  EXPECT_EQ(s.unknown_events, 0u);

  // Replay: a DEALER asks for everything from seq 0 and gets each buffered batch, then END_SEQ.
  void* ctx = zmq_ctx_new();
  void* dealer = zmq_socket(ctx, ZMQ_DEALER);
  const int linger = 0;
  const int timeout_ms = 5000;
  zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof(linger));
  zmq_setsockopt(dealer, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
  ASSERT_EQ(zmq_connect(dealer, ("tcp://127.0.0.1:" + std::to_string(sim.replay_port)).c_str()), 0);
  const std::string zero(8, '\0');
  ASSERT_GE(zmq_send(dealer, "", 0, ZMQ_SNDMORE), 0);
  ASSERT_GE(zmq_send(dealer, zero.data(), zero.size(), 0), 0);
  int64_t replayed = 0;
  int64_t last_seq = -2;
  while (true) {
    std::vector<std::string> frames;
    int more = 1;
    while (more != 0) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      ASSERT_GE(zmq_msg_recv(&m, dealer, 0), 0) << "replay timed out";
      frames.emplace_back(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
      more = zmq_msg_more(&m);
      zmq_msg_close(&m);
    }
    ASSERT_EQ(frames.size(), 3u);
    const auto seq = decode_kv_event_seq(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(frames[1].data()), frames[1].size()));
    ASSERT_TRUE(seq.has_value());
    if (*seq == -1) {
      EXPECT_TRUE(frames[2].empty());
      break;
    }
    EXPECT_EQ(*seq, last_seq == -2 ? 0 : last_seq + 1);
    last_seq = *seq;
    EXPECT_TRUE(
        decode_kv_event_batch(
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(frames[2].data()), frames[2].size()))
            .ok());
    ++replayed;
  }
  EXPECT_EQ(last_seq, *s.last_seq);  // everything published so far is buffered
  EXPECT_GT(replayed, 0);
  zmq_close(dealer);
  zmq_ctx_term(ctx);
  sub.stop();
  EXPECT_EQ(sim.sim.process().stop(), 0) << sim.sim.process().log();
  EXPECT_NE(sim.sim.process().log().find("encoding=" + GetParam()), std::string::npos)
      << sim.sim.process().log();
}

INSTANTIATE_TEST_SUITE_P(Encodings, KvEventsOverZmq, ::testing::Values("array", "map"));

// What the agent does with an engine it spawns: the driver's --kv-events-config makes the engine
// dial the agent's SUB on loopback, so the engine itself opens no KV-event port.
TEST(KvEventsOverZmqLoopback, TheSpawnedEngineDialsTheAgentsListeningSubscriber) {
  TempDir dir;
  LaunchOptions lo;
  lo.kv_events = true;
  lo.kv_events_port = static_cast<uint16_t>(cgn::testing::free_port());
  auto opts = kv_events_subscription(**builtin_drivers().find("sim"), lo);
  ASSERT_TRUE(opts.ok() && opts->has_value());
  ASSERT_TRUE((*opts)->bind);
  std::atomic<int> withdrawals{0};
  KvEventSubscriber sub(**opts, [&](const cluster::KvWithdrawal&) { ++withdrawals; });
  ASSERT_TRUE(sub.start().ok());
  cgn::testing::EngineSimOptions so;
  so.args = {"--time-scale", "0.01", "--kv-events-config",
             detail::kv_events_config_json(lo, /*with_enable_key=*/true)};
  cgn::testing::EngineSim sim(so);
  const uint16_t port = sim.port();
  ASSERT_GT(port, 0) << sim.log();
  int n = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        EXPECT_EQ(http_call(port, "POST", "/v1/chat/completions",
                            chat_body("m", long_prompt("dial" + std::to_string(n++), 1)))
                      .status,
                  200u);
        return sub.stats().batches > 0;
      },
      15s))
      << sim.log();
  EXPECT_NE(sim.log().find("mode=connect"), std::string::npos) << sim.log();
  // A second listener on the same port is refused with an error naming it.
  KvEventSubscriber second(**opts, [](const cluster::KvWithdrawal&) {});
  auto st = second.start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("listen on tcp://127.0.0.1:"), std::string::npos) << st.error().message;
  sub.stop();
  EXPECT_EQ(sim.process().stop(), 0) << sim.log();
}

TEST(KvEventsSimConfig, ABadConfigStopsTheSimulatorWithAClearError) {
  TempDir dir;
  Process p({cgn::testing::bin_path("cgn-engine-sim"), "--flavor", "vllm", "--model", "m", "--port", "0",
             "--kv-events-config", R"({"enable_kv_cache_events":true,"publisher":"kafka"})"});
  EXPECT_EQ(p.wait(10s), 2);
  EXPECT_NE(p.log().find("publisher"), std::string::npos) << p.log();
}

}  // namespace
}  // namespace cgn::agent
