// Tests that need something the machine may lack (promtool, network namespaces, root).
//
// Where it is missing the test skips, visibly (ctest reports the executable as skipped and
// make test prints the count), unless skipping is forbidden: CI=true (the CI machine has every
// capability these tests ask for) or CGN_NO_SKIP=1. Then the test fails and says what is missing.
#pragma once

#include <gtest/gtest.h>

namespace cgn::testing {

// The exit code of a GoogleTest executable whose tests passed except some that were skipped;
// ctest's SKIP_RETURN_CODE (cmake/Helpers.cmake).
inline constexpr int kSkipExitCode = 77;

// False under CI=true or CGN_NO_SKIP=1 (non-empty, not "0").
bool skips_allowed();

}  // namespace cgn::testing

// Skips the current test when `available` is false, or fails it where skips are not allowed.
// `what` streams into the message: CGN_REQUIRE_CAPABILITY(has_promtool(), "promtool (Debian prometheus)").
#define CGN_REQUIRE_CAPABILITY(available, what)                                             \
  do {                                                                                      \
    if (!(available)) {                                                                     \
      if (::cgn::testing::skips_allowed()) {                                                \
        GTEST_SKIP() << what << " is not available here; skipped (CI=true makes it fail)";  \
      } else {                                                                              \
        FAIL() << what << " is required here (CI=true or CGN_NO_SKIP=1) but not available"; \
      }                                                                                     \
    }                                                                                       \
  } while (false)
