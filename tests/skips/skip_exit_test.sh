#!/usr/bin/env bash
# A skipped GoogleTest reaches ctest as skipped (exit 77), never as passed, and never hides a
# failure; a missing capability fails instead of skipping under CI=true or CGN_NO_SKIP=1.
set -uo pipefail
probe=${1:?usage: skip_exit_test.sh PROBE_BINARY}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fails=0
expect() {  # want_rc, filter, env...
  local want=$1 filter=$2
  shift 2
  env -u CI -u CGN_NO_SKIP CGN_SKIP_LOG="$log" "$@" "$probe" --gtest_filter="$filter" >/dev/null 2>&1
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $filter ${*:-} exited $rc, want $want"
    fails=1
  fi
}
expect 0 'Probe.Passes'
expect 77 'Probe.Passes:Probe.Skips'
expect 1 'Probe.Skips:Probe.Fails'
expect 77 'Probe.NeedsAMissingCapability'
expect 1 'Probe.NeedsAMissingCapability' CI=true
expect 1 'Probe.NeedsAMissingCapability' CGN_NO_SKIP=1
expect 77 'Probe.NeedsAMissingCapability' CI=false
if ! grep -qx 'cgn_skip_probe: Probe.Skips' "$log"; then
  echo "FAIL: the skip log does not name Probe.Skips:"
  cat "$log"
  fails=1
fi
[ "$fails" -eq 0 ] && echo "skip reporting: ok"
exit "$fails"
