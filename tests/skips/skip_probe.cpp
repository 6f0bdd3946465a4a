// A GoogleTest executable for tests/skips/skip_exit_test.sh: one test of each outcome, picked
// with --gtest_filter, to check how src/testing/gtest_main.cpp reports them to ctest.
#include <gtest/gtest.h>

#include <cstdlib>

#include "testing/capability.h"

TEST(Probe, Passes) {
  SUCCEED();
}

TEST(Probe, Skips) {
  GTEST_SKIP() << "the probe skips";
}

TEST(Probe, Fails) {
  ADD_FAILURE() << "the probe fails";
}

TEST(Probe, NeedsAMissingCapability) {
  CGN_REQUIRE_CAPABILITY(false, "the probe's capability");
}
