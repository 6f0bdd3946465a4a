// The node record's protobuf form (proto/cognitora/v1/agent.proto): round trips, absent values
// stay absent, and a malformed answer is an error naming the field.
#include "cluster/agent_health.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cluster/node_record_samples.h"
#include "cognitora/v1/agent.pb.h"

// GCC 12 at -O3 reports a false -Wrestrict inside std::string assignment inlined from protobuf's
// setters (a known GCC 12 false positive, as in node_record_test.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace cgn::cluster {
namespace {

namespace pb = cognitora::v1;

using samples::full_record;
using samples::minimal_record;

pb::NodeRecord proto_of(const NodeRecord& r) {
  pb::NodeRecord p;
  to_proto(r, &p);
  return p;
}

TEST(AgentGrpcRecord, round_trips_through_protobuf_bytes) {
  for (const auto& r : {full_record(), minimal_record()}) {
    pb::NodeRecord wire;
    ASSERT_TRUE(wire.ParseFromString(proto_of(r).SerializeAsString()));
    auto back = from_proto(wire);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(*back, r);
  }
}

TEST(AgentGrpcRecord, unknown_values_are_unset_fields_not_zeros) {
  auto p = proto_of(minimal_record());
  EXPECT_FALSE(p.has_gpu());
  EXPECT_FALSE(p.has_free_blocks());
  EXPECT_FALSE(p.has_queue_depth());
  EXPECT_FALSE(p.has_running());
  EXPECT_FALSE(p.has_power_watts());
  EXPECT_FALSE(p.has_energy_joules());
  EXPECT_EQ(p.role(), pb::NODE_ROLE_BOTH);
  auto full = proto_of(full_record());
  EXPECT_TRUE(full.has_free_blocks());
  EXPECT_EQ(full.free_blocks(), 20000u);
  EXPECT_EQ(full.gpu().name(), "NVIDIA H200");
  EXPECT_EQ(full.role(), pb::NODE_ROLE_PREFILL);
  // A known zero is still known.
  auto zero = minimal_record();
  zero.free_blocks = 0;
  EXPECT_TRUE(proto_of(zero).has_free_blocks());
}

TEST(AgentGrpcRecord, health_carries_the_engine_state) {
  AgentHealth h{full_record(), EngineState::kStarting, 1};
  pb::HealthResponse p;
  to_proto(h, &p);
  EXPECT_EQ(p.engine_state(), pb::ENGINE_STATE_STARTING);
  auto back = from_proto(p);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, h);
  for (auto s : {EngineState::kReady, EngineState::kUnhealthy, EngineState::kExited, EngineState::kRestarting,
                 EngineState::kStopped}) {
    h.engine_state = s;
    to_proto(h, &p);
    EXPECT_EQ(from_proto(p)->engine_state, s);
  }
}

void expect_rejected(const pb::NodeRecord& p, const std::string& field) {
  auto r = from_proto(p);
  ASSERT_FALSE(r.ok()) << field;
  EXPECT_EQ(r.error().code, RecordError::kShape);
  EXPECT_NE(r.error().message.find("'" + field + "'"), std::string::npos) << r.error().message;
}

TEST(AgentGrpcRecord, malformed_records_are_errors_naming_the_field) {
  auto p = proto_of(full_record());
  p.clear_node_id();
  expect_rejected(p, "node_id");
  p = proto_of(full_record());
  p.clear_address();
  expect_rejected(p, "address");
  p = proto_of(full_record());
  p.set_role(pb::NODE_ROLE_UNSPECIFIED);
  expect_rejected(p, "role");
  p = proto_of(full_record());
  p.set_role(static_cast<pb::NodeRole>(42));
  expect_rejected(p, "role");
  p = proto_of(full_record());
  p.set_queue_depth(-1);
  expect_rejected(p, "queue_depth");
  p = proto_of(full_record());
  p.set_running(std::numeric_limits<double>::quiet_NaN());
  expect_rejected(p, "running");
  p = proto_of(full_record());
  p.set_power_watts(std::numeric_limits<double>::infinity());
  expect_rejected(p, "power_watts");
  p = proto_of(full_record());
  p.set_energy_joules(-5);
  expect_rejected(p, "energy_joules");
  p = proto_of(full_record());
  p.set_version(std::string(513, 'v'));
  expect_rejected(p, "version");
  p = proto_of(full_record());
  for (int i = 0; i < 65; ++i) {
    p.add_models("m");
  }
  expect_rejected(p, "models");
  p = proto_of(full_record());
  p.add_models("");
  expect_rejected(p, "models");
}

TEST(AgentGrpcRecord, health_without_record_or_with_unknown_state_is_rejected) {
  pb::HealthResponse p;
  p.set_engine_state(pb::ENGINE_STATE_READY);
  auto r = from_proto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("'record'"), std::string::npos);
  to_proto(full_record(), p.mutable_record());
  p.set_engine_state(pb::ENGINE_STATE_UNSPECIFIED);
  r = from_proto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("engine_state"), std::string::npos);
}

}  // namespace
}  // namespace cgn::cluster
