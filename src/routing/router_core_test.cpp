#include "routing/router_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>

#include "core/config.h"
#include "routing/policies.h"
#include "routing/test_util.h"

namespace cgn::routing {
namespace {

using testing::digests;
using testing::shared_prefix_prompt;

constexpr Nanos kSec = kNanosPerSecond;

// A built-in policy by name (policies.h).
const Policy* named(std::string_view name) {
  const Policy* p = builtin_policy(name);
  EXPECT_NE(p, nullptr) << name;
  return p;
}

// "prefix" + number without operator+(const char*, string&&), which trips GCC 12's -Wrestrict.
std::string name_of(std::string prefix, long long n) {
  prefix.append(std::to_string(n));
  return prefix;
}

struct NodeSpec {
  double queue = 0;
  double running = 0;
  double kv = 0;
  Health health = Health::kHealthy;
  bool cordoned = false;
  NodeRole role = NodeRole::kBoth;
  std::string model = "m";
  GpuIdentity gpu;
  double power = 0;
  double watt_limit = 0;
};

NodeUpdate update_of(const NodeSpec& s) {
  NodeUpdate u;
  u.models = std::vector<std::string>{s.model};
  u.health = s.health;
  u.cordoned = s.cordoned;
  u.role = s.role;
  u.queue_depth = s.queue;
  u.running = s.running;
  u.kv_used_ratio = s.kv;
  u.gpu = s.gpu;
  u.power_watts = s.power;
  u.watt_limit_watts = s.watt_limit;
  return u;
}

struct Fleet {
  explicit Fleet(RoutingPolicy p = {}, uint64_t seed = 7) : core(clock, p, IndexConfig{}, seed) {}
  NodeIndex add(const std::string& id, const NodeSpec& s = {}) {
    return core.upsert_node(id, update_of(s), UpdateSource::kStatic);
  }
  ManualClock clock{1000 * kSec};
  RoutingCore core;
};

RouteRequest request_for(const std::vector<Digest>& d, std::string_view model = "m") {
  RouteRequest r;
  r.model = model;
  r.digests = d;
  return r;
}

// ---------------------------------------------------------------- eligibility

struct EligibilityCase {
  std::string name;
  std::function<void(Fleet&)> setup;
  std::function<void(RouteRequest&)> tweak;
  RouteError expected;
};

TEST(RoutingCore, NamesWhyNoNodeIsEligible) {
  const std::vector<EligibilityCase> cases = {
      {"empty_table", [](Fleet&) {}, nullptr, RouteError::kNoNodes},
      {"model_not_served", [](Fleet& f) { f.add("a", {.model = "other"}); }, nullptr,
       RouteError::kModelNotServed},
      {"role_mismatch", [](Fleet& f) { f.add("a", {.role = NodeRole::kDecode}); },
       [](RouteRequest& r) { r.role = RoleWanted::kPrefill; }, RouteError::kRoleMismatch},
      {"too_little_vram",
       [](Fleet& f) {
         f.add("a", {.gpu = {"L4", "nvidia", 8000}});
       },
       [](RouteRequest& r) { r.min_vram_mb = 16000; }, RouteError::kCapability},
      {"no_gpu",
       [](Fleet& f) {
         f.add("a", {.gpu = {"", "cpu", 0}});
       },
       [](RouteRequest& r) { r.require_gpu = true; }, RouteError::kCapability},
      {"unhealthy",
       [](Fleet& f) {
         f.add("a", {.health = Health::kUnhealthy});
         f.add("b", {.health = Health::kUnknown});
       },
       nullptr, RouteError::kAllUnhealthy},
      {"stale",
       [](Fleet& f) {
         f.add("a");
         f.clock.advance(31 * kSec);
       },
       nullptr, RouteError::kAllUnhealthy},
      {"cordoned", [](Fleet& f) { f.add("a", {.cordoned = true}); }, nullptr, RouteError::kAllCordoned},
      {"queue_over_guard", [](Fleet& f) { f.add("a", {.queue = 65}); }, nullptr, RouteError::kAllOverloaded},
      {"kv_over_guard", [](Fleet& f) { f.add("a", {.kv = 0.99}); }, nullptr, RouteError::kAllOverloaded},
      {"too_many_digests", [](Fleet& f) { f.add("a"); },
       [](RouteRequest& r) {
         static const auto many = digests(99, 8193);
         r.digests = many;
       },
       RouteError::kTooManyDigests},
  };
  for (const auto& c : cases) {
    Fleet f;
    c.setup(f);
    const auto d = digests(1, 4);
    RouteRequest r = request_for(d);
    if (c.tweak) {
      c.tweak(r);
    }
    auto res = f.core.decide(r);
    ASSERT_FALSE(res.ok()) << c.name;
    EXPECT_EQ(res.error().code, c.expected) << c.name << ": " << res.error().message;
    EXPECT_FALSE(res.error().message.empty()) << c.name;
  }
}

// Liveness: a polled node whose state is older than max_staleness leaves routing until its next
// update; a node its backend removes when it dies (etcd lease, gossip failure detector) is alive
// however long its record goes unchanged.
TEST(RoutingCore, OnlyPolledNodesGoStaleAndMembershipNodesStayRoutable) {
  RoutingPolicy p;
  p.max_staleness = 2 * kSec;
  Fleet f(p);
  const NodeIndex polled = f.add("polled");
  NodeUpdate member = update_of({});
  member.liveness = Liveness::kMembership;
  const NodeIndex leased = f.core.upsert_node("leased", member, UpdateSource::kEtcd);
  const auto d = digests(5, 4);
  f.clock.advance(5 * kSec);
  EXPECT_TRUE(f.core.stale(polled));
  EXPECT_FALSE(f.core.stale(leased));
  for (int i = 0; i < 8; ++i) {
    auto res = f.core.decide(request_for(d));
    ASSERT_TRUE(res.ok()) << res.error().message;
    ASSERT_EQ(res->ranked.size(), 1u);
    EXPECT_EQ(res->ranked.front().node, leased);
  }
  // The next update of the polled node brings it back; max_staleness 0 turns the rule off.
  (void)f.core.upsert_node("polled", NodeUpdate{}, UpdateSource::kScrape);
  EXPECT_FALSE(f.core.stale(polled));
  f.clock.advance(5 * kSec);
  EXPECT_TRUE(f.core.stale(polled));
  p.max_staleness = 0;
  f.core.set_policy(p);
  EXPECT_FALSE(f.core.stale(polled));
  auto res = f.core.decide(request_for(d));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->ranked.size(), 2u);
}

TEST(RoutingCore, NodesWithoutGpuIdentityAreNeverCapabilityFiltered) {
  Fleet f;
  f.add("unknown-gpu");
  const auto d = digests(1, 2);
  RouteRequest r = request_for(d);
  r.min_vram_mb = 80000;
  r.require_gpu = true;
  auto res = f.core.decide(r);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->ranked.size(), 1u);
}

TEST(RoutingCore, RoleFitsTable) {
  struct C {
    NodeRole have;
    RoleWanted want;
    bool fits;
  };
  for (const C c :
       {C{NodeRole::kBoth, RoleWanted::kAny, true}, C{NodeRole::kPrefill, RoleWanted::kAny, true},
        C{NodeRole::kBoth, RoleWanted::kPrefill, true}, C{NodeRole::kDecode, RoleWanted::kPrefill, false},
        C{NodeRole::kDecode, RoleWanted::kDecode, true}, C{NodeRole::kPrefill, RoleWanted::kBoth, false},
        C{NodeRole::kBoth, RoleWanted::kBoth, true}}) {
    EXPECT_EQ(role_fits(c.have, c.want), c.fits) << to_string(c.have) << " " << static_cast<int>(c.want);
  }
}

// ---------------------------------------------------------------- the kv score

TEST(RoutingCore, KvPrefersLongestOverlapAtEqualLoad) {
  Fleet f;
  const auto d = digests(2, 32);
  f.add("a");
  const NodeIndex b = f.add("b");
  f.add("c");
  f.core.confirm_prefixes(b, d);
  f.core.confirm_prefixes(f.core.find_node("c"), std::span(d).first(8));
  auto res = f.core.decide(request_for(d));
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(res->ranked.size(), 3u);
  EXPECT_EQ(res->ranked[0].node, b);
  EXPECT_EQ(res->ranked[0].overlap_blocks, 32u);
  EXPECT_EQ(res->ranked[1].node, f.core.find_node("c"));
  EXPECT_EQ(res->ranked[1].overlap_blocks, 8u);
  EXPECT_LT(res->ranked[0].ttft_s, res->ranked[1].ttft_s);
  EXPECT_LT(res->ranked[1].ttft_s, res->ranked[2].ttft_s);
}

// Decides `r` and records its dispatch to the first choice: that node and the ticket (kNoNode, and
// a failure, when no node was eligible).
std::pair<NodeIndex, DispatchTicket> route_to_first(Fleet& f, const RouteRequest& r) {
  auto res = f.core.decide(r);
  EXPECT_TRUE(res.ok());
  if (!res.ok()) {
    return {kNoNode, DispatchTicket{}};
  }
  const NodeIndex n = res->ranked[0].node;
  return {n, f.core.record_dispatch(n, r)};
}

struct CachedAndIdle {
  NodeIndex cached;
  NodeIndex idle;
};

// Adds "cached", holding the 64 blocks of digests(3, 64) with `queue` requests waiting, and
// "idle", holding nothing: the two sides of the kv policy's trade between overlap and queue.
CachedAndIdle cached_and_idle(Fleet& f, double queue) {
  const NodeIndex cached = f.add("cached", {.queue = queue});
  const NodeIndex idle = f.add("idle");
  f.core.confirm_prefixes(cached, digests(3, 64));
  return {cached, idle};
}

// Overlap against queue: the cached node wins while its queue costs less than the prefill it
// saves (64 blocks * 64 tokens at 8000 tok/s = 0.512 s; 0.1 s per queued request).
TEST(RoutingCore, KvTradesOverlapAgainstQueue) {
  struct C {
    double cached_queue;
    bool cached_wins;
  };
  for (const C c : {C{0, true}, C{3, true}, C{5, true}, C{6, false}, C{7, false}}) {
    RoutingPolicy p;
    p.weights.uncached_weight = 1.0;  // pure TTFT
    Fleet f(p);
    const auto [cached, idle] = cached_and_idle(f, c.cached_queue);
    auto res = f.core.decide(request_for(digests(3, 64)));
    ASSERT_TRUE(res.ok());
    EXPECT_EQ(res->ranked[0].node, c.cached_wins ? cached : idle) << "queue " << c.cached_queue;
    EXPECT_EQ(res->guarded_out, 0u);
  }
}

TEST(RoutingCore, EstimateFollowsTheDocumentedFormula) {
  RoutingPolicy p;
  Fleet f(p);
  const auto d = digests(4, 10);
  const NodeIndex n = f.add("a", {.queue = 2, .running = 4, .kv = 0.9, .power = 330, .watt_limit = 300});
  f.core.confirm_prefixes(n, std::span(d).first(4));
  RouteRequest r = request_for(d);
  r.prompt_tokens = 700;  // 10 full blocks of 64 tokens plus a partial tail
  auto res = f.core.decide(r);
  ASSERT_TRUE(res.ok());
  const ScoreWeights& w = p.weights;
  const double prefill = (700.0 - 4 * 64) / w.prefill_tokens_per_s;
  const double wait = 2 * w.queue_seconds + 4 * w.running_seconds;
  const double kv = w.kv_pressure_seconds * (0.9 - w.kv_knee) / (1 - w.kv_knee);
  const double power = w.watt_penalty_seconds * 30.0 / 300.0;
  EXPECT_NEAR(res->ranked[0].ttft_s, prefill + wait + kv + power, 1e-9);
}

// The kv policy ranks by cost = ttft + (uncached_weight - 1) * prefill; ttft_s stays the plain
// estimate (deadline admission). The cached node saves 64 blocks * 64 tokens = 0.512 s of
// prefill at 8000 tok/s and its queue costs 0.1 s per request: at weight 1 it loses from a
// queue of 6, at weight 2 (saving worth 1.024 s) it still wins at 10 and loses at 11.
TEST(RoutingCore, UncachedWeightValuesHitsAboveTheWait) {
  struct C {
    double weight;
    double cached_queue;
    bool cached_wins;
  };
  for (const C c : {C{1, 5, true}, C{1, 6, false}, C{2, 6, true}, C{2, 10, true}, C{2, 11, false},
                    C{3, 15, true}, C{3, 16, false}}) {
    RoutingPolicy p;
    p.weights.uncached_weight = c.weight;
    p.guard.enabled = false;  // the spread rule would drop the queued node first
    Fleet f(p);
    const auto [cached, idle] = cached_and_idle(f, c.cached_queue);
    auto res = f.core.decide(request_for(digests(3, 64)));
    ASSERT_TRUE(res.ok());
    EXPECT_EQ(res->ranked[0].node, c.cached_wins ? cached : idle) << c.weight << " queue " << c.cached_queue;
    for (const Candidate& x : res->ranked) {
      const double prefill = x.node == idle ? 64.0 * 64 / p.weights.prefill_tokens_per_s : 0.0;
      const double wait = x.node == idle ? 0.0 : c.cached_queue * p.weights.queue_seconds;
      EXPECT_NEAR(x.ttft_s, prefill + wait, 1e-9);
      EXPECT_NEAR(x.cost, x.ttft_s + (c.weight - 1) * prefill, 1e-9);
    }
  }
}

TEST(RoutingCore, DefaultWeightsValueAMissAboveItsOwnTtft) {
  const RoutingPolicy p;
  EXPECT_GT(p.weights.uncached_weight, 1.0);
}

// Between scrapes, the router's own requests past their first token count as running: a stale
// scrape that shows one node idle must not draw every new prefix to it until the next scrape
// (sgl-project/sglang issue 32983, at low concurrency). Without the fresh count all 12 would go to "a".
TEST(RoutingCore, NewPrefixesSpreadBetweenScrapesByTheRoutersOwnRunningCount) {
  Fleet f;
  const NodeIndex a = f.add("a", {.running = 0});
  for (const char* id : {"b", "c", "d"}) {
    f.add(id, {.running = 1});
  }
  std::map<NodeIndex, int> counts;
  std::vector<DispatchTicket> open;
  for (int i = 0; i < 12; ++i) {
    const auto d = digests(7000 + i, 16);
    auto [n, ticket] = route_to_first(f, request_for(d));
    ASSERT_NE(n, kNoNode);
    ++counts[n];
    open.push_back(ticket);
    f.core.record_first_token(open.back());  // prefill done, still decoding
  }
  ASSERT_EQ(counts.size(), 4u);
  EXPECT_LE(counts[a], 4);
  for (const auto& [n, k] : counts) {
    EXPECT_GE(k, 2) << "node " << n;
    EXPECT_LE(k, 4) << "node " << n;
  }
  for (auto& t : open) {
    f.core.record_completion(t);
  }
  EXPECT_EQ(f.core.inflight_requests(a), 0u);
}

TEST(RoutingCore, WattLimitPenaltyOnlyWithPowerData) {
  Fleet f;
  const auto d = digests(5, 8);
  f.add("hot", {.power = 450, .watt_limit = 300});
  const NodeIndex cool = f.add("cool", {.power = 250, .watt_limit = 300});
  const NodeIndex unknown = f.add("no-data");
  auto res = f.core.decide(request_for(d));
  ASSERT_TRUE(res.ok());
  EXPECT_NE(res->ranked[0].node, f.core.find_node("hot"));
  EXPECT_EQ(res->ranked[2].node, f.core.find_node("hot"));
  // Cool and no-data nodes carry no penalty at all.
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(res->ranked[i].node == cool || res->ranked[i].node == unknown);
  }
  EXPECT_DOUBLE_EQ(res->ranked[0].ttft_s, res->ranked[1].ttft_s);
}

TEST(RoutingCore, MeasuredPrefillSpeedChangesTheEstimate) {
  Fleet f;
  const auto d = digests(6, 16);
  f.add("slow");
  const NodeIndex fast = f.add("fast");
  NodeUpdate u;
  u.prefill_tokens_per_s = 50'000;
  f.core.upsert_node("fast", u, UpdateSource::kAgentHealth);
  auto res = f.core.decide(request_for(d));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->ranked[0].node, fast);
}

TEST(RoutingCore, DeadlineAdmissionUsesTheSameEstimate) {
  Fleet f;
  f.add("a", {.queue = 20});  // 2 s of queue
  const auto d = digests(7, 4);
  RouteRequest r = request_for(d);
  r.deadline = 1 * kSec;
  auto res = f.core.decide(r);
  ASSERT_TRUE(res.ok());
  EXPECT_FALSE(res->deadline_ok);
  r.deadline = 5 * kSec;
  EXPECT_TRUE(f.core.decide(r)->deadline_ok);
}

TEST(RoutingCore, TierCreditPrefersEngineResidentBlocks) {
  Fleet f;
  const auto d = digests(8, 32);
  const NodeIndex ssd = f.add("ssd");
  const NodeIndex ram = f.add("ram");
  const NodeIndex eng = f.add("engine");
  f.core.confirm_prefixes(ssd, d, Tier::kSsd);
  f.core.confirm_prefixes(ram, d, Tier::kRam);
  f.core.confirm_prefixes(eng, d, Tier::kEngine);
  auto res = f.core.decide(request_for(d));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->ranked[0].node, eng);
  EXPECT_EQ(res->ranked[1].node, ram);
  EXPECT_EQ(res->ranked[2].node, ssd);
  EXPECT_FLOAT_EQ(res->ranked[1].credited_blocks, 24.0F);
  EXPECT_FLOAT_EQ(res->ranked[2].credited_blocks, 8.0F);
}

TEST(RoutingCore, CreditOrderIsEngineThenRamThenSsdThenNothing) {
  Fleet f;
  const auto d = digests(9, 16);
  // Added in the reverse of the expected order, so the tie-break on insertion cannot help.
  const NodeIndex none = f.add("none");
  const NodeIndex ssd = f.add("ssd");
  const NodeIndex ram = f.add("ram");
  const NodeIndex eng = f.add("engine");
  f.core.confirm_prefixes(ssd, d, Tier::kSsd);
  f.core.confirm_prefixes(ram, d, Tier::kRam);
  f.core.confirm_prefixes(eng, d, Tier::kEngine);
  auto res = f.core.decide(request_for(d));
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(res->ranked.size(), 4u);
  EXPECT_EQ(res->ranked[0].node, eng);
  EXPECT_EQ(res->ranked[1].node, ram);
  EXPECT_EQ(res->ranked[2].node, ssd);
  EXPECT_EQ(res->ranked[3].node, none);
  EXPECT_FLOAT_EQ(res->ranked[3].credited_blocks, 0.0F);
  // A tier change re-confirms: the RAM node's blocks spilled to SSD now tie with the SSD node.
  f.core.confirm_prefixes(ram, d, Tier::kSsd);
  res = f.core.decide(request_for(d));
  ASSERT_TRUE(res.ok());
  for (const auto& c : res->ranked) {
    if (c.node == ram) {
      EXPECT_FLOAT_EQ(c.credited_blocks, 4.0F);
    }
  }
}

TEST(RoutingCore, TierCreditsFollowTheConfiguredWeights) {
  RoutingPolicy p;
  p.weights.credit.ram = 0.0F;  // [router.routing.weights] ram_tier_credit = 0: RAM counts for nothing
  p.weights.credit.ssd = 0.5F;
  Fleet f(p);
  const auto d = digests(10, 16);
  const NodeIndex ram = f.add("ram");
  const NodeIndex ssd = f.add("ssd");
  f.core.confirm_prefixes(ram, d, Tier::kRam);
  f.core.confirm_prefixes(ssd, d, Tier::kSsd);
  auto res = f.core.decide(request_for(d));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->ranked[0].node, ssd);
  EXPECT_FLOAT_EQ(res->ranked[0].credited_blocks, 8.0F);
  EXPECT_FLOAT_EQ(res->ranked[1].credited_blocks, 0.0F);
}

// ---------------------------------------------------------------- load guard: pile-up cases

// Counts how many of `requests` go to each node when every request is dispatched and none
// completes before the next (high concurrency) or each completes at once (concurrency 1).
std::map<NodeIndex, int> run_workload(Fleet& f, int requests, bool concurrent,
                                      const std::function<std::vector<Digest>(int)>& prompt) {
  std::map<NodeIndex, int> counts;
  for (int i = 0; i < requests; ++i) {
    const auto d = prompt(i);
    const RouteRequest r = request_for(d);
    auto res = f.core.decide(r);
    EXPECT_TRUE(res.ok()) << res.error().message;
    if (!res.ok()) {
      return counts;
    }
    const NodeIndex n = res->ranked[0].node;
    ++counts[n];
    auto t = f.core.record_dispatch(n, r);
    if (!concurrent) {
      f.core.record_first_token(t);
      f.core.record_completion(t);
    }
    f.clock.advance(kNanosPerMilli);
  }
  return counts;
}

struct PileUpCase {
  std::string name;  // the anchor complaint it reproduces
  bool guard;
  bool concurrent;
  int min_per_node;  // of 200 requests over 4 nodes
};

TEST(LoadGuard, SharedSystemPromptDoesNotPileOntoOneNode) {
  // ai-dynamo/dynamo issue 737: every request shares a long system prompt that one node already holds.
  for (const PileUpCase& c :
       {PileUpCase{"guard_on", true, true, 25}, PileUpCase{"score_alone", false, true, 25}}) {
    RoutingPolicy p;
    p.guard.enabled = c.guard;
    Fleet f(p);
    std::vector<NodeIndex> nodes;
    for (const char* id : {"a", "b", "c", "d"}) {
      nodes.push_back(f.add(id));
    }
    f.core.confirm_prefixes(nodes[0], shared_prefix_prompt(0, 48, 0));
    auto counts = run_workload(f, 200, c.concurrent, [](int i) { return shared_prefix_prompt(i, 48, 16); });
    for (NodeIndex n : nodes) {
      EXPECT_GE(counts[n], c.min_per_node) << c.name << " node " << n;
    }
  }
}

TEST(RoutingCore, EqualEstimatesGoToTheNodeHoldingTheLeastCache) {
  // Sequential new tenants on idle nodes: each goes where the least is cached, so five tenants
  // on three nodes use every node (2/2/1), never two of three. Over 20 seeds: a random
  // tie-break would leave a node empty in about 38% of them.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Fleet f(RoutingPolicy{}, seed);
    for (const char* id : {"a", "b", "c"}) {
      f.add(id);
    }
    std::map<NodeIndex, int> tenants;
    for (int t = 0; t < 5; ++t) {
      const auto d = digests(9100 + t, 16);
      const RouteRequest r = request_for(d);
      auto [n, ticket] = route_to_first(f, r);
      ASSERT_NE(n, kNoNode);
      ++tenants[n];
      f.core.record_first_token(ticket);
      f.core.record_completion(ticket);
      // The tenant's next request finds its prefix where it went.
      auto again = f.core.decide(r);
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(again->ranked[0].node, n);
    }
    ASSERT_EQ(tenants.size(), 3u) << "seed " << seed;
    for (const auto& [n, k] : tenants) {
      EXPECT_LE(k, 2) << "seed " << seed;
    }
  }
}

// The race behind a live prefix that stopped steering: node a withdraws prompt 0, a request for
// it is dispatched before node b's confirmation arrives (a wins the empty tie: it holds less),
// so a guess for prompt 0 is recorded on a. Once b confirms, a's guess and b's confirmation
// estimate the same; the confirmation must win, every time, or each request a wins refreshes
// its guess and routing never follows the prefix.
TEST(RoutingCore, AConfirmedPrefixOutranksAGuessRecordedBeforeTheConfirmation) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Fleet f(RoutingPolicy{}, seed);
    const NodeIndex a = f.add("a");
    const NodeIndex b = f.add("b");
    const auto p0 = digests(700, 8);
    f.core.confirm_prefixes(a, p0);
    f.core.confirm_prefixes(a, digests(702, 8));
    f.core.confirm_prefixes(b, digests(701, 8));
    f.core.confirm_prefixes(b, digests(703, 8));
    const RouteRequest r = request_for(p0);

    f.core.remove_prefixes(a, p0);  // a evicted prompt 0 ...
    auto between = f.core.decide(r);
    ASSERT_TRUE(between.ok());
    ASSERT_EQ(between->ranked[0].node, a) << "seed " << seed;  // the emptier node wins the tie
    auto ticket = f.core.record_dispatch(a, r);
    f.core.record_completion(ticket);
    f.core.confirm_prefixes(b, p0);  // ... and b now holds it

    for (int i = 0; i < 10; ++i) {
      f.clock.advance(kSec);
      auto res = f.core.decide(r);
      ASSERT_TRUE(res.ok());
      ASSERT_EQ(res->ranked.size(), 2u);
      EXPECT_DOUBLE_EQ(res->ranked[0].cost, res->ranked[1].cost);
      ASSERT_EQ(res->ranked[0].node, b) << "seed " << seed << " request " << i;
      EXPECT_EQ(res->ranked[0].guessed_blocks, 0u);
      EXPECT_EQ(res->ranked[1].guessed_blocks, 8u);
      auto t = f.core.record_dispatch(b, r);
      f.core.record_completion(t);
    }
  }
}

TEST(LoadGuard, CacheMissAtLowConcurrencyDoesNotRepeatOneReplica) {
  // sgl-project/sglang issue 32983: with nothing cached and nothing running, ties must not always go to the
  // same node.
  Fleet f;
  for (const char* id : {"a", "b", "c", "d"}) {
    f.add(id);
  }
  auto counts = run_workload(f, 400, /*concurrent=*/false, [](int i) { return digests(5000 + i, 16); });
  ASSERT_EQ(counts.size(), 4u);
  for (const auto& [n, k] : counts) {
    EXPECT_GE(k, 60) << "node " << n;  // fair share is 100
  }
}

TEST(LoadGuard, SpreadRuleTable) {
  struct C {
    std::string name;
    double cached_queue;
    double cached_running;
    double others_queue;
    bool cached_chosen;
    uint32_t guarded_out;
  };
  // The cached node holds the whole 8-block prompt; the others hold nothing. With a short
  // prompt the score alone would keep choosing the cached node; the spread rule stops it
  // when it is far busier than the least busy node.
  const std::vector<C> cases = {
      {"balanced", 0, 0, 0, true, 0},
      {"mild_imbalance_keeps_affinity", 3, 4, 0, true, 0},
      {"far_busier_is_skipped", 30, 10, 0, false, 1},
      {"abs_gap_but_not_relative", 40, 0, 25, true, 0},
      {"relative_but_small_abs_gap", 5, 0, 0, true, 0},
      // Decoding requests are not a queue a new request waits behind (the score charges their
      // share of each step): a node busy decoding keeps its affinity.
      {"decoding_only_keeps_affinity", 0, 30, 0, true, 0},
      {"waiting_behind_decodes_is_skipped", 12, 30, 0, false, 1},
  };
  for (const auto& c : cases) {
    RoutingPolicy p;
    p.weights.queue_seconds = 0.001;  // make affinity dominate the score
    Fleet f(p);
    const NodeIndex cached = f.add("cached", {.queue = c.cached_queue, .running = c.cached_running});
    f.add("b", {.queue = c.others_queue});
    f.add("c", {.queue = c.others_queue});
    const auto d = digests(9, 8);
    f.core.confirm_prefixes(cached, d);
    auto res = f.core.decide(request_for(d));
    ASSERT_TRUE(res.ok()) << c.name;
    EXPECT_EQ(res->ranked[0].node == cached, c.cached_chosen) << c.name;
    EXPECT_EQ(res->guarded_out, c.guarded_out) << c.name;
  }
}

TEST(LoadGuard, SpreadCountsRunningOnlyWhenAsked) {
  // The former rule (spread_counts_running) counted decoding requests as load and so diverted a
  // cached prompt away from a node that was only decoding.
  for (const bool counts_running : {false, true}) {
    RoutingPolicy p;
    p.weights.queue_seconds = 0.001;
    p.guard.spread_counts_running = counts_running;
    Fleet f(p);
    const NodeIndex cached = f.add("cached", {.running = 30});
    f.add("b");
    const auto d = digests(12, 8);
    f.core.confirm_prefixes(cached, d);
    auto res = f.core.decide(request_for(d));
    ASSERT_TRUE(res.ok());
    EXPECT_EQ(res->ranked[0].node == cached, !counts_running) << counts_running;
    EXPECT_EQ(res->guarded_out, counts_running ? 1u : 0u) << counts_running;
  }
  // Policies that ignore load keep the spread rule on load: it is what balances their decodes.
  for (const Policy* kind : {named("round_robin"), named("random")}) {
    RoutingPolicy p;
    p.ranking = kind;
    Fleet f(p);
    const NodeIndex busy = f.add("busy", {.running = 30});
    f.add("b");
    auto res = f.core.decide(request_for(digests(13, 8)));
    ASSERT_TRUE(res.ok());
    ASSERT_EQ(res->ranked.size(), 1u) << kind->name();
    EXPECT_NE(res->ranked[0].node, busy) << kind->name();
    EXPECT_EQ(res->guarded_out, 1u) << kind->name();
  }
}

TEST(LoadGuard, HardFiltersSkipOverloadedCachedNode) {
  struct C {
    std::string name;
    NodeSpec cached;
  };
  for (const C& c : {C{"queue", {.queue = 70}}, C{"kv", {.kv = 0.98}}}) {
    Fleet f;
    const NodeIndex cached = f.add("cached", c.cached);
    const NodeIndex other = f.add("other");
    const auto d = digests(10, 8);
    f.core.confirm_prefixes(cached, d);
    auto res = f.core.decide(request_for(d));
    ASSERT_TRUE(res.ok()) << c.name;
    ASSERT_EQ(res->ranked.size(), 1u) << c.name;
    EXPECT_EQ(res->ranked[0].node, other) << c.name;
    EXPECT_EQ(res->guarded_out, 1u) << c.name;
  }
}

TEST(LoadGuard, RouterInFlightCountsAsLoadBetweenScrapes) {
  // No scrape arrives while the router keeps sending: its own in-flight count must trigger the
  // spread rule (the scraped queue still says 0).
  RoutingPolicy p;
  p.weights.prefill_tokens_per_s = 1e12;  // prefill cost negligible: only the guard can spread
  Fleet f(p);
  const NodeIndex a = f.add("a");
  f.add("b");
  const auto d = digests(11, 8);
  f.core.confirm_prefixes(a, d);
  auto counts = run_workload(f, 40, /*concurrent=*/true, [&](int) { return d; });
  EXPECT_LE(counts[a], 30);
  EXPECT_GE(counts[a], 10);
  EXPECT_EQ(f.core.inflight_requests(a), static_cast<uint64_t>(counts[a]));
}

// ---------------------------------------------------------------- policies

TEST(Policies, RegisteredByNameInTheConfigsOrder) {
  std::vector<std::string_view> config_names(std::begin(config::kRoutingPolicies),
                                             std::end(config::kRoutingPolicies));
  EXPECT_EQ(builtin_policies().names(), config_names);  // cognitora.toml accepts exactly these
  for (const std::string_view name : config_names) {
    auto p = find_policy(name);
    ASSERT_TRUE(p) << name;
    EXPECT_EQ((*p)->name(), name);
    EXPECT_EQ(builtin_policy(name), *p);
  }
  EXPECT_EQ(RoutingPolicy{}.ranking, named("kv"));
}

TEST(Policies, AnUnknownNameIsAnErrorListingTheRegisteredNames) {
  auto p = find_policy("fastest");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, PolicyError::kUnknown);
  EXPECT_EQ(p.error().message,
            "routing policy \"fastest\" is not registered; registered: kv, round_robin, random, least_load, "
            "session");
  EXPECT_EQ(builtin_policy("fastest"), nullptr);
}

// A policy added to a registry is found by its name and ranks decisions; a second one of the same
// name, or one without a name, is refused.
class ReversePolicy final : public Policy {
 public:
  explicit ReversePolicy(std::string name) : Policy(std::move(name), {}) {}
  void sort_keys(const RankInput& in, std::vector<RankKey>& keys) const override {
    for (uint32_t i = 0; i < in.candidates.size(); ++i) {
      keys.push_back(RankKey{-static_cast<int64_t>(i), 0, 0, i});
    }
  }
};

TEST(Policies, ARegistryTakesNewPoliciesByName) {
  PolicyRegistry r;
  ASSERT_TRUE(r.add(std::make_unique<ReversePolicy>("reverse")));
  auto twice = r.add(std::make_unique<ReversePolicy>("reverse"));
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code, PolicyError::kInvalid);
  EXPECT_FALSE(r.add(std::make_unique<ReversePolicy>("")));
  EXPECT_FALSE(r.add(nullptr));
  EXPECT_EQ(r.names(), std::vector<std::string_view>{"reverse"});
  auto reverse = r.find("reverse");
  ASSERT_TRUE(reverse);

  RoutingPolicy p;
  p.ranking = *reverse;
  Fleet f(p);
  f.add("a");
  f.add("b");
  const NodeIndex c = f.add("c");
  auto res = f.core.decide(request_for(digests(14, 4)));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->policy, *reverse);
  EXPECT_EQ(res->ranked[0].node, c);
  EXPECT_EQ(r.find("kv").error().message, "routing policy \"kv\" is not registered; registered: reverse");
}

TEST(Policies, RoundRobinCyclesEligibleNodes) {
  RoutingPolicy p;
  p.ranking = named("round_robin");
  Fleet f(p);
  const NodeIndex a = f.add("a");
  const NodeIndex b = f.add("b");
  const NodeIndex c = f.add("c");
  f.core.confirm_prefixes(c, digests(12, 4));  // overlap is ignored by round_robin
  const auto d = digests(12, 4);
  std::vector<NodeIndex> firsts;
  for (int i = 0; i < 6; ++i) {
    auto res = f.core.decide(request_for(d));
    ASSERT_TRUE(res.ok());
    EXPECT_EQ(res->policy, named("round_robin"));
    EXPECT_EQ(res->ranked.size(), 3u);
    firsts.push_back(res->ranked[0].node);
  }
  EXPECT_EQ(firsts, (std::vector<NodeIndex>{a, b, c, a, b, c}));
}

TEST(Policies, RandomCoversAllNodesAndKeepsFailoverOrder) {
  RoutingPolicy p;
  p.ranking = named("random");
  Fleet f(p, 3);
  for (const char* id : {"a", "b", "c", "d"}) {
    f.add(id);
  }
  std::map<NodeIndex, int> counts;
  const auto d = digests(13, 2);
  for (int i = 0; i < 400; ++i) {
    auto res = f.core.decide(request_for(d));
    ASSERT_TRUE(res.ok());
    ASSERT_EQ(res->ranked.size(), 4u);  // every node present, once
    std::set<NodeIndex> seen;
    for (const auto& c : res->ranked) {
      seen.insert(c.node);
    }
    EXPECT_EQ(seen.size(), 4u);
    ++counts[res->ranked[0].node];
  }
  for (const auto& [n, k] : counts) {
    EXPECT_GE(k, 60) << n;
  }
}

TEST(Policies, LeastLoadRanksByLoad) {
  RoutingPolicy p;
  p.ranking = named("least_load");
  p.guard.enabled = false;
  Fleet f(p);
  const NodeIndex a = f.add("a", {.queue = 5, .running = 5});
  const NodeIndex b = f.add("b", {.queue = 0, .running = 2});
  const NodeIndex c = f.add("c", {.queue = 1, .running = 5});
  f.core.confirm_prefixes(a, digests(14, 8));
  auto res = f.core.decide(request_for(digests(14, 8)));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->ranked[0].node, b);
  EXPECT_EQ(res->ranked[1].node, c);
  EXPECT_EQ(res->ranked[2].node, a);
  EXPECT_EQ(res->ranked[2].overlap_blocks, 8u);  // overlap still reported
}

TEST(Policies, SessionIsStickyAndConsistent) {
  RoutingPolicy p;
  p.ranking = named("session");
  Fleet f(p);
  for (const char* id : {"a", "b", "c", "d", "e"}) {
    f.add(id);
  }
  const auto d = digests(15, 4);
  std::map<std::string, NodeIndex> first;
  std::set<NodeIndex> used;
  for (int s = 0; s < 50; ++s) {
    RouteRequest r = request_for(d);
    const std::string key = name_of("session-", s);
    r.session_key = key;
    auto res = f.core.decide(r);
    ASSERT_TRUE(res.ok());
    EXPECT_EQ(res->policy, named("session"));
    first[key] = res->ranked[0].node;
    used.insert(res->ranked[0].node);
    // Same key, same node, every time.
    EXPECT_EQ(f.core.decide(r)->ranked[0].node, first[key]);
  }
  EXPECT_GE(used.size(), 4u);
  // Removing one node moves only the sessions it held.
  const NodeIndex gone = f.core.find_node("c");
  ASSERT_TRUE(f.core.remove_node("c"));
  for (const auto& [key, n] : first) {
    RouteRequest r = request_for(d);
    r.session_key = key;
    const NodeIndex now = f.core.decide(r)->ranked[0].node;
    if (n != gone) {
      EXPECT_EQ(now, n) << key;
    } else {
      EXPECT_NE(now, gone) << key;
    }
  }
}

TEST(Policies, SessionWithoutKeyFallsBackToKv) {
  RoutingPolicy p;
  p.ranking = named("session");
  Fleet f(p);
  f.add("a");
  const NodeIndex b = f.add("b");
  const auto d = digests(16, 8);
  f.core.confirm_prefixes(b, d);
  auto res = f.core.decide(request_for(d));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->policy, named("kv"));
  EXPECT_EQ(res->ranked[0].node, b);
}

TEST(Policies, SwappableAtRunTime) {
  Fleet f;
  f.add("a");
  f.add("b");
  const auto d = digests(17, 2);
  EXPECT_EQ(f.core.decide(request_for(d))->policy, named("kv"));
  RoutingPolicy p = f.core.policy();
  p.ranking = named("least_load");
  f.core.set_policy(p);
  EXPECT_EQ(f.core.decide(request_for(d))->policy, named("least_load"));
}

TEST(Policies, SoftmaxTemperatureSamplesNearBestOnly) {
  struct C {
    double temperature;
    int min_best;
    int max_best;
  };
  for (const C c : {C{0.0, 300, 300}, C{0.05, 120, 280}}) {
    RoutingPolicy p;
    p.temperature_s = c.temperature;
    p.weights.uncached_weight = 1.0;  // cost = estimate, so the gaps below are in TTFT seconds
    Fleet f(p, 11);
    const NodeIndex best = f.add("best");
    f.add("close");               // 8 blocks behind: +0.064 s
    f.add("far", {.queue = 20});  // +2 s: practically never
    const auto d = digests(18, 64);
    f.core.confirm_prefixes(best, d);
    f.core.confirm_prefixes(f.core.find_node("close"), std::span(d).first(56));
    int best_count = 0;
    int far_count = 0;
    for (int i = 0; i < 300; ++i) {
      auto res = f.core.decide(request_for(d));
      ASSERT_TRUE(res.ok());
      best_count += res->ranked[0].node == best;
      far_count += res->ranked[0].node == f.core.find_node("far");
    }
    EXPECT_GE(best_count, c.min_best) << c.temperature;
    EXPECT_LE(best_count, c.max_best) << c.temperature;
    EXPECT_EQ(far_count, 0) << c.temperature;
  }
}

// ---------------------------------------------------------------- determinism

std::vector<std::vector<NodeIndex>> replay(uint64_t seed, const Policy* kind) {
  RoutingPolicy p;
  p.ranking = kind;
  p.temperature_s = kind == named("kv") ? 0.02 : 0.0;
  Fleet f(p, seed);
  for (int i = 0; i < 8; ++i) {
    f.add(name_of("n", i));
  }
  std::vector<std::vector<NodeIndex>> out;
  std::vector<DispatchTicket> open;
  for (int i = 0; i < 300; ++i) {
    const auto d = shared_prefix_prompt(static_cast<uint64_t>(i % 37), 8, 8);
    RouteRequest r = request_for(d);
    const std::string key = i % 3 == 0 ? name_of("s", i % 11) : "";
    r.session_key = key;
    auto res = f.core.decide(r);
    std::vector<NodeIndex> ranked;
    for (const auto& c : res->ranked) {
      ranked.push_back(c.node);
    }
    out.push_back(ranked);
    open.push_back(f.core.record_dispatch(ranked[0], r));
    if (open.size() > 12) {
      f.core.record_completion(open.front());
      open.erase(open.begin());
    }
    f.clock.advance(7 * kNanosPerMilli);
  }
  return out;
}

TEST(Determinism, IdenticalSeedsGiveIdenticalDecisions) {
  for (auto kind :
       {named("kv"), named("random"), named("least_load"), named("session"), named("round_robin")}) {
    EXPECT_EQ(replay(1234, kind), replay(1234, kind)) << kind->name();
  }
  // The seed matters where randomness is used.
  EXPECT_NE(replay(1, named("random")), replay(2, named("random")));
  EXPECT_NE(replay(1, named("kv")), replay(2, named("kv")));
}

// ---------------------------------------------------------------- accounting and state

TEST(Dispatch, InFlightPrefillIsTheUncachedPartAndIsReleased) {
  Fleet f;
  const NodeIndex a = f.add("a");
  const auto d = digests(19, 10);
  f.core.confirm_prefixes(a, std::span(d).first(4));
  RouteRequest r = request_for(d);
  r.prompt_tokens = 10 * 64 + 20;
  auto t = f.core.record_dispatch(a, r);
  EXPECT_EQ(t.prefill_tokens, 6u * 64 + 20);
  EXPECT_EQ(f.core.inflight_prefill_tokens(a), 6u * 64 + 20);
  EXPECT_EQ(f.core.inflight_requests(a), 1u);
  // The dispatched digests are now optimistic entries on the node.
  EXPECT_TRUE(f.core.index().holds(a, d[9]));
  // A second identical request is now (optimistically) fully cached there.
  auto t2 = f.core.record_dispatch(a, r);
  EXPECT_EQ(t2.prefill_tokens, 20u);
  f.core.record_first_token(t);
  EXPECT_EQ(f.core.inflight_prefill_tokens(a), 20u);
  EXPECT_EQ(f.core.inflight_requests(a), 2u);
  f.core.record_completion(t);
  f.core.record_completion(t);   // idempotent
  f.core.record_completion(t2);  // releases prefill too
  EXPECT_EQ(f.core.inflight_prefill_tokens(a), 0u);
  EXPECT_EQ(f.core.inflight_requests(a), 0u);
}

// [router.routing.weights] inflight_prefill_weight: how much this router's own in-flight prefill
// tokens to a node count as wait there (0: not at all).
TEST(Dispatch, InFlightPrefillWeightScalesTheRoutersOwnBacklog) {
  for (const double weight : {0.0, 1.0, 2.5}) {
    RoutingPolicy p;
    p.weights.inflight_prefill_weight = weight;
    Fleet f(p);
    const NodeIndex a = f.add("a");
    // The digests outlive the requests that view them (RouteRequest holds a span).
    const auto sent_digests = digests(23, 10);
    const auto next_digests = digests(24, 10);
    RouteRequest sent = request_for(sent_digests);
    sent.prompt_tokens = 640;
    f.core.record_dispatch(a, sent);  // 640 uncached tokens in flight to a
    RouteRequest next = request_for(next_digests);
    next.prompt_tokens = 640;
    auto res = f.core.decide(next);
    ASSERT_TRUE(res.ok());
    const double rate = p.weights.prefill_tokens_per_s;
    EXPECT_NEAR(res->ranked[0].ttft_s, 640 / rate + 640 * weight / rate, 1e-9) << weight;
  }
}

TEST(Dispatch, TicketsOfARemovedNodeAreVoid) {
  Fleet f;
  const NodeIndex a = f.add("a");
  const auto d = digests(20, 4);
  auto t = f.core.record_dispatch(a, request_for(d));
  ASSERT_TRUE(f.core.remove_node("a"));
  EXPECT_EQ(f.core.index().node_entries(a), 0u);
  const NodeIndex again = f.add("b");  // reuses the slot
  EXPECT_EQ(again, a);
  auto t2 = f.core.record_dispatch(again, request_for(d));
  f.core.record_completion(t);  // stale: must not touch the new node's accounting
  EXPECT_EQ(f.core.inflight_requests(again), 1u);
  f.core.record_completion(t2);
  EXPECT_EQ(f.core.inflight_requests(again), 0u);
}

TEST(NodeStateUpdates, KvEpochChangeClearsTheNodesEntries) {
  Fleet f;
  const NodeIndex a = f.add("a");
  const NodeIndex b = f.add("b");
  const auto d = digests(21, 6);
  f.core.confirm_prefixes(a, d);
  f.core.confirm_prefixes(b, d);
  NodeUpdate u;
  u.kv_epoch = 1;
  f.core.upsert_node("a", u, UpdateSource::kEtcd);
  EXPECT_EQ(f.core.index().node_entries(a), 0u);
  EXPECT_EQ(f.core.index().node_entries(b), 6u);
  f.core.upsert_node("a", u, UpdateSource::kEtcd);  // same epoch: nothing happens
  f.core.confirm_prefixes(a, d);
  f.core.upsert_node("a", u, UpdateSource::kGossip);
  EXPECT_EQ(f.core.index().node_entries(a), 6u);
}

TEST(NodeStateUpdates, TotalBlocksSizeTheIndexByTheCapacityRule) {
  Fleet f;
  const NodeIndex a = f.add("a");
  EXPECT_EQ(f.core.index().node_capacity(a), IndexConfig{}.default_node_capacity);
  NodeUpdate u;
  u.total_blocks = 40;  // 40 * 16 tokens * 4 B / 256 B = 10 digest blocks
  u.block_size_tokens = 16;
  f.core.upsert_node("a", u, UpdateSource::kScrape);
  EXPECT_EQ(f.core.index().node_capacity(a), 10u);
  f.core.record_dispatch(a, request_for(digests(22, 30)));
  EXPECT_EQ(f.core.index().node_entries(a), 10u);
}

TEST(NodeStateUpdates, PartialUpdatesKeepOtherFieldsAndClamp) {
  Fleet f;
  f.add("a", {.queue = 3, .running = 2, .kv = 0.5});
  NodeUpdate u;
  u.kv_used_ratio = 1.7;
  u.queue_depth = -4;
  f.clock.advance(kSec);
  f.core.upsert_node("a", u, UpdateSource::kScrape);
  const NodeState* s = f.core.node("a");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->kv_used_ratio, 1.0);
  EXPECT_EQ(s->queue_depth, 0.0);
  EXPECT_EQ(s->running, 2.0);
  EXPECT_EQ(s->refreshed_at, f.clock.now());
  EXPECT_EQ(s->last_source, UpdateSource::kScrape);
  EXPECT_TRUE(s->serves("m"));
}

TEST(NodeStateUpdates, TableIsBounded) {
  ManualClock clock;
  RoutingCore core(clock);
  for (uint32_t i = 0; i < kMaxNodes; ++i) {
    ASSERT_NE(core.upsert_node(name_of("n", i), {}, UpdateSource::kStatic), kNoNode);
  }
  EXPECT_EQ(core.upsert_node("one-too-many", {}, UpdateSource::kStatic), kNoNode);
  EXPECT_EQ(core.node_count(), kMaxNodes);
}

TEST(IndexLifecycle, OptimisticEntriesExpireThroughDecideAndWithdrawnPrefixesStopCounting) {
  ManualClock clock(1000 * kSec);
  IndexConfig cfg;
  cfg.optimistic_ttl = 10 * kSec;
  cfg.sweep_interval = 1 * kSec;
  RoutingCore core(clock, RoutingPolicy{}, cfg, 1);
  const NodeIndex a = core.upsert_node("a", update_of({}), UpdateSource::kStatic);
  const NodeIndex b = core.upsert_node("b", update_of({}), UpdateSource::kStatic);
  const auto d = digests(30, 8);
  const RouteRequest r = request_for(d);
  auto t = core.record_dispatch(a, r);
  core.record_completion(t);
  core.confirm_prefixes(b, std::span(d).first(4));
  auto overlap_of = [&](NodeIndex n) {
    auto res = core.decide(r);
    EXPECT_TRUE(res.ok());
    for (const auto& c : res->ranked) {
      if (c.node == n) {
        return c.overlap_blocks;
      }
    }
    return 999u;
  };
  EXPECT_EQ(overlap_of(a), 8u);
  clock.advance(11 * kSec);
  core.upsert_node("a", update_of({}), UpdateSource::kScrape);  // keep both fresh
  core.upsert_node("b", update_of({}), UpdateSource::kScrape);
  EXPECT_EQ(overlap_of(a), 0u);  // the guess expired; decide() swept it
  EXPECT_EQ(overlap_of(b), 4u);  // confirmed entries do not expire
  core.remove_prefixes(b, std::span(d).subspan(2, 1));
  EXPECT_EQ(overlap_of(b), 2u);  // the run now stops at the withdrawn block
}

TEST(IndexLifecycle, BlockSizeWeightsRecomputeCapacities) {
  Fleet f;
  NodeUpdate u;
  u.total_blocks = 64;
  u.block_size_tokens = 16;
  const NodeIndex a = f.core.upsert_node("a", u, UpdateSource::kScrape);
  EXPECT_EQ(f.core.index().node_capacity(a), 16u);  // 64 * 16 * 4 / 256
  RoutingPolicy p = f.core.policy();
  p.weights.block_bytes = 1024;
  f.core.set_policy(p);
  EXPECT_EQ(f.core.index().node_capacity(a), 4u);
}

TEST(DecideInto, ReusesTheDecisionBuffer) {
  Fleet f;
  for (int i = 0; i < 16; ++i) {
    f.add(name_of("n", i));
  }
  const auto d = digests(23, 8);
  Decision out;
  ASSERT_TRUE(f.core.decide_into(request_for(d), out).ok());
  const auto* data = out.ranked.data();
  ASSERT_TRUE(f.core.decide_into(request_for(d), out).ok());
  EXPECT_EQ(out.ranked.data(), data);
  EXPECT_EQ(out.ranked.size(), 16u);
}

}  // namespace
}  // namespace cgn::routing
