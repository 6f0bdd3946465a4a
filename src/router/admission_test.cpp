#include "router/admission.h"

#include <gtest/gtest.h>

namespace cgn::router {
namespace {

TEST(Admission, CapsInFlightPerModelAndRoleAndReleasesOnSlotEnd) {
  config::AdmissionConfig cfg;
  cfg.max_queue = 2;
  Admission a(cfg);
  auto s1 = a.try_acquire("m", "both");
  auto s2 = a.try_acquire("m", "both");
  EXPECT_TRUE(s1.held());
  EXPECT_TRUE(s2.held());
  EXPECT_FALSE(a.try_acquire("m", "both").held());
  EXPECT_TRUE(a.try_acquire("other", "both").held());  // its own counter
  EXPECT_EQ(a.inflight("m", "both"), 2u);
  s1.release();
  EXPECT_EQ(a.inflight("m", "both"), 1u);
  {
    auto s3 = a.try_acquire("m", "both");
    EXPECT_TRUE(s3.held());
  }
  Admission::Slot moved = std::move(s2);
  EXPECT_FALSE(s2.held());  // NOLINT(bugprone-use-after-move): moved-from slots are empty by contract
  EXPECT_EQ(a.inflight("m", "both"), 1u);
  moved = Admission::Slot();
  EXPECT_EQ(a.inflight("m", "both"), 0u);
}

TEST(Admission, PerModelOverridesAndZeroMeansUnlimited) {
  config::AdmissionConfig cfg;
  cfg.max_queue = 0;
  cfg.models["small"].max_queue = 1;
  Admission a(cfg);
  std::vector<Admission::Slot> held;
  for (int i = 0; i < 100; ++i) {
    held.push_back(a.try_acquire("big", "both"));
    EXPECT_TRUE(held.back().held());
  }
  auto s = a.try_acquire("small", "both");
  EXPECT_TRUE(s.held());
  EXPECT_FALSE(a.try_acquire("small", "both").held());
}

}  // namespace
}  // namespace cgn::router
