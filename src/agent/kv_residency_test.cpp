// KvResidency's mapping from the engine's resident run to routing digests, and the simulator's
// block naming, with the lookup seam answering in-process.
#include "agent/kv_residency.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "agent/agent_proxy.h"
#include "agent/engine_digests.h"
#include "core/metrics.h"
#include "testing/metrics_page.h"

namespace cgn::agent {
namespace {

Digest dg(uint8_t tag, uint8_t i) {
  Digest d{};
  d[0] = tag;
  d[1] = i;
  return d;
}

TEST(KvResidencyMapping, an_engine_run_stands_for_the_routing_digests_its_tokens_cover) {
  std::vector<Digest> engine;
  for (uint8_t i = 0; i < 20; ++i) {
    engine.push_back(dg(1, i));
  }
  const std::vector<Digest> routing = {dg(2, 0), dg(2, 1), dg(2, 2), dg(2, 3)};
  KvResidencyOptions o;
  o.ns.block_tokens = 16;  // 64 bytes a block at 4 bytes a token
  o.block_bytes = 256;     // 4 engine blocks a routing digest
  std::vector<ResidencyChange> seen;
  KvResidency r(
      o,
      [](const kvcache::BlockNamespace&, const std::vector<std::vector<Digest>>& reqs, uint32_t lease) {
        EXPECT_EQ(lease, 0u);  // a hint: nothing leased
        kvcached::KvLookup l;
        // One request per block. Blocks 0..6 in RAM, 7..8 on SSD, 9.. absent -> routing 0
        // (blocks 0..3) RAM, routing 1 (blocks 4..7) SSD (the coldest), routing 2 (8..11): not
        // wholly resident.
        for (size_t b = 0; b < reqs.size(); ++b) {
          EXPECT_EQ(reqs[b].size(), 1u);
          if (b < 7) {
            l.runs.push_back({kvcache::Tier::kRam});
          } else if (b < 9) {
            l.runs.push_back({kvcache::Tier::kSsd});
          } else {
            l.runs.emplace_back();
          }
        }
        return Result<kvcached::KvLookup, kvcached::ClientError>(l);
      },
      [&](const ResidencyChange& c) { seen.push_back(c); });
  r.track(routing, engine);
  ASSERT_TRUE(r.refresh_once());
  ASSERT_EQ(seen.size(), 1u);
  std::map<Digest, routing::Tier> got(seen[0].resident.begin(), seen[0].resident.end());
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(got[routing[0]], routing::Tier::kRam);
  EXPECT_EQ(got[routing[1]], routing::Tier::kSsd);
  EXPECT_EQ(r.resident_run(engine).size(), 9u);
}

TEST(KvResidencyMapping, a_tail_in_kvcached_behind_a_head_the_engine_holds_is_found) {
  std::vector<Digest> chain = {dg(3, 0), dg(3, 1), dg(3, 2)};
  KvResidencyOptions o;
  o.ns.block_tokens = 64;
  o.block_bytes = 256;
  std::vector<ResidencyChange> seen;
  KvResidency r(
      o,
      [](const kvcache::BlockNamespace&, const std::vector<std::vector<Digest>>& reqs, uint32_t) {
        kvcached::KvLookup l;
        for (size_t b = 0; b < reqs.size(); ++b) {
          l.runs.push_back(b == 0 ? std::vector<kvcache::Tier>{}
                                  : std::vector<kvcache::Tier>{kvcache::Tier::kRam});
        }
        return Result<kvcached::KvLookup, kvcached::ClientError>(l);
      },
      [&](const ResidencyChange& c) { seen.push_back(c); });
  r.track(chain, chain);
  ASSERT_TRUE(r.refresh_once());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].resident.size(), 2u);
  EXPECT_EQ(r.resident_run(chain), (std::vector<Digest>{chain[1], chain[2]}));
}

// The scrape shows each lookup round's outcome, what is tracked and what the last answer published:
// an operator reads from /metrics whether residency is refreshing at all.
TEST(KvResidencyMetrics, rounds_by_outcome_tracked_and_published_digests_are_scraped) {
  const std::vector<Digest> chain = {dg(4, 0), dg(4, 1), dg(4, 2)};
  KvResidencyOptions o;
  o.ns.block_tokens = 64;  // one engine block a routing digest
  o.block_bytes = 256;
  bool answer = true;
  KvResidency r(o,
                [&](const kvcache::BlockNamespace&, const std::vector<std::vector<Digest>>& reqs,
                    uint32_t) -> Result<kvcached::KvLookup, kvcached::ClientError> {
                  if (!answer) {
                    return make_error(kvcached::ClientError::kConnect, "refused");
                  }
                  kvcached::KvLookup l;
                  for (size_t b = 0; b < reqs.size(); ++b) {
                    l.runs.push_back({b == 0 ? kvcache::Tier::kRam : kvcache::Tier::kSsd});
                  }
                  return l;
                },
                {});
  metrics::Registry reg;
  add_kv_residency_metrics(reg, r);
  r.track(chain, chain);
  ASSERT_TRUE(r.refresh_once());
  ASSERT_TRUE(r.refresh_once());
  answer = false;
  ASSERT_FALSE(r.refresh_once());
  std::string page = reg.render();
  EXPECT_EQ(testing::metric(page, R"(cgn_agent_kv_residency_lookups_total{outcome="ok"})"), 2) << page;
  EXPECT_EQ(testing::metric(page, R"(cgn_agent_kv_residency_lookups_total{outcome="failed"})"), 1);
  EXPECT_EQ(testing::metric(page, "cgn_agent_kv_residency_tracked_digests"), 3);
  EXPECT_EQ(testing::metric(page, R"(cgn_agent_kv_residency_published_digests{tier="ram"})"), 1);
  EXPECT_EQ(testing::metric(page, R"(cgn_agent_kv_residency_published_digests{tier="ssd"})"), 2);
  // Counters carry on from the last scrape, not from zero.
  answer = true;
  ASSERT_TRUE(r.refresh_once());
  page = reg.render();
  EXPECT_EQ(testing::metric(page, R"(cgn_agent_kv_residency_lookups_total{outcome="ok"})"), 3);
  EXPECT_EQ(testing::metric(page, R"(cgn_agent_kv_residency_lookups_total{outcome="failed"})"), 1);
}

// A completions body with `n` bytes of prompt (appends, not operator+: GCC 12 -Wrestrict).
std::string completion_body(size_t n) {
  std::string body = R"({"model":"served","prompt":")";
  body.append(n, 'a');
  body += R"("})";
  return body;
}

TEST(EngineNaming, the_simulator_is_looked_up_in_its_own_namespace_and_block_hashes) {
  config::EngineConfig e;
  e.model = "m";
  e.served_name = "served";
  e.extra_args = {"--block-size", "32"};
  const EngineNaming sim = engine_naming("sim", e, 256);
  EXPECT_EQ(sim.ns.model, "served");
  EXPECT_EQ(sim.ns.dtype, "bf16");
  EXPECT_EQ(sim.ns.block_tokens, 32u);
  // ~4 bytes a token: a 1,000-byte prompt is about 250 tokens, 7 full blocks of 32.
  const std::string body = completion_body(1000);
  const auto chain = sim.chain("/v1/completions", body);
  EXPECT_EQ(chain.size(), 7u);
  // A longer prompt with the same start extends the chain (chained hashes).
  const auto longer = sim.chain("/v1/completions", completion_body(1200));
  ASSERT_GT(longer.size(), chain.size());
  EXPECT_TRUE(std::equal(chain.begin(), chain.end(), longer.begin()));
  EXPECT_TRUE(sim.chain("/v1/embeddings", body).empty());
  const EngineNaming vllm = engine_naming("vllm", e, 256);
  EXPECT_EQ(vllm.ns.block_tokens, 64u);
  EXPECT_EQ(vllm.chain("/v1/completions", body), completion_digests("/v1/completions", body, nullptr, 256));
  EXPECT_EQ(sim_block_size({"--block-size=8"}), 8u);
  EXPECT_EQ(sim_block_size({}), 16u);
}

}  // namespace
}  // namespace cgn::agent
