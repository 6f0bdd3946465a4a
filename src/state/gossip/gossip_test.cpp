// Unit tests of the gossip protocol core: codec, HMAC, phi, scuttlebutt convergence with explicit
// time, generations, tombstones, sampling and cutting at 1,400 bytes, reconcile into NodeEvents.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "cluster/node_record.h"
#include "state/gossip/core.h"
#include "state/gossip/gossip_store.h"
#include "state/gossip/phi.h"
#include "state/gossip/wire.h"

namespace cgn::gossip {
namespace {

constexpr Nanos kMs = kNanosPerMilli;

PeerAddr addr_of(size_t i) {
  auto a = PeerAddr::parse("10.0.0." + std::to_string(i % 250 + 1), static_cast<uint16_t>(7000 + i));
  return *a;
}

// N cores wired by an in-memory network that delivers every datagram at once (optionally
// dropping those to or from `down`, or across `cut`).
struct Net {
  std::vector<std::unique_ptr<GossipCore>> cores;
  std::map<PeerAddr, size_t> by_addr;
  std::vector<bool> down;
  std::function<bool(size_t, size_t)> blocked = [](size_t, size_t) { return false; };
  Nanos now = 1'000 * kNanosPerSecond;

  explicit Net(size_t n, std::string key = "", size_t seeds = 1) {
    for (size_t i = 0; i < n; ++i) {
      add(i, key, seeds);
    }
  }
  size_t add(size_t i, const std::string& key = "", size_t seeds = 1, uint64_t generation = 1,
             const std::string& rotation_key = "") {
    EXPECT_LE(i, cores.size());
    CoreOptions o;
    o.name = "m" + std::to_string(i);
    o.generation = generation;
    o.advertise = addr_of(i);
    o.hmac_key = key;
    o.rotation_key = rotation_key;
    o.seed = i + 1 + generation * 7919;
    auto c = std::make_unique<GossipCore>(o, now);
    std::vector<PeerAddr> s;
    for (size_t k = 0; k < seeds; ++k) {
      s.push_back(addr_of(k));
    }
    c->set_seeds(s);
    if (i < cores.size()) {
      cores[i] = std::move(c);
    } else {
      cores.push_back(std::move(c));
      down.push_back(false);
    }
    by_addr[addr_of(i)] = i;
    return i;
  }
  void deliver(size_t from, std::vector<Outgoing> out) {
    for (auto& o : out) {
      auto it = by_addr.find(o.to);
      if (it == by_addr.end() || down[it->second] || blocked(from, it->second)) {
        continue;
      }
      EXPECT_LE(o.bytes.size(), kMaxDatagram);
      deliver(it->second, cores[it->second]->receive(o.bytes, addr_of(from), now));
    }
  }
  void round(Nanos step = 500 * kMs) {
    now += step;
    for (size_t i = 0; i < cores.size(); ++i) {
      if (!down[i]) {
        deliver(i, cores[i]->tick(now));
      }
    }
  }
  size_t rounds_until(const std::function<bool()>& done, size_t max_rounds) {
    for (size_t r = 0; r < max_rounds; ++r) {
      if (done()) {
        return r;
      }
      round();
    }
    return done() ? max_rounds : SIZE_MAX;
  }
  // Every member holds every other member's latest version.
  bool converged() {
    for (size_t i = 0; i < cores.size(); ++i) {
      if (!down[i] && !everyone_has(i, cores[i]->max_version())) {
        return false;
      }
    }
    return true;
  }
  bool everyone_has(size_t who, uint64_t version) {
    for (size_t i = 0; i < cores.size(); ++i) {
      if (i != who && !down[i] &&
          !cores[i]->has_version(cores[who]->options().name, cores[who]->options().generation, version)) {
        return false;
      }
    }
    return true;
  }
};

std::optional<std::string> kv_at(const GossipCore& c, const std::string& member, const std::string& key) {
  for (const auto& m : c.members(0)) {
    if (m.name == member) {
      auto it = m.kvs.find(key);
      if (it != m.kvs.end()) {
        return it->second;
      }
    }
  }
  return std::nullopt;
}

Message sample_message() {
  Message m;
  m.type = MessageType::kSynAck;
  m.cluster_id = "cognitora";
  m.sender = "gpu-1";
  m.sender_generation = 1'700'000'000'000'000'000ULL;
  m.digest.complete = true;
  m.digest.entries.push_back({"gpu-1", 5, 300, 12, 2});
  m.digest.entries.push_back({"router", 9, 1, 0, 0});
  NodeDelta d;
  d.name = "gpu-2";
  d.generation = 77;
  d.addr = *PeerAddr::parse("::1", 7946);
  d.heartbeat = 1u << 20;
  d.last_gc_version = 3;
  d.floor = 4;
  d.max_version = 9;
  d.complete = true;
  d.kvs.push_back({"record", 5, KvStatus::kSet, "{\"node_id\":\"gpu-2\"}"});
  d.kvs.push_back({"old", 9, KvStatus::kDeleted, ""});
  m.delta.push_back(d);
  return m;
}

TEST(GossipWire, round_trips_every_field) {
  const Message m = sample_message();
  for (const std::string key : {"", "s3cret"}) {
    const auto bytes = encode(m, key);
    auto back = decode(bytes, "cognitora", key);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, m);
  }
}

TEST(GossipWire, size_functions_match_the_encoder) {
  const Message m = sample_message();
  size_t expect = header_size(m.cluster_id, m.sender, false) + kDigestOverhead + kDeltaOverhead;
  for (const auto& e : m.digest.entries) {
    expect += digest_entry_size(e);
  }
  for (const auto& d : m.delta) {
    expect += node_delta_header_size(d);
    for (const auto& kv : d.kvs) {
      expect += kv_size(kv);
    }
  }
  EXPECT_EQ(encode(m, "").size(), expect);
  EXPECT_EQ(encode(m, "k").size(), expect + kMacBytes);
}

TEST(GossipWire, rejects_foreign_cluster_wrong_key_and_version) {
  const auto bytes = encode(sample_message(), "right");
  EXPECT_EQ(decode(bytes, "other", "right").error().code, WireError::kBadCluster);
  EXPECT_EQ(decode(bytes, "cognitora", "wrong").error().code, WireError::kAuth);
  EXPECT_EQ(decode(bytes, "cognitora", "").error().code, WireError::kAuth);
  EXPECT_EQ(decode(encode(sample_message(), ""), "cognitora", "right").error().code, WireError::kAuth);
  auto v2 = bytes;
  v2[2] = 2;
  EXPECT_EQ(decode(v2, "cognitora", "right").error().code, WireError::kVersion);
  auto tampered = bytes;
  tampered[20] ^= 1;
  EXPECT_EQ(decode(tampered, "cognitora", "right").error().code, WireError::kAuth);
}

TEST(GossipWire, rejects_truncation_trailing_bytes_and_oversize) {
  const auto bytes = encode(sample_message(), "");
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(decode(std::span(bytes.data(), n), "cognitora", "")) << n;
  }
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_EQ(decode(longer, "cognitora", "").error().code, WireError::kMalformed);
  std::vector<uint8_t> big(kMaxDatagram + 1, 0);
  EXPECT_EQ(decode(big, "cognitora", "").error().code, WireError::kSize);
  std::vector<uint8_t> junk = {'G', 'E', 'T', ' ', '/'};
  EXPECT_EQ(decode(junk, "cognitora", "").error().code, WireError::kMagic);
}

TEST(GossipWire, rejects_kv_versions_out_of_order) {
  Message m = sample_message();
  std::swap(m.delta[0].kvs[0], m.delta[0].kvs[1]);
  EXPECT_EQ(decode(encode(m, ""), "cognitora", "").error().code, WireError::kMalformed);
}

TEST(GossipWire, hmac_matches_rfc4231_case_2) {
  const std::string data = "what do ya want for nothing?";
  const auto tag = mac("Jefe", std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  const uint8_t want[] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e,
                          0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7};
  EXPECT_TRUE(std::equal(tag.begin(), tag.end(), want));
}

TEST(GossipPhi, grows_with_silence_and_resets) {
  PhiOptions o;
  PhiDetector fd(o);
  Nanos t = 0;
  for (int i = 0; i < 50; ++i) {
    fd.heartbeat(t);
    t += 500 * kMs;
  }
  t -= 500 * kMs;
  EXPECT_LT(fd.phi(t + 500 * kMs), 1.0);
  EXPECT_LT(fd.phi(t + 1500 * kMs), o.threshold);
  EXPECT_GT(fd.phi(t + 5000 * kMs), o.threshold);
  EXPECT_LT(fd.phi(t + 2000 * kMs), fd.phi(t + 3000 * kMs));
  fd.reset();
  EXPECT_EQ(fd.phi(t + 100 * kNanosPerSecond), 0.0);
}

TEST(GossipPhi, normal_tail_matches_known_values) {
  // One standard deviation above the mean: P = 0.1587, phi = 0.80.
  EXPECT_NEAR(phi_normal(1.0, 0.0, 1.0), 0.80, 0.01);
  EXPECT_NEAR(phi_normal(0.0, 0.0, 1.0), std::log10(2.0), 0.01);
}

TEST(GossipCore, three_members_converge_from_one_seed) {
  Net net(3);
  net.cores[1]->set("record", "one", net.now);
  net.cores[2]->set("record", "two", net.now);
  const size_t r = net.rounds_until([&] { return net.everyone_has(1, 1) && net.everyone_has(2, 1); }, 20);
  ASSERT_NE(r, SIZE_MAX);
  EXPECT_EQ(kv_at(*net.cores[0], "m1", "record"), "one");
  EXPECT_EQ(kv_at(*net.cores[1], "m2", "record"), "two");
}

TEST(GossipCore, updates_and_tombstones_propagate_then_are_collected) {
  Net net(4);
  net.cores[3]->set("a", "1", net.now);
  net.cores[3]->set("b", "2", net.now);
  ASSERT_NE(net.rounds_until([&] { return net.everyone_has(3, 2); }, 30), SIZE_MAX);
  net.cores[3]->remove("a", net.now);
  ASSERT_NE(net.rounds_until([&] { return net.everyone_has(3, 3); }, 30), SIZE_MAX);
  EXPECT_EQ(kv_at(*net.cores[0], "m3", "a"), std::nullopt);
  EXPECT_EQ(kv_at(*net.cores[0], "m3", "b"), "2");
  // Past the grace the owner forgets the tombstone; a member that missed everything still
  // converges (reset from the owner's last_gc_version).
  for (int i = 0; i < 130; ++i) {  // > tombstone_grace (60 s)
    net.round();
  }
  EXPECT_EQ(net.cores[3]->members(net.now).back().kvs.size(), 1u);
  const size_t late = net.add(4);
  ASSERT_NE(net.rounds_until([&] { return net.cores[late]->has_version("m3", 1, 3); }, 40), SIZE_MAX);
  EXPECT_EQ(kv_at(*net.cores[late], "m3", "a"), std::nullopt);
  EXPECT_EQ(kv_at(*net.cores[late], "m3", "b"), "2");
}

TEST(GossipCore, restarted_member_supersedes_old_generation) {
  Net net(3);
  net.cores[2]->set("record", "old", net.now);
  ASSERT_NE(net.rounds_until([&] { return net.everyone_has(2, 1); }, 20), SIZE_MAX);
  net.add(2, "", 1, /*generation=*/2);
  net.cores[2]->set("record", "new", net.now);
  ASSERT_NE(net.rounds_until([&] { return net.everyone_has(2, 1); }, 20), SIZE_MAX);
  EXPECT_EQ(kv_at(*net.cores[0], "m2", "record"), "new");
  EXPECT_GE(net.cores[0]->stats().superseded, 1u);
  // The old incarnation cannot come back.
  for (const auto& m : net.cores[0]->members(net.now)) {
    if (m.name == "m2") {
      EXPECT_EQ(m.generation, 2u);
    }
  }
}

TEST(GossipCore, dead_member_is_detected_then_forgotten_and_stays_forgotten) {
  Net net(5);
  for (int i = 0; i < 20; ++i) {
    net.round();
  }
  net.down[4] = true;
  const size_t r = net.rounds_until([&] { return !net.cores[0]->is_live("m4"); }, 40);
  ASSERT_NE(r, SIZE_MAX);
  EXPECT_LE(r * 500, 5000u);  // documented bound: <= 5 s at a 500 ms round
  EXPECT_GE(net.cores[0]->stats().members_dead, 1u);
  for (int i = 0; i < 700; ++i) {  // > dead_gc (5 min)
    net.round();
  }
  EXPECT_EQ(net.cores[0]->member_count(), 4u);
  EXPECT_GE(net.cores[0]->stats().members_gced, 1u);
}

// A member `o` seeded with core 0 ticks once: core 0 answers none of its packets (they arrive
// from addr_of(from)).
void expect_shut_out(Net& net, const CoreOptions& o, size_t from) {
  GossipCore outsider(o, net.now);
  outsider.set_seeds({addr_of(0)});
  for (auto& out : outsider.tick(net.now)) {
    EXPECT_TRUE(net.cores[0]->receive(out.bytes, addr_of(from), net.now).empty());
  }
}

TEST(GossipCore, wrong_key_and_foreign_cluster_are_rejected_and_counted) {
  Net net(2, "key-a");
  CoreOptions o;
  o.name = "intruder";
  o.generation = 1;
  o.hmac_key = "key-b";
  expect_shut_out(net, o, 99);
  o.name = "foreign";
  o.hmac_key = "key-a";
  o.cluster_id = "elsewhere";
  expect_shut_out(net, o, 98);
  const auto& s = net.cores[0]->stats();
  EXPECT_EQ(s.rejected[static_cast<size_t>(WireError::kAuth)], 1u);
  EXPECT_EQ(s.rejected[static_cast<size_t>(WireError::kBadCluster)], 1u);
  EXPECT_EQ(net.cores[0]->member_count(), 1u);
}

TEST(GossipCore, keyless_member_cannot_join_a_keyed_cluster) {
  Net net(2, "cluster-key");
  net.cores[1]->set("record", "real", net.now);
  ASSERT_NE(net.rounds_until([&] { return net.converged(); }, 20), SIZE_MAX);
  CoreOptions o;
  o.name = "keyless";
  o.generation = 1;
  GossipCore fake(o, net.now);
  fake.set("record", "fake", net.now);
  fake.set_seeds({addr_of(0)});
  for (int round = 0; round < 10; ++round) {
    net.now += 500 * kMs;
    for (auto& out : fake.tick(net.now)) {
      // Nothing comes back: no digest, no delta, so the fake learns no member and no record.
      EXPECT_TRUE(net.cores[0]->receive(out.bytes, addr_of(97), net.now).empty());
    }
    net.round();
  }
  EXPECT_EQ(net.cores[0]->stats().rejected[static_cast<size_t>(WireError::kAuth)], 10u);
  EXPECT_FALSE(net.cores[0]->is_live("keyless"));
  EXPECT_EQ(net.cores[0]->member_count(), 2u);
  EXPECT_EQ(fake.member_count(), 1u);
}

// The rotation the docs describe (docs/security.md): every member first accepts the new key
// beside the old, then signs with the new and accepts the old, then drops the old. A rolling
// restart through each step keeps the whole cluster converged at every point.
TEST(GossipCore, key_rotation_in_three_rolling_steps_never_splits_the_cluster) {
  Net net(4, "old-key");
  uint64_t gen = 1;
  auto settle = [&](const std::string& step, size_t i) {
    net.cores[i]->set("record", step, net.now);
    ASSERT_NE(net.rounds_until([&] { return net.converged(); }, 40), SIZE_MAX) << step << " m" << i;
    for (size_t j = 0; j < net.cores.size(); ++j) {
      EXPECT_EQ(net.cores[j]->stats().rejected[static_cast<size_t>(WireError::kAuth)], 0u) << step;
    }
  };
  ASSERT_NE(net.rounds_until([&] { return net.converged(); }, 20), SIZE_MAX);
  ++gen;
  for (size_t i = 0; i < net.cores.size(); ++i) {  // 1: sign old, accept new too
    net.add(i, "old-key", 1, gen, "new-key");
    ASSERT_NO_FATAL_FAILURE(settle("accept-new", i));
  }
  ++gen;
  for (size_t i = 0; i < net.cores.size(); ++i) {  // 2: sign new, accept old too
    net.add(i, "new-key", 1, gen, "old-key");
    ASSERT_NO_FATAL_FAILURE(settle("sign-new", i));
  }
  ++gen;
  for (size_t i = 0; i < net.cores.size(); ++i) {  // 3: the new key alone
    net.add(i, "new-key", 1, gen);
    ASSERT_NO_FATAL_FAILURE(settle("drop-old", i));
  }
  // The old key no longer gets in.
  CoreOptions o;
  o.name = "stale";
  o.generation = 1;
  o.hmac_key = "old-key";
  expect_shut_out(net, o, 96);
  EXPECT_EQ(net.cores[0]->stats().rejected[static_cast<size_t>(WireError::kAuth)], 1u);
}

TEST(GossipCore, switching_keys_without_the_overlap_splits_the_cluster) {
  Net net(3, "old-key");
  ASSERT_NE(net.rounds_until([&] { return net.converged(); }, 20), SIZE_MAX);
  net.add(0, "new-key", 1, 2);
  net.cores[0]->set("record", "new", net.now);
  EXPECT_EQ(net.rounds_until([&] { return net.converged(); }, 40), SIZE_MAX);
  EXPECT_GT(net.cores[0]->stats().rejected[static_cast<size_t>(WireError::kAuth)], 0u);
}

TEST(GossipWire, rotation_key_is_accepted_but_never_signs) {
  const auto old_signed = encode(sample_message(), "old");
  EXPECT_TRUE(decode(old_signed, "cognitora", "new", kMaxDatagram, "old"));
  EXPECT_EQ(decode(old_signed, "cognitora", "new").error().code, WireError::kAuth);
  EXPECT_EQ(decode(old_signed, "cognitora", "new", kMaxDatagram, "other").error().code, WireError::kAuth);
  EXPECT_TRUE(decode(encode(sample_message(), "new"), "cognitora", "new", kMaxDatagram, "old"));
}

TEST(GossipCore, digests_are_sampled_and_deltas_cut_to_the_datagram) {
  Net net(120);
  for (auto& c : net.cores) {
    c->set("record", std::string(400, 'x'), net.now);
  }
  // 120 members x ~700 bytes of state cannot travel in one datagram: every message still fits
  // (Net::deliver checks), digests are sampled, deltas cut, and the cluster converges anyway.
  const size_t r = net.rounds_until(
      [&] {
        for (size_t i = 0; i < net.cores.size(); ++i) {
          if (!net.everyone_has(i, 1)) {
            return false;
          }
        }
        return true;
      },
      200);
  ASSERT_NE(r, SIZE_MAX);
  EXPECT_GT(net.cores[0]->stats().digests_sampled, 0u);
  EXPECT_GT(net.cores[0]->stats().deltas_cut, 0u);
}

TEST(GossipCore, refuses_values_that_cannot_fit_a_datagram) {
  CoreOptions o;
  o.name = "m";
  GossipCore c(o, 0);
  EXPECT_TRUE(c.set("record", std::string(kMaxValue, 'x'), 0));
  EXPECT_FALSE(c.set("record", std::string(kMaxValue + 1, 'x'), 0));
  EXPECT_FALSE(c.set(std::string(kMaxName + 1, 'k'), "v", 0));
}

TEST(GossipCore, partition_heals_and_converges) {
  Net net(6, "", 2);
  ASSERT_NE(net.rounds_until([&] { return net.cores[5]->is_live("m0") && net.cores[0]->is_live("m5"); }, 30),
            SIZE_MAX);
  net.blocked = [](size_t a, size_t b) { return (a < 3) != (b < 3); };
  ASSERT_NE(net.rounds_until([&] { return !net.cores[0]->is_live("m5"); }, 40), SIZE_MAX);
  net.cores[5]->set("record", "during", net.now);
  net.blocked = [](size_t, size_t) { return false; };
  ASSERT_NE(net.rounds_until([&] { return net.everyone_has(5, 1) && net.cores[0]->is_live("m5"); }, 60),
            SIZE_MAX);
}

TEST(GossipStoreReconcile, records_become_upserts_and_departures_removes) {
  cluster::NodeRecord r;
  r.node_id = "gpu-1";
  r.address = "0.0.0.0:9090";
  r.engine = "sim";
  r.models = {"m"};
  r.ready = true;
  r.generation = 5;
  r.kv_epoch = 5;
  MemberView gpu;
  gpu.name = "gpu-1";
  gpu.live = true;
  gpu.addr = *PeerAddr::parse("10.1.2.3", 7946);
  gpu.kvs[kRecordKey] = cluster::to_json(r);
  MemberView router;
  router.name = "router";
  router.live = true;
  std::map<std::string, std::string> known;
  auto ev = reconcile({gpu, router}, known);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, cluster::NodeEvent::Kind::kUpsert);
  EXPECT_EQ(ev[0].id, "gpu-1");
  EXPECT_EQ(ev[0].endpoint.host, "10.1.2.3");  // the wildcard host replaced by the member's address
  EXPECT_EQ(ev[0].endpoint.port, 9090);
  EXPECT_EQ(ev[0].update.health, routing::Health::kHealthy);
  // Alive while the failure detector says so, not while its record keeps changing.
  EXPECT_EQ(ev[0].update.liveness, routing::Liveness::kMembership);
  EXPECT_TRUE(reconcile({gpu, router}, known).empty());  // unchanged: nothing
  gpu.live = false;
  ev = reconcile({gpu, router}, known);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, cluster::NodeEvent::Kind::kRemove);
  gpu.live = true;
  gpu.kvs[kRecordKey] = "{not json";
  EXPECT_TRUE(reconcile({gpu, router}, known).empty());
}

TEST(GossipStoreReconcile, load_fields_travel_apart_and_merge_back) {
  cluster::NodeRecord r;
  r.node_id = "gpu-1";
  r.address = "10.0.0.1:9090";
  r.engine = "vllm";
  r.ready = true;
  r.total_blocks = 1000;
  r.free_blocks = 400;
  r.queue_depth = 3;
  r.generation = 5;
  r.kv_epoch = 6;
  const auto [identity, load] = split_record(cluster::to_json(r));
  EXPECT_EQ(identity.find("free_blocks"), std::string::npos);
  EXPECT_NE(load.find("free_blocks"), std::string::npos);
  EXPECT_LT(load.size(), 120u);
  auto back = cluster::parse_node_record(merge_record(identity, load));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, r);
  EXPECT_EQ(split_record("not json").first, "not json");
}

TEST(GossipStoreReconcile, power_and_energy_travel_with_the_load_and_watt_limit_with_the_identity) {
  cluster::NodeRecord r;
  r.node_id = "gpu-1";
  r.address = "10.0.0.1:9090";
  r.engine = "vllm";
  r.generation = 5;
  r.kv_epoch = 6;
  r.power_watts = 512.5;
  r.energy_joules = 123456.25;
  r.watt_limit = 250;
  const auto [identity, load] = split_record(cluster::to_json(r));
  EXPECT_NE(load.find("\"energy_joules\":123456.25"), std::string::npos) << load;
  EXPECT_NE(load.find("\"power_watts\":512.5"), std::string::npos) << load;
  EXPECT_EQ(identity.find("energy_joules"), std::string::npos) << identity;
  EXPECT_NE(identity.find("\"watt_limit\":250"), std::string::npos) << identity;
  auto back = cluster::parse_node_record(merge_record(identity, load));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, r);
}

TEST(GossipConfigKey, refuses_to_start_without_a_key_unless_insecure) {
  config::GossipConfig cfg;
  auto keyless = node_options_from_config(cfg, "router-a");
  ASSERT_FALSE(keyless);
  EXPECT_EQ(keyless.error().code, NodeError::kConfig);
  EXPECT_NE(keyless.error().message.find("secret_env"), std::string::npos) << keyless.error().message;
  EXPECT_NE(keyless.error().message.find("insecure = true"), std::string::npos) << keyless.error().message;
  cfg.insecure = true;
  auto open = node_options_from_config(cfg, "router-a");
  ASSERT_TRUE(open) << open.error().message;
  EXPECT_TRUE(open->core.hmac_key.empty());
  cfg.insecure = false;
  cfg.secret = config::Secret("k1", "KEY");
  cfg.rotation_secret = config::Secret("k0", "OLD_KEY");
  auto keyed = node_options_from_config(cfg, "router-a");
  ASSERT_TRUE(keyed) << keyed.error().message;
  EXPECT_EQ(keyed->core.hmac_key, "k1");
  EXPECT_EQ(keyed->core.rotation_key, "k0");
}

TEST(GossipConfigKey, router_and_agent_refuse_a_keyless_gossip_config) {
  const auto env = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  auto cfg = config::load_config_from_string("[router]\nstate_backend = \"gossip\"\n", "g.toml", env);
  ASSERT_TRUE(cfg) << cfg.error().message;
  auto store = make_router_store(*cfg);
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().message.find("secret_env"), std::string::npos) << store.error().message;
  auto publisher = start_agent_publisher(*cfg, "gpu-1", [] { return std::string("{}"); });
  ASSERT_FALSE(publisher);
  EXPECT_NE(publisher.error().message.find("secret_env"), std::string::npos) << publisher.error().message;
}

TEST(GossipConfigWarnings, etcd_only_settings_are_named) {
  config::CognitoraConfig cfg;
  EXPECT_TRUE(etcd_only_features(cfg).empty());
  cfg.state.etcd.prefix = "/other";
  auto w = etcd_only_features(cfg);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("cordon"), std::string::npos);
  EXPECT_NE(w[0].find("hot reload"), std::string::npos);
  cfg.agent.publish_interval_ms = 100;
  w = etcd_only_features(cfg);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("live KV prefixes"), std::string::npos);
  cfg = config::CognitoraConfig{};
  cfg.agent.max_published_prefixes = 10;
  w = etcd_only_features(cfg);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("live KV prefixes"), std::string::npos);
}

}  // namespace
}  // namespace cgn::gossip
