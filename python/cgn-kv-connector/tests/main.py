"""Runs the connector's unittest modules matching a pattern, the way the repo's gtest main does:
exit 77 (ctest: skipped) when tests were skipped and none failed, and list the skipped ones in
$CGN_SKIP_LOG ("name: test" per line) for make test's summary.

    main.py NAME PATTERN
"""

import faulthandler
import os
import sys
import unittest

# A hung test prints every thread's stack and fails well before ctest's timeout would kill it
# silently (python/CMakeLists.txt gives the run 300 s).
HANG_S = 240


def main(argv):
    name, pattern = argv[1], argv[2]
    faulthandler.dump_traceback_later(HANG_S, exit=True)
    here = os.path.dirname(os.path.abspath(__file__))
    suite = unittest.defaultTestLoader.discover(here, pattern=pattern, top_level_dir=here)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if result.testsRun == 0:
        print(f"{name}: no test matched {pattern}", file=sys.stderr)
        return 1
    if not result.wasSuccessful():
        return 1
    if result.skipped:
        print(f"[ cgn-skip ] {len(result.skipped)} test(s) skipped in {name}; the run counts as skipped, not passed")
        log = os.environ.get("CGN_SKIP_LOG", "")
        lines = [f"{name}: {test.id()} ({reason})" for test, reason in result.skipped]
        for line in lines:
            print(f"[ cgn-skip ]   {line}")
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines))
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
