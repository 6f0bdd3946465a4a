// The main of every GoogleTest executable (cgn_test() links it instead of gtest_main).
//
// GoogleTest exits 0 when tests were skipped, so ctest would count a skipped test as passed. This
// main exits with kSkipExitCode when nothing failed but something was skipped; cgn_test()
// registers that code as ctest's SKIP_RETURN_CODE, so ctest reports the executable as skipped,
// never as passed, and a failure still reads as a failure. The skipped tests' names are printed
// and appended to $CGN_SKIP_LOG (one "executable: Suite.Test" per line) for make test's summary.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "testing/capability.h"

namespace {

// "Suite.Test" of every test that ran and was skipped.
std::vector<std::string> skipped_tests(const ::testing::UnitTest& unit) {
  std::vector<std::string> names;
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const ::testing::TestInfo& info = *suite.GetTestInfo(t);
      if (info.should_run() && info.result()->Skipped()) {
        names.push_back(std::string(suite.name()) + "." + info.name());
      }
    }
  }
  return names;
}

// Prints the skipped tests of executable `argv0` and appends them to $CGN_SKIP_LOG.
void report_skipped(const std::string& argv0, const std::vector<std::string>& names) {
  std::string exe = argv0;
  if (const auto slash = exe.find_last_of('/'); slash != std::string::npos) {
    exe.erase(0, slash + 1);
  }
  std::printf("[ cgn-skip ] %zu test(s) skipped in %s; the run counts as skipped, not passed\n", names.size(),
              exe.c_str());
  const char* log = std::getenv("CGN_SKIP_LOG");  // NOLINT(concurrency-mt-unsafe): single-threaded here
  std::FILE* f = (log != nullptr && *log != '\0') ? std::fopen(log, "a") : nullptr;
  for (const auto& n : names) {
    std::printf("[ cgn-skip ]   %s\n", n.c_str());
    if (f != nullptr) {
      std::fprintf(f, "%s: %s\n", exe.c_str(), n.c_str());
    }
  }
  if (f != nullptr) {
    std::fclose(f);
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (rc != 0 || unit.skipped_test_count() == 0) {
    return rc;
  }
  report_skipped(argv[0], skipped_tests(unit));
  return cgn::testing::kSkipExitCode;
}
