// cgn-kvcached end to end: real daemons (the built binary) on loopback, real gRPC, the real Unix
// socket fast path, real segment files in per-test temp dirs. Round trips at 64 KiB, 4 MiB and
// 16 MiB through both paths; bad input refused with clear errors while the daemon keeps serving;
// concurrent readers and writers; /metrics checked by promtool. Crash and disk behaviour is in
// kvcached_ssd_itest.cpp, TLS in kvcached_tls_itest.cpp.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <optional>
#include <span>
#include <thread>

#include "cognitora/v1/kvcached.grpc.pb.h"
#include "kvcached/fast_path.h"
#include "kvcached/kv_client.h"
#include "kvcached/kvcached_itest_util.h"
#include "kvcached/local_client.h"
#include "kvcached/wire.h"
#include "testing/capability.h"
#include "testing/metrics_page.h"

namespace cgn::kvcached {
namespace {

using namespace itest;
using testing::TempDir;
namespace pb = cognitora::v1;

class KvcachedDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<Daemon>(dir_, "kv", "ram_bytes = 67108864\nmax_block_bytes = 16777216\n");
    ASSERT_TRUE(daemon_->start());
    auto c = KvClient::connect(daemon_->target(), {});
    ASSERT_TRUE(c.ok()) << c.error().message;
    client_ = std::move(*c);
  }

  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<KvClient> client_;
};

TEST_F(KvcachedDaemon, GrpcRoundTripsBlocksOfEverySize) {
  const auto ns = test_ns();
  uint64_t i = 0;
  for (size_t size : {size_t{64} << 10, size_t{4} << 20, size_t{16} << 20}) {
    const Digest d = digest_of(1, ++i);
    const auto bytes = block_bytes(1, i, size);
    auto put = client_->put(ns, d, bytes);
    ASSERT_TRUE(put.ok()) << put.error().message;
    EXPECT_FALSE(*put);
    auto again = client_->put(ns, d, bytes);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_TRUE(*again) << "a second put of the same block is already resident";
    auto got = client_->get(ns, d);
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(*got, bytes) << size;
    std::vector<uint8_t> into(size + 10);
    auto n = client_->get(ns, d, into);
    ASSERT_TRUE(n.ok()) << n.error().message;
    EXPECT_EQ(*n, size);
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), into.begin()));
    std::vector<uint8_t> small(size - 1);
    auto too_small = client_->get(ns, d, small);
    ASSERT_FALSE(too_small.ok());
    EXPECT_EQ(too_small.error().code, ClientError::kTooLarge);
  }
  auto missing = client_->get(ns, digest_of(1, 99));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ClientError::kNotFound);

  auto runs = client_->batch_lookup(ns,
                                    {{digest_of(1, 1), digest_of(1, 2), digest_of(1, 99), digest_of(1, 3)},
                                     {digest_of(1, 99)},
                                     {digest_of(1, 3)}},
                                    2000);
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  ASSERT_EQ(runs->runs.size(), 3u);
  EXPECT_EQ(runs->runs[0], (std::vector<kvcache::Tier>{kvcache::Tier::kRam, kvcache::Tier::kRam}));
  EXPECT_TRUE(runs->runs[1].empty());
  EXPECT_EQ(runs->runs[2].size(), 1u);
  const auto now_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  EXPECT_GT(runs->lease_until_unix_ms, now_ms);
  EXPECT_LT(runs->lease_until_unix_ms, now_ms + 60'000);

  auto stats = client_->stats();
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->puts, 3u);
  EXPECT_EQ(stats->refreshes, 3u);
  EXPECT_EQ(stats->ram.blocks, 3u);
  EXPECT_EQ(stats->ram.capacity, 64ull << 20);
}

TEST_F(KvcachedDaemon, FastPathRoundTripsAndSharesKeysWithGrpc) {
  auto c = LocalClient::connect(daemon_->socket());
  ASSERT_TRUE(c.ok()) << c.error().message;
  LocalClient& lc = **c;
  EXPECT_EQ(lc.arena_bytes(), 64ull << 20);
  uint64_t i = 0;
  for (size_t size : {size_t{64} << 10, size_t{4} << 20, size_t{16} << 20}) {
    const Digest d = digest_of(2, ++i);
    const auto bytes = block_bytes(2, i, size);
    ASSERT_TRUE(lc.put(key_of(d), bytes).ok());
    ASSERT_TRUE(lc.put(key_of(d), bytes).ok()) << "already resident is fine";
    std::vector<uint8_t> out(size);
    auto n = lc.get(key_of(d), out);
    ASSERT_TRUE(n.ok()) << n.error().message;
    EXPECT_EQ(*n, size);
    EXPECT_EQ(out, bytes);
    {
      auto v = lc.view(key_of(d));
      ASSERT_TRUE(v.ok()) << v.error().message;
      EXPECT_EQ(v->tier(), kvcache::Tier::kRam);
      EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), v->data().begin(), v->data().end()));
    }
    // The key the client derived is the daemon's: the gRPC path finds the block by (ns, digest).
    auto via_grpc = client_->get(test_ns(), d);
    ASSERT_TRUE(via_grpc.ok()) << via_grpc.error().message;
    EXPECT_EQ(*via_grpc, bytes);
  }
  std::vector<kvcache::BlockKey> keys = {key_of(digest_of(2, 1)), key_of(digest_of(2, 2)),
                                         key_of(digest_of(2, 9)), key_of(digest_of(2, 3))};
  auto run = lc.lookup(keys, 1000);
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->tiers.size(), 2u);
  EXPECT_GT(run->lease_until_unix_ms, 0u);
  std::vector<uint8_t> out(16);
  auto missing = lc.get(key_of(digest_of(2, 9)), out);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ClientError::kNotFound);
  // A view's RELEASE has no answer to wait for: the daemon drops the pin when it reads the frame.
  EXPECT_TRUE(testing::wait_until(
      [&] {
        auto stats = client_->stats();
        return stats.ok() && stats->pins_active == 0;
      },
      10s))
      << "every view was released";
}

// A bare fast-path connection (no HELLO sent): its fd, or -1.
int raw_connect(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) {
      ::close(fd);
    }
    return -1;
  }
  return fd;
}

// Sends raw bytes as one packet on a fresh fast-path connection; the answer packet.
std::vector<uint8_t> raw_exchange(int fd, const std::vector<uint8_t>& bytes) {
  EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  std::vector<uint8_t> buf(kMaxFrameBytes);
  const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return buf;
}

uint64_t pins_active(KvClient& c) {
  auto stats = c.stats();
  EXPECT_TRUE(stats.ok()) << stats.error().message;
  return stats.ok() ? stats->pins_active : ~uint64_t{0};
}

TEST_F(KvcachedDaemon, FastPathBatchesReportEveryKeyAndReleaseTheirPins) {
  auto c = LocalClient::connect(daemon_->socket());
  ASSERT_TRUE(c.ok()) << c.error().message;
  LocalClient& lc = **c;
  // Mixed sizes, more keys than one frame carries, and three keys that must fail on their own:
  // an empty value, one over max_block_bytes, and a second put of a key within the same batch.
  std::vector<kvcache::BlockKey> keys;
  std::vector<std::vector<uint8_t>> values;
  const size_t sizes[] = {4096, 65536, 1 << 20, 300000, 17};
  for (uint64_t i = 0; i < kMaxBatchKeys + 40; ++i) {
    keys.push_back(key_of(digest_of(7, i)));
    values.push_back(block_bytes(7, i, sizes[i % 5]));
  }
  const size_t empty = 3, huge = kMaxBatchKeys + 5, dup = kMaxBatchKeys + 8;
  values[empty].clear();
  values[huge] = std::vector<uint8_t>((16u << 20) + 1, 1);
  keys[dup] = keys[dup - 1];
  std::vector<std::span<const uint8_t>> spans(values.begin(), values.end());
  auto put = lc.put_many(keys, spans);
  ASSERT_TRUE(put.ok()) << put.error().message;
  ASSERT_EQ(put->size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i == empty) {
      EXPECT_EQ((*put)[i].error, ClientError::kInvalid);
    } else if (i == huge) {
      EXPECT_EQ((*put)[i].error, ClientError::kTooLarge);
    } else if (i == dup) {
      EXPECT_EQ((*put)[i].error, ClientError::kBusy) << "the same key's put is open in this batch";
    } else {
      EXPECT_TRUE((*put)[i].ok()) << i << ": " << to_string(*(*put)[i].error);
    }
  }
  // Putting the run again: everything stored is already resident, still ok.
  auto again = lc.put_many(std::span(keys).first(10), std::span(spans).first(10));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(std::count_if(again->begin(), again->end(), [](const KeyResult& r) { return r.ok(); }), 9);

  // Read back with some keys missing and one buffer too small.
  const size_t missing = 20, small = 21;
  keys[missing] = key_of(digest_of(8, 1));
  std::vector<std::vector<uint8_t>> outs(keys.size(), std::vector<uint8_t>(1 << 20));
  outs[small].resize(values[small].size() - 1);
  std::vector<std::span<uint8_t>> out_spans(outs.begin(), outs.end());
  auto got = lc.get_many(keys, out_spans);
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const KeyResult& r = (*got)[i];
    if (i == empty || i == huge || i == missing) {
      EXPECT_EQ(r.error, ClientError::kNotFound) << i << " of " << keys.size();
    } else if (i == small) {
      EXPECT_EQ(r.error, ClientError::kTooLarge);
      EXPECT_EQ(r.length, values[i].size()) << "the block's length, to size the buffer";
    } else {
      ASSERT_TRUE(r.ok()) << i << ": " << to_string(*r.error);
      const auto& want = i == dup ? values[i - 1] : values[i];
      ASSERT_EQ(r.length, want.size()) << i;
      EXPECT_EQ(r.tier, kvcache::Tier::kRam);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), outs[i].begin())) << i;
    }
  }
  EXPECT_TRUE(testing::wait_until([&] { return pins_active(*client_) == 0; }, 10s))
      << "get_many's no-answer RELEASE_MANY dropped every pin";

  auto mismatched = lc.get_many(keys, std::span(out_spans).first(2));
  ASSERT_FALSE(mismatched.ok());
  EXPECT_EQ(mismatched.error().code, ClientError::kInvalid);
}

TEST_F(KvcachedDaemon, ANoReplyReleaseDropsThePinsAndUnknownHandlesAreCounted) {
  auto c = LocalClient::connect(daemon_->socket());
  ASSERT_TRUE(c.ok()) << c.error().message;
  std::vector<kvcache::BlockKey> keys;
  std::vector<std::vector<uint8_t>> values;
  for (uint64_t i = 0; i < 4; ++i) {
    keys.push_back(key_of(digest_of(9, i)));
    values.push_back(block_bytes(9, i, 8192));
  }
  std::vector<std::span<const uint8_t>> spans(values.begin(), values.end());
  ASSERT_TRUE((*c)->put_many(keys, spans).ok());

  const int fd = raw_connect(daemon_->socket());
  ASSERT_GE(fd, 0) << daemon_->socket();
  Request hello;
  hello.op = Op::kHello;
  hello.version = kFastPathVersion;
  ASSERT_TRUE(decode_response(raw_exchange(fd, encode(hello))).ok());
  Request get;
  get.op = Op::kGetMany;
  get.keys = keys;
  auto pinned = decode_response(raw_exchange(fd, encode(get)));
  ASSERT_TRUE(pinned.ok());
  ASSERT_EQ(pinned->entries.size(), 4u);
  EXPECT_EQ(pins_active(*client_), 4u);

  Request rel;
  rel.op = Op::kReleaseMany;
  rel.no_reply = true;
  for (const auto& e : pinned->entries) {
    rel.handles.push_back(e.handle);
  }
  rel.handles.push_back(999);  // never handed out
  const auto frame = encode(rel);
  ASSERT_EQ(::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL), static_cast<ssize_t>(frame.size()));
  EXPECT_TRUE(testing::wait_until([&] { return pins_active(*client_) == 0; }, 10s));
  // No answer came for it: the next request's answer is the next packet.
  Request lookup;
  lookup.op = Op::kLookup;
  lookup.keys = keys;
  auto looked = decode_response(raw_exchange(fd, encode(lookup)));
  ASSERT_TRUE(looked.ok());
  EXPECT_EQ(looked->op, Op::kLookup);
  EXPECT_EQ(looked->tiers.size(), 4u);
  // The same frame with an answer reports the unknown handles per key.
  rel.no_reply = false;
  rel.handles = {pinned->entries[0].handle, 999};
  auto answered = decode_response(raw_exchange(fd, encode(rel)));
  ASSERT_TRUE(answered.ok());
  ASSERT_EQ(answered->entries.size(), 2u);
  EXPECT_EQ(answered->entries[0].status, FrameStatus::kInvalid) << "already released";
  EXPECT_EQ(answered->entries[1].status, FrameStatus::kInvalid);
  ::close(fd);
  const std::string page = scrape(daemon_->metrics_port());
  EXPECT_EQ(
      testing::metric(page, R"(cgn_kvcached_fast_path_requests_total{op="RELEASE_MANY",status="INVALID"})"),
      2.0);
}

TEST(KvcachedBatchLimits, HandlesPerConnectionStayCappedInABatch) {
  TempDir dir;
  Daemon d(dir, "kv", "ram_bytes = 16777216\nmax_block_bytes = 1048576\nmax_handles_per_connection = 3\n");
  ASSERT_TRUE(d.start());
  auto c = LocalClient::connect(d.socket());
  ASSERT_TRUE(c.ok()) << c.error().message;
  std::vector<kvcache::BlockKey> keys;
  std::vector<std::vector<uint8_t>> values;
  for (uint64_t i = 0; i < 5; ++i) {
    keys.push_back(key_of(digest_of(10, i)));
    values.push_back(block_bytes(10, i, 4096));
  }
  std::vector<std::span<const uint8_t>> spans(values.begin(), values.end());
  auto put = (*c)->put_many(keys, spans);
  ASSERT_TRUE(put.ok()) << put.error().message;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ((*put)[i].error, i < 3 ? std::nullopt : std::optional(ClientError::kBusy)) << i;
  }
  // Three stored; a batched read of five pins at most three at once, the rest answered BUSY.
  std::vector<std::vector<uint8_t>> outs(5, std::vector<uint8_t>(4096));
  std::vector<std::span<uint8_t>> out_spans(outs.begin(), outs.end());
  auto first3 = std::span(keys).first(3);
  std::vector<kvcache::BlockKey> twice(first3.begin(), first3.end());
  twice.insert(twice.end(), first3.begin(), first3.begin() + 2);
  auto got = (*c)->get_many(twice, out_spans);
  ASSERT_TRUE(got.ok()) << got.error().message;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ((*got)[i].error, i < 3 ? std::nullopt : std::optional(ClientError::kBusy)) << i;
  }
  // Released without an answer, so the next batch has its handles back.
  auto next = (*c)->get_many(std::span(twice).first(3), std::span(out_spans).first(3));
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(std::all_of(next->begin(), next->end(), [](const KeyResult& r) { return r.ok(); }));
  EXPECT_EQ(outs[2], values[2]);
}

TEST_F(KvcachedDaemon, ConcurrentReadersAndWritersSeeWholeBlocks) {
  constexpr int kWriters = 3;
  constexpr int kReaders = 3;
  constexpr int kBlocks = 40;
  std::atomic<int> failures{0};
  std::atomic<int> reads_ok{0};
  std::vector<std::thread> threads;
  threads.reserve(kWriters + kReaders);
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      auto lc = LocalClient::connect(daemon_->socket());
      if (!lc) {
        ++failures;
        return;
      }
      for (int i = 0; i < kBlocks; ++i) {
        const Digest d = digest_of(10 + w, i);
        const auto bytes = block_bytes(10 + w, i, 256 << 10);
        // Writers alternate between the two paths.
        const bool ok =
            i % 2 == 0 ? (*lc)->put(key_of(d), bytes).ok() : client_->put(test_ns(), d, bytes).ok();
        if (!ok) {
          ++failures;
        }
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      auto lc = LocalClient::connect(daemon_->socket());
      if (!lc) {
        ++failures;
        return;
      }
      std::vector<uint8_t> out(256 << 10);
      for (int round = 0; round < 3; ++round) {
        for (int w = 0; w < kWriters; ++w) {
          for (int i = 0; i < kBlocks; ++i) {
            const Digest d = digest_of(10 + w, i);
            const bool via_grpc = (i + r) % 2 == 0;
            std::vector<uint8_t> got;
            if (via_grpc) {
              auto g = client_->get(test_ns(), d);
              if (!g) {
                continue;  // not written yet
              }
              got = std::move(*g);
            } else {
              auto n = (*lc)->get(key_of(d), out);
              if (!n) {
                continue;
              }
              got.assign(out.begin(), out.begin() + static_cast<ptrdiff_t>(*n));
            }
            if (got != block_bytes(10 + w, i, 256 << 10)) {
              ++failures;  // a torn or foreign block
            }
            ++reads_ok;
          }
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(reads_ok.load(), 0) << "the readers overlapped no write";
  // Everything written is there at the end.
  for (int w = 0; w < kWriters; ++w) {
    for (int i = 0; i < kBlocks; ++i) {
      auto g = client_->get(test_ns(), digest_of(10 + w, i));
      ASSERT_TRUE(g.ok()) << g.error().message;
      EXPECT_EQ(*g, block_bytes(10 + w, i, 256 << 10));
    }
  }
}

// A raw PutBlock stream of the given messages; the status.
grpc::Status raw_put(const std::string& target, const std::vector<pb::PutBlockRequest>& msgs) {
  auto stub = pb::KvCache::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  pb::PutBlockResponse resp;
  auto w = stub->PutBlock(&ctx, &resp);
  for (const auto& m : msgs) {
    if (!w->Write(m)) {
      break;
    }
  }
  w->WritesDone();
  return w->Finish();
}

pb::PutBlockRequest header(const Digest& d, uint64_t length, std::string data) {
  pb::PutBlockRequest m;
  set_namespace(test_ns(), *m.mutable_namespace_());
  m.set_digest(d.data(), d.size());
  m.set_length(length);
  m.set_data(std::move(data));
  return m;
}

TEST_F(KvcachedDaemon, MalformedGrpcRequestsGetClearErrorsAndNothingIsStored) {
  const Digest d = digest_of(3, 1);
  auto expect_invalid = [&](const std::vector<pb::PutBlockRequest>& msgs, const std::string& why) {
    const grpc::Status st = raw_put(daemon_->target(), msgs);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << why << ": " << st.error_message();
    EXPECT_NE(st.error_message().find(why), std::string::npos) << st.error_message();
  };
  pb::PutBlockRequest more;
  more.set_data(std::string(100, 'b'));
  expect_invalid({header(d, 150, std::string(100, 'a'))}, "carried 100 bytes for a block of length 150");
  expect_invalid({header(d, 150, std::string(100, 'a')), more}, "more than length (150)");
  expect_invalid({header(d, 32ull << 20, "")}, "above max_block_bytes");
  pb::PutBlockRequest bad_digest = header(d, 10, "0123456789");
  bad_digest.set_digest("short");
  expect_invalid({bad_digest}, "digest must be 32 bytes, got 5");
  pb::PutBlockRequest bad_ns = header(d, 10, "0123456789");
  bad_ns.mutable_namespace_()->set_tp_rank(3);
  expect_invalid({bad_ns}, "tp_rank");
  pb::PutBlockRequest second = header(d, 10, "0123456789");
  expect_invalid({header(d, 20, "0123456789"), second}, "only the first PutBlock message");
  expect_invalid({}, "an empty PutBlock stream");

  // None of those left a block behind, and the daemon still serves.
  auto g = client_->get(test_ns(), d);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code, ClientError::kNotFound);
  const auto bytes = block_bytes(3, 1, 10);
  ASSERT_TRUE(client_->put(test_ns(), d, bytes).ok());
  EXPECT_EQ(*client_->get(test_ns(), d), bytes);

  // A lookup over the bounds is refused.
  std::vector<std::vector<Digest>> many(kMaxLookupRequests + 1, std::vector<Digest>{d});
  auto lk = client_->batch_lookup(test_ns(), many, 0);
  ASSERT_FALSE(lk.ok());
  EXPECT_EQ(lk.error().code, ClientError::kInvalid);
  EXPECT_NE(lk.error().message.find("requests in one BatchLookup"), std::string::npos) << lk.error().message;

  // Every refusal was counted by method and code.
  const std::string page = scrape(daemon_->metrics_port());
  EXPECT_EQ(
      testing::metric(page, R"(cgn_kvcached_grpc_requests_total{method="PutBlock",code="INVALID_ARGUMENT"})"),
      7.0);
  EXPECT_EQ(testing::metric(
                page, R"(cgn_kvcached_grpc_requests_total{method="BatchLookup",code="INVALID_ARGUMENT"})"),
            1.0);
}

TEST_F(KvcachedDaemon, ACancelledPutLeavesNothingBehind) {
  const Digest d = digest_of(3, 2);
  {
    auto stub =
        pb::KvCache::NewStub(grpc::CreateChannel(daemon_->target(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    pb::PutBlockResponse resp;
    auto w = stub->PutBlock(&ctx, &resp);
    ASSERT_TRUE(w->Write(header(d, 4 << 20, std::string(1 << 20, 'a'))));
    ctx.TryCancel();
    EXPECT_EQ(w->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The reservation is gone: the block is absent, and a new put of it is not "in progress".
  EXPECT_TRUE(testing::wait_until(
      [&] {
        auto g = client_->get(test_ns(), d);
        return !g.ok() && g.error().code == ClientError::kNotFound;
      },
      10s));
  const auto bytes = block_bytes(3, 2, 4 << 20);
  bool stored = false;
  EXPECT_TRUE(testing::wait_until(
      [&] {
        auto put = client_->put(test_ns(), d, bytes);
        stored = put.ok();
        return stored || put.error().code != ClientError::kBusy;  // the server may still be unwinding
      },
      10s));
  ASSERT_TRUE(stored);
  EXPECT_EQ(*client_->get(test_ns(), d), bytes);
}

TEST_F(KvcachedDaemon, GarbageOnTheSocketGetsErrorFramesAndTheDaemonKeepsServing) {
  const int fd = raw_connect(daemon_->socket());
  ASSERT_GE(fd, 0) << daemon_->socket();
  auto answer = [&](const std::vector<uint8_t>& bytes) {
    auto r = decode_response(raw_exchange(fd, bytes));
    EXPECT_TRUE(r.ok()) << "the daemon answers garbage with a well-formed error frame";
    return r.ok() ? *r : Response{};
  };
  Response r = answer({'G', 'E', 'T', ' ', '/', '\r', '\n'});
  EXPECT_EQ(r.status, FrameStatus::kInvalid);
  EXPECT_NE(r.message.find("magic"), std::string::npos) << r.message;
  r = answer(std::vector<uint8_t>(kMaxFrameBytes + 100, 0xAB));
  EXPECT_EQ(r.status, FrameStatus::kInvalid);
  Request get;
  get.op = Op::kGet;
  r = answer(encode(get));
  EXPECT_EQ(r.status, FrameStatus::kInvalid);
  EXPECT_EQ(r.message, "HELLO first");
  Request hello;
  hello.op = Op::kHello;
  hello.version = 99;
  r = answer(encode(hello));
  EXPECT_EQ(r.status, FrameStatus::kInvalid);
  EXPECT_NE(r.message.find("protocol version 99"), std::string::npos) << r.message;
  // Batched garbage: too many keys, a torn entry, an unknown flag. A RELEASE_MANY asking for no
  // answer is answered when it cannot be decoded.
  hello.version = kFastPathVersion;
  ASSERT_EQ(answer(encode(hello)).status, FrameStatus::kOk);
  Request many;
  many.op = Op::kGetMany;
  many.keys.resize(kMaxBatchKeys + 1);
  r = answer(encode(many));
  EXPECT_EQ(r.status, FrameStatus::kInvalid);
  EXPECT_NE(r.message.find("GET_MANY of 129 keys; 1 to 128"), std::string::npos) << r.message;
  Request start;
  start.op = Op::kPutStartMany;
  start.puts.resize(2);
  auto torn = encode(start);
  torn.resize(torn.size() - 3);
  r = answer(torn);
  EXPECT_EQ(r.status, FrameStatus::kInvalid);
  EXPECT_NE(r.message.find("PUT_START_MANY of 2 keys carries 77 bytes"), std::string::npos) << r.message;
  Request rel;
  rel.op = Op::kReleaseMany;
  rel.no_reply = true;
  rel.handles = {5};
  auto flagged = encode(rel);
  flagged[8] |= 0x80;
  r = answer(flagged);
  EXPECT_EQ(r.status, FrameStatus::kInvalid);
  EXPECT_NE(r.message.find("RELEASE_MANY flags 0x81"), std::string::npos) << r.message;
  ::close(fd);

  // A real client still works, and releasing a handle it never had is refused, not fatal.
  auto c = LocalClient::connect(daemon_->socket());
  ASSERT_TRUE(c.ok()) << c.error().message;
  const auto bytes = block_bytes(4, 1, 4096);
  ASSERT_TRUE((*c)->put(key_of(digest_of(4, 1)), bytes).ok());
  std::vector<uint8_t> out(4096);
  ASSERT_TRUE((*c)->get(key_of(digest_of(4, 1)), out).ok());
  EXPECT_EQ(out, bytes);
  const std::string page = scrape(daemon_->metrics_port());
  // Undecodable frames are answered (and counted) as HELLO, the rest under their op.
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_fast_path_requests_total{op="HELLO",status="INVALID"})"),
            6.0);
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_fast_path_requests_total{op="GET",status="INVALID"})"),
            1.0);
}

TEST_F(KvcachedDaemon, MetricsPassPromtoolAndCountPerTier) {
  CGN_REQUIRE_CAPABILITY(::access("/usr/bin/promtool", X_OK) == 0, "promtool (Debian prometheus)");
  const auto bytes = block_bytes(5, 1, 65536);
  ASSERT_TRUE(client_->put(test_ns(), digest_of(5, 1), bytes).ok());
  ASSERT_TRUE(client_->get(test_ns(), digest_of(5, 1)).ok());
  ASSERT_FALSE(client_->get(test_ns(), digest_of(5, 2)).ok());
  auto lc = LocalClient::connect(daemon_->socket());
  ASSERT_TRUE(lc.ok());
  const std::string page = scrape(daemon_->metrics_port());
  ASSERT_FALSE(page.empty());
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_hits_total{tier="ram"})"), 1.0);
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_misses_total{tier="ram"})"), 1.0);
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_blocks{tier="ram"})"), 1.0);
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_capacity_bytes{tier="ram"})"), 64.0 * (1 << 20));
  EXPECT_EQ(testing::metric(page, "cgn_kvcached_puts_total"), 1.0);
  EXPECT_EQ(testing::metric(page, "cgn_kvcached_fast_path_connections"), 1.0);
  EXPECT_EQ(testing::metric(page, "cgn_kvcached_scan_complete"), 1.0);
  EXPECT_EQ(testing::metric(page, "cgn_kvcached_ssd_healthy"), 1.0);
  EXPECT_EQ(testing::metric(page, R"(cgn_kvcached_grpc_requests_total{method="GetBlock",code="NOT_FOUND"})"),
            1.0);
  for (const char* name :
       {"cgn_kvcached_spilled_blocks_total", "cgn_kvcached_spill_errors_total",
        "cgn_kvcached_ttl_expiries_total", "cgn_kvcached_checksum_failures_total",
        "cgn_kvcached_torn_tails_total", "cgn_kvcached_leases_active", "cgn_kvcached_pins_active",
        "cgn_kvcached_scan_done_bytes", "cgn_kvcached_scan_total_bytes"}) {
    EXPECT_TRUE(testing::declares_family(page, name)) << name;
  }
  TempDir tmp;
  testing::write_file(tmp.file("m.txt"), page);
  const std::string cmd =
      "/usr/bin/promtool check metrics < " + tmp.file("m.txt") + " > " + tmp.file("out") + " 2>&1";
  const int rc =
      std::system(cmd.c_str());  // NOLINT(concurrency-mt-unsafe,cert-env33-c): a fixed command line
  EXPECT_EQ(rc, 0) << testing::read_file(tmp.file("out"));
}

// A client left idle while its daemon restarts on the same port holds a connection the daemon
// closed; nothing polls it, so the channel still reads connected. Its next call (each kind) is
// answered by the new daemon, not failed on the dead connection.
TEST(KvcachedProcess, TheFirstCallsAfterARestartAreAnsweredByTheNewDaemon) {
  TempDir dir;
  Daemon d(dir, "kv", "ram_bytes = 8388608\nmax_block_bytes = 1048576\n");
  d.flags = {"--listen", "127.0.0.1:" + std::to_string(testing::free_port())};
  ASSERT_TRUE(d.start());
  auto c = KvClient::connect(d.target(), {});
  ASSERT_TRUE(c.ok());
  KvClient& client = **c;
  client.set_timeout_ms(5000);
  const Digest dg = digest_of(7, 1);
  const std::vector<uint8_t> value = block_bytes(7, 1, 4096);
  for (int restart = 0; restart < 4; ++restart) {
    ASSERT_TRUE(client.put(test_ns(), dg, value).ok());
    ASSERT_TRUE(client.connected());
    ASSERT_EQ(d.stop(), 0) << d.log();
    ASSERT_TRUE(d.start());
    // One call of a kind per restart, each the first on the dead connection.
    switch (restart) {
      case 0: {
        auto s = client.stats();
        EXPECT_TRUE(s.ok()) << s.error().message;
        break;
      }
      case 1: {
        auto l = client.batch_lookup(test_ns(), {{dg}}, 0);
        ASSERT_TRUE(l.ok()) << l.error().message;
        ASSERT_EQ(l->runs.size(), 1u);
        EXPECT_TRUE(l->runs[0].empty()) << "a RAM-only daemon forgets its blocks at a restart";
        break;
      }
      case 2: {
        auto g = client.get(test_ns(), dg);
        ASSERT_FALSE(g.ok());
        EXPECT_EQ(g.error().code, ClientError::kNotFound) << g.error().message;
        break;
      }
      default: {
        auto p = client.put(test_ns(), dg, value);
        ASSERT_TRUE(p.ok()) << p.error().message;
        EXPECT_FALSE(*p) << "the new daemon held nothing";
        break;
      }
    }
  }
}

}  // namespace
}  // namespace cgn::kvcached

namespace cgn::kvcached {
namespace {

TEST(KvcachedProcess, SigtermStopsPromptlyWhileAClientStaysConnected) {
  TempDir dir;
  Daemon d(dir, "kv", "ram_bytes = 8388608\nmax_block_bytes = 1048576\n");
  ASSERT_TRUE(d.start());
  auto c = KvClient::connect(d.target(), {});
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->put(test_ns(), digest_of(6, 1), block_bytes(6, 1, 4096)).ok());
  auto lc = LocalClient::connect(d.socket());
  ASSERT_TRUE(lc.ok());
  // The shutdown grace is 5 s; idle connections must not use it up.
  d.process().signal(SIGTERM);
  EXPECT_EQ(d.process().wait(4s), 0) << d.log();
  EXPECT_NE(d.log().find("stopping signal=15"), std::string::npos) << d.log();
  EXPECT_NE(::access(d.socket().c_str(), F_OK), 0) << "the socket file is removed at stop";
  EXPECT_FALSE((*c)->stats().ok());
}

}  // namespace
}  // namespace cgn::kvcached
