#include "bench_harness/workload.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <map>

#include "bench_harness/cluster_sim.h"
#include "core/digest.h"
#include "sim/tokenizer.h"
#include "testing/process.h"

namespace cgn::bench {
namespace {

std::string text_of(uint64_t salt, uint64_t id) {
  std::string s;
  block_text(salt, id, s);
  return s;
}

TEST(BlockText, IsDeterministicSizedAndEndsWithNewline) {
  const std::string a = text_of(7, 42);
  EXPECT_EQ(a.size(), kBlockBytes);
  EXPECT_EQ(a.back(), '\n');
  EXPECT_EQ(a.find('\n'), kBlockBytes - 1);
  EXPECT_EQ(a, text_of(7, 42));
  EXPECT_NE(a, text_of(7, 43));
  EXPECT_NE(a, text_of(8, 42));
}

TEST(BlockText, SharedLeadingBlocksTokeniseAndDigestIdentically) {
  // Two prompts that share block 1 and then differ: the simulator's tokens and the router's
  // digests must agree over the whole shared block.
  const std::string shared = text_of(1, 1);
  const std::string a = shared + text_of(1, 2);
  const std::string b = shared + text_of(1, 3);
  const auto ta = sim::encode(a);
  const auto tb = sim::encode(b);
  ASSERT_EQ(ta.size(), 2 * kBlockTokens);
  ASSERT_EQ(tb.size(), 2 * kBlockTokens);
  EXPECT_TRUE(std::equal(ta.begin(), ta.begin() + kBlockTokens, tb.begin()));
  EXPECT_NE(ta[kBlockTokens], tb[kBlockTokens]);
  const Digest seed = make_digest_seed({kDigestFormatVersion, "m", {}});
  std::vector<Digest> da;
  std::vector<Digest> db;
  compute_prefix_digests(seed, a, kDefaultBlockBytes, da);
  compute_prefix_digests(seed, b, kDefaultBlockBytes, db);
  const size_t per_block = kBlockBytes / kDefaultBlockBytes;
  ASSERT_EQ(da.size(), 2 * per_block);
  EXPECT_TRUE(std::equal(da.begin(), da.begin() + per_block, db.begin()));
  EXPECT_NE(da[per_block], db[per_block]);
}

TEST(MooncakeTrace, ParsesRequestsAndTruncatesTheLastBlock) {
  const std::string text =
      "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}\n"
      "\n"
      "{\"timestamp\": 250, \"input_length\": 512, \"output_length\": 0, \"hash_ids\": [0]}\n";
  auto w = parse_mooncake_trace(text, "t");
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_EQ(w->requests.size(), 2u);
  const WorkRequest& r0 = w->requests[0];
  EXPECT_EQ(r0.input_tokens(), 600u);
  EXPECT_EQ(r0.segments[1].bytes, (600 - 512) * kBytesPerToken);
  EXPECT_EQ(r0.output_tokens, 5u);
  EXPECT_EQ(w->requests[1].arrival, 250 * kNanosPerMilli);
  EXPECT_EQ(w->requests[1].output_tokens, 1u);  // at least one token is generated
  std::string p0;
  std::string p1;
  build_prompt(*w, r0, p0);
  build_prompt(*w, w->requests[1], p1);
  EXPECT_EQ(p0.size(), 600u * kBytesPerToken);
  EXPECT_EQ(p0.substr(0, kBlockBytes), p1);  // shared hash_id 0 -> shared text
  EXPECT_EQ(r0.session_key, "0-1");
  EXPECT_EQ(w->requests[1].session_key, "0");
}

TEST(MooncakeTrace, RejectsMalformedLinesWithTheLineNumber) {
  const char* bad[] = {
      "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0]}",
      "{\"timestamp\": -1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]}",
      "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 5, \"hash_ids\": []}",
      "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [\"x\"]}",
      "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5}",
      "[1, 2]",
      "{\"timestamp\": 0,",
  };
  for (const char* line : bad) {
    auto w = parse_mooncake_trace(std::string("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
                                              "\"hash_ids\": [9]}\n") +
                                      line,
                                  "t");
    ASSERT_FALSE(w.ok()) << line;
    EXPECT_EQ(w.error().code, TraceError::kParse) << line;
    EXPECT_NE(w.error().message.find("line 2"), std::string::npos) << w.error().message;
  }
  auto dec = parse_mooncake_trace(
      "{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n"
      "{\"timestamp\": 4, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n",
      "t");
  EXPECT_FALSE(dec.ok());
}

TEST(MooncakeTrace, EnforcesLimits) {
  TraceLimits l;
  l.max_bytes = 10;
  auto w = parse_mooncake_trace(std::string(11, ' '), "t", l);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, TraceError::kLimit);
  TraceLimits l2;
  l2.max_input_tokens = 100;
  auto w2 = parse_mooncake_trace(
      "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}", "t", l2);
  EXPECT_FALSE(w2.ok());
  TraceLimits l3;
  l3.max_lines = 1;
  auto w3 = parse_mooncake_trace("\n\n", "t", l3);
  ASSERT_FALSE(w3.ok());
  EXPECT_EQ(w3.error().code, TraceError::kLimit);
}

void write_gzip(const std::string& path, const std::string& content) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, content.data(), static_cast<unsigned>(content.size())),
            static_cast<int>(content.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

TEST(MooncakeTrace, ReadsGzipAndPlainFilesAlike) {
  const std::string text =
      "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}\n"
      "{\"timestamp\": 7, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [0]}\n";
  cgn::testing::TempDir dir;
  cgn::testing::write_file(dir.file("a_trace.jsonl"), text);
  write_gzip(dir.file("b_trace.jsonl.gz"), text);
  auto plain = load_mooncake_trace(dir.file("a_trace.jsonl"));
  auto gz = load_mooncake_trace(dir.file("b_trace.jsonl.gz"));
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  ASSERT_TRUE(gz.ok()) << gz.error().message;
  EXPECT_EQ(gz->name, "b_trace");
  ASSERT_EQ(gz->requests.size(), 2u);
  ASSERT_EQ(plain->requests.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(gz->requests[i].arrival, plain->requests[i].arrival);
    EXPECT_EQ(gz->requests[i].input_tokens(), plain->requests[i].input_tokens());
  }
  auto missing = load_mooncake_trace(dir.file("none.jsonl.gz"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, TraceError::kIo);
}

TEST(MooncakeTrace, StopsInflatingPastTheByteLimit) {
  cgn::testing::TempDir dir;
  write_gzip(dir.file("bomb.jsonl.gz"), std::string(8u << 20, '\n'));  // 8 MiB of blank lines
  TraceLimits l;
  l.max_bytes = 1u << 16;
  auto w = load_mooncake_trace(dir.file("bomb.jsonl.gz"), l);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, TraceError::kLimit);
}

// The traces in bench/traces/ are part of the repository and load without any setup.
TEST(MooncakeTrace, BundledTracesLoad) {
  auto conv = load_mooncake_trace(trace_path("conversation"));
  ASSERT_TRUE(conv.ok()) << conv.error().message;
  EXPECT_EQ(conv->requests.size(), 12031u);
  auto syn = load_mooncake_trace(trace_path("synthetic"));
  ASSERT_TRUE(syn.ok()) << syn.error().message;
  EXPECT_EQ(syn->requests.size(), 3993u);
}

TEST(SessionHalf, SplitsWholeSessionsByOrderOfFirstRequest) {
  // Sessions in order of first request: "0-1" (#0), "0-2" (#1), "0-3" (#2); "0-1" returns last.
  const std::string text =
      "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [0, 1]}\n"
      "{\"timestamp\": 1, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [0, 2]}\n"
      "{\"timestamp\": 2, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [0, 3]}\n"
      "{\"timestamp\": 3, \"input_length\": 1536, \"output_length\": 1, \"hash_ids\": [0, 1, 4]}\n";
  auto w = parse_mooncake_trace(text, "t");
  ASSERT_TRUE(w.ok()) << w.error().message;
  const Workload even = session_half(*w, SessionHalf::kEven);
  const Workload odd = session_half(*w, SessionHalf::kOdd);
  ASSERT_EQ(even.requests.size(), 3u);
  EXPECT_EQ(even.requests[0].session_key, "0-1");
  EXPECT_EQ(even.requests[1].session_key, "0-3");
  EXPECT_EQ(even.requests[2].session_key, "0-1");
  EXPECT_EQ(even.requests[2].arrival, 3 * kNanosPerMilli);  // arrivals are kept
  ASSERT_EQ(odd.requests.size(), 1u);
  EXPECT_EQ(odd.requests[0].session_key, "0-2");
  EXPECT_EQ(session_half(*w, SessionHalf::kAll).requests.size(), 4u);
  EXPECT_NE(even.name, odd.name);
  EXPECT_EQ(even.salt, w->salt);  // same text for the same blocks
}

TEST(SessionHalf, ParsesItsNamesAndRejectsOthers) {
  EXPECT_EQ(*parse_session_half("all"), SessionHalf::kAll);
  EXPECT_EQ(*parse_session_half("even"), SessionHalf::kEven);
  EXPECT_EQ(*parse_session_half("odd"), SessionHalf::kOdd);
  const auto bad = parse_session_half("Odd");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("all | even | odd"), std::string::npos);
}

TEST(SessionHalf, TheConversationTraceSplitsIntoTwoDisjointHalvesOfSimilarSize) {
  auto conv = load_mooncake_trace(trace_path("conversation"));
  ASSERT_TRUE(conv.ok()) << conv.error().message;
  const Workload even = session_half(*conv, SessionHalf::kEven);
  const Workload odd = session_half(*conv, SessionHalf::kOdd);
  EXPECT_EQ(even.requests.size() + odd.requests.size(), conv->requests.size());
  std::map<std::string, int> side;
  for (const WorkRequest& r : even.requests) {
    side[r.session_key] |= 1;
  }
  for (const WorkRequest& r : odd.requests) {
    side[r.session_key] |= 2;
  }
  for (const auto& [key, s] : side) {
    EXPECT_NE(s, 3) << "session " << key << " is in both halves";
  }
  const double share = static_cast<double>(even.requests.size()) / static_cast<double>(conv->requests.size());
  EXPECT_GT(share, 0.35);
  EXPECT_LT(share, 0.65);
}

TEST(SharedPrefix, TenantsShareTheSystemPromptAndTurnsExtendThePreviousPrompt) {
  auto p = shared_prefix_preset("small");
  ASSERT_TRUE(p.ok());
  const Workload w = make_shared_prefix(*p, 3);
  ASSERT_EQ(w.requests.size(), size_t{p->tenants} * p->users_per_tenant * p->turns);
  std::map<std::string, std::vector<std::string>> by_session;
  for (const auto& r : w.requests) {
    std::string s;
    build_prompt(w, r, s);
    by_session[r.session_key].push_back(s);
  }
  const size_t sys_bytes = size_t{p->system_tokens} * kBytesPerToken;
  const auto& a = by_session.at("t0-u0");
  const auto& b = by_session.at("t0-u1");
  const auto& c = by_session.at("t1-u0");
  ASSERT_EQ(a.size(), p->turns);
  EXPECT_EQ(a[0].size(), sys_bytes + size_t{p->question_tokens} * kBytesPerToken);
  EXPECT_EQ(a[0].substr(0, sys_bytes), b[0].substr(0, sys_bytes));
  EXPECT_NE(a[0].substr(0, sys_bytes), c[0].substr(0, sys_bytes));
  EXPECT_NE(a[0], b[0]);
  for (size_t t = 1; t < a.size(); ++t) {
    EXPECT_EQ(a[t].substr(0, a[t - 1].size()), a[t - 1]) << "turn " << t;
  }
  for (size_t i = 1; i < w.requests.size(); ++i) {
    EXPECT_LE(w.requests[i - 1].arrival, w.requests[i].arrival);
  }
  // Same seed, same workload.
  const Workload again = make_shared_prefix(*p, 3);
  EXPECT_EQ(again.requests.back().arrival, w.requests.back().arrival);
  EXPECT_FALSE(shared_prefix_preset("nope").ok());
}

TEST(LoadLevel, ScalesArrivalsSoDemandFillsTheCluster) {
  auto p = shared_prefix_preset("small");
  const Workload w = make_shared_prefix(*p, 1);
  ClusterConfig c;
  c.nodes = 4;
  const LoadLevel half = load_level(w, c, 0.5);
  const LoadLevel full = load_level(w, c, 1.0);
  EXPECT_NEAR(full.rate_rps, 2 * half.rate_rps, 1e-9 * full.rate_rps);
  const double span = static_cast<double>(w.requests.back().arrival - w.requests.front().arrival) * 1e-9;
  EXPECT_NEAR(offered_demand_s(w, c.node_model) / (span * full.time_scale * c.nodes), 1.0, 1e-9);
  // Demand grows with prompt and output.
  EXPECT_LT(request_demand_s(c.node_model, 1000, 10), request_demand_s(c.node_model, 2000, 10));
  EXPECT_LT(request_demand_s(c.node_model, 1000, 10), request_demand_s(c.node_model, 1000, 20));
}

TEST(IdealBound, RepeatedPromptHitsAllButItsLastBlock) {
  Workload w;
  w.salt = 5;
  for (int i = 0; i < 4; ++i) {
    WorkRequest r;
    r.arrival = i;
    r.segments = {{1, kBlockBytes}, {2, kBlockBytes}};
    w.requests.push_back(r);
  }
  ClusterConfig c;
  c.nodes = 1;
  const double prompt = 2.0 * kBlockTokens;
  const double bs = c.node_model.block_size;
  // First request misses; the others hit every block but the last (vLLM recomputes a token).
  const double expect = 3 * (prompt - bs) / (4 * prompt);
  EXPECT_NEAR(ideal_hit_rate(w, c), expect, 1e-12);
}

}  // namespace
}  // namespace cgn::bench
