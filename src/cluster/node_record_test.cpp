#include "cluster/node_record.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cluster/node_record_samples.h"

namespace cgn::cluster {
namespace {

using samples::full_record;
using samples::minimal_record;

TEST(NodeRecord, round_trips_through_json) {
  for (const auto& r : {full_record(), minimal_record()}) {
    auto back = parse_node_record(to_json(r));
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(*back, r);
  }
}

TEST(NodeRecord, unknown_gpu_and_load_are_absent_keys_not_zeros) {
  auto j = nlohmann::json::parse(to_json(minimal_record()));
  for (const char* key : {"gpu_name", "gpu_vendor", "vram_total_mb", "gpu_count", "free_blocks",
                          "queue_depth", "running", "power_watts", "energy_joules"}) {
    EXPECT_FALSE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["total_blocks"], 0);
  EXPECT_EQ(j["role"], "both");
  auto full = nlohmann::json::parse(to_json(full_record()));
  EXPECT_EQ(full["gpu_name"], "NVIDIA H200");
  EXPECT_EQ(full["vram_total_mb"], 143771);
  EXPECT_EQ(full["role"], "prefill");
}

TEST(NodeRecord, rejects_wrong_types_missing_keys_and_limits_naming_the_key) {
  auto with = [](const std::string& key, nlohmann::json value) {
    auto j = nlohmann::json::parse(to_json(full_record()));
    j[key] = value;
    return j.dump();
  };
  auto without = [](const std::string& key) {
    auto j = nlohmann::json::parse(to_json(full_record()));
    j.erase(key);
    return j.dump();
  };
  struct Case {
    std::string text;
    RecordError code;
    std::string names;
  };
  const std::vector<Case> cases = {
      {with("total_blocks", -1), RecordError::kShape, "total_blocks"},
      {with("total_blocks", 1.5), RecordError::kShape, "total_blocks"},
      {with("total_blocks", "100"), RecordError::kShape, "total_blocks"},
      {with("kv_epoch", nullptr), RecordError::kShape, "kv_epoch"},
      {with("models", "qwen"), RecordError::kShape, "models"},
      {with("models", nlohmann::json::array({1})), RecordError::kShape, "models"},
      {with("role", "mixed"), RecordError::kShape, "role"},
      {with("cordon", 1), RecordError::kShape, "cordon"},
      {with("power_watts", -3.0), RecordError::kShape, "power_watts"},
      {with("energy_joules", -1.0), RecordError::kShape, "energy_joules"},
      {with("energy_joules", "12"), RecordError::kShape, "energy_joules"},
      {with("gpu_count", 1ull << 40), RecordError::kShape, "gpu_count"},
      {with("node_id", std::string(600, 'x')), RecordError::kShape, "node_id"},
      {with("node_id", ""), RecordError::kShape, "node_id"},
      {without("generation"), RecordError::kShape, "generation"},
      {without("address"), RecordError::kShape, "address"},
      {"[1,2]", RecordError::kShape, "object"},
      {"{\"node_id\":", RecordError::kSyntax, "JSON"},
      {"{\"a\":[[[[[[1]]]]]]}", RecordError::kTooLarge, "deeper"},
      {std::string(70 * 1024, ' '), RecordError::kTooLarge, "bytes"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text.substr(0, 120));
    auto r = parse_node_record(c.text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, c.code);
    EXPECT_NE(r.error().message.find(c.names), std::string::npos) << r.error().message;
  }
  nlohmann::json many = nlohmann::json::parse(to_json(full_record()));
  many["models"] = std::vector<std::string>(65, "m");
  EXPECT_FALSE(parse_node_record(many.dump()).ok());
}

TEST(NodeRecord, ignores_unknown_keys_from_newer_agents) {
  auto j = nlohmann::json::parse(to_json(minimal_record()));
  j["something_new"] = {{"x", 1}};
  auto r = parse_node_record(j.dump());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, minimal_record());
}

// Bytes the agent wrote before the record carried schema_version (full_record(), captured from
// that agent's to_json()): routers of this version must keep reading them.
std::string captured_record() {
  std::ifstream in(std::string(CGN_CLUSTER_TESTDATA) + "/node_record_main_agent.json", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(NodeRecordSchema, a_record_from_an_agent_without_schema_version_still_parses) {
  const std::string text = captured_record();
  ASSERT_FALSE(text.empty()) << "fixture missing";
  ASSERT_EQ(text.find("schema_version"), std::string::npos);
  auto r = parse_node_record(text);
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto expected = full_record();
  expected.energy_joules.reset();  // that agent had no energy_joules key: unknown
  EXPECT_EQ(*r, expected);
}

TEST(NodeRecordSchema, writes_its_major_version_and_reads_an_extra_key_at_that_version) {
  auto j = nlohmann::json::parse(to_json(full_record()));
  ASSERT_TRUE(j.contains("schema_version"));
  EXPECT_EQ(j["schema_version"].get<uint64_t>(), kNodeRecordSchemaMajor);
  j["added_in_a_later_minor"] = "x";  // an additive field from a newer agent
  auto r = parse_node_record(j.dump());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, full_record());
}

TEST(NodeRecordSchema, refuses_a_newer_major_version_naming_both_versions) {
  auto j = nlohmann::json::parse(to_json(full_record()));
  j["schema_version"] = kNodeRecordSchemaMajor + 1;
  auto r = parse_node_record(j.dump());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, RecordError::kVersion);
  EXPECT_NE(r.error().message.find("schema_version " + std::to_string(kNodeRecordSchemaMajor + 1)),
            std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find(std::to_string(kNodeRecordSchemaMajor)), std::string::npos);
  EXPECT_EQ(to_string(RecordError::kVersion), "version");
  j["schema_version"] = "1";  // a known key of the wrong type is a shape error naming it
  auto bad = parse_node_record(j.dump());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, RecordError::kShape);
  EXPECT_NE(bad.error().message.find("schema_version"), std::string::npos);
}

TEST(NodeRecord, becomes_a_routing_update) {
  auto u = to_node_update(full_record());
  EXPECT_EQ(u.address, "10.0.0.7:9090");
  EXPECT_EQ(u.health, routing::Health::kHealthy);
  EXPECT_EQ(u.total_blocks, 27500u);
  EXPECT_EQ(u.free_blocks, 20000u);
  ASSERT_TRUE(u.kv_used_ratio.has_value());
  EXPECT_DOUBLE_EQ(*u.kv_used_ratio, 1.0 - 20000.0 / 27500.0);
  EXPECT_EQ(u.kv_epoch, 1790000000123u);
  ASSERT_TRUE(u.gpu.has_value());
  EXPECT_EQ(u.gpu->vram_total_mb, 143771u);
  EXPECT_EQ(u.cordoned, true);
  auto m = to_node_update(minimal_record());
  EXPECT_FALSE(m.gpu.has_value());
  EXPECT_FALSE(m.kv_used_ratio.has_value());
  EXPECT_FALSE(m.block_size_tokens.has_value());
  EXPECT_EQ(m.health, routing::Health::kUnhealthy);
}

TEST(NodeRecord, a_record_without_power_clears_the_cores_reading) {
  routing::NodeState s;
  ASSERT_TRUE(routing::apply_update(s, to_node_update(full_record()), routing::UpdateSource::kEtcd, 1));
  EXPECT_EQ(s.power_watts, 627.4);
  EXPECT_EQ(s.energy_joules, 8123456.789);
  EXPECT_EQ(s.watt_limit_watts, full_record().watt_limit);
  auto lost = full_record();
  lost.power_watts.reset();
  lost.energy_joules.reset();
  (void)routing::apply_update(s, to_node_update(lost), routing::UpdateSource::kEtcd, 2);
  EXPECT_FALSE(s.power_watts.has_value());
  EXPECT_FALSE(s.energy_joules.has_value());
}

PoolSample sample(uint64_t starts, uint64_t total, std::optional<uint64_t> free_blocks,
                  std::optional<double> running = std::nullopt) {
  return PoolSample{starts, total, free_blocks, running};
}

TEST(KvEpoch, bumps_on_restart_resize_and_unexplained_free_block_jumps) {
  struct Case {
    std::string label;
    PoolSample prev;
    PoolSample cur;
    std::optional<EpochBump> want;
  };
  const std::vector<Case> cases = {
      {"steady", sample(1, 1000, 500, 4), sample(1, 1000, 520, 4), std::nullopt},
      {"restart", sample(1, 1000, 500), sample(2, 1000, 500), EpochBump::kEngineRestart},
      {"resize", sample(1, 1000, 500), sample(1, 1200, 500), EpochBump::kPoolResize},
      {"learning the size is not a resize", sample(1, 0, std::nullopt), sample(1, 1000, 900), std::nullopt},
      {"jump up, same running", sample(1, 1000, 100, 8), sample(1, 1000, 400, 8), EpochBump::kFreeBlockJump},
      {"jump up, no running figures", sample(1, 1000, 100), sample(1, 1000, 400), EpochBump::kFreeBlockJump},
      {"jump up at exactly 25% is not over", sample(1, 1000, 100, 8), sample(1, 1000, 350, 8), std::nullopt},
      {"jump up explained by completions", sample(1, 1000, 100, 8), sample(1, 1000, 900, 1), std::nullopt},
      {"jump down is allocation", sample(1, 1000, 900, 1), sample(1, 1000, 100, 9), std::nullopt},
      {"free unknown", sample(1, 1000, std::nullopt), sample(1, 1000, 900), std::nullopt},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    EXPECT_EQ(kv_epoch_bump(c.prev, c.cur), c.want);
  }
  EXPECT_EQ(kv_epoch_bump(sample(1, 1000, 100, 8), sample(1, 1000, 250, 8), 0.1), EpochBump::kFreeBlockJump);
}

TEST(KvEpoch, tracker_counts_bumps_from_the_generation_and_survives_missing_pool_size) {
  KvEpochTracker t(1000);
  EXPECT_EQ(t.observe(sample(1, 0, std::nullopt)), std::nullopt);  // first sample never bumps
  EXPECT_EQ(t.observe(sample(1, 1000, 800, 2)), std::nullopt);
  EXPECT_EQ(t.epoch(), 1000u);
  EXPECT_EQ(t.observe(sample(1, 0, std::nullopt)), std::nullopt);  // a scrape without the pool
  EXPECT_EQ(t.observe(sample(1, 1000, 800, 2)), std::nullopt);     // same pool again: no resize
  EXPECT_EQ(t.observe(sample(2, 0, std::nullopt)), EpochBump::kEngineRestart);
  EXPECT_EQ(t.epoch(), 1001u);
  EXPECT_EQ(t.observe(sample(2, 2000, 2000, 0)), std::nullopt);  // the new process's pool, learnt
  EXPECT_EQ(t.observe(sample(2, 1500, 1500, 0)), EpochBump::kPoolResize);
  EXPECT_EQ(t.epoch(), 1002u);
}

}  // namespace
}  // namespace cgn::cluster
