#!/usr/bin/env bash
# Gossip state backend benchmark (docs/architecture/gossip.md, "Tests and benchmark"):
# `bench_state_gossip` simulates SIZES members in one process (in-memory network, explicit time,
# so host load does not skew the figures) and measures join, a new record reaching every member,
# a dead member detected by all, and bytes per member, against the first size as baseline.
# Writes RESULT_DIR/gossip.md (RESULT_DIR: a new bench/results/<date>-<revision>/ unless set;
# nothing is overwritten, scripts/lib/results.sh).
#
#   scripts/bench-gossip.sh [BUILD_DIR]
# Environment: SIZES [10,100]. 1,000 members take tens of minutes and ~2.6 GB of memory:
#   SIZES=10,1000 scripts/bench-gossip.sh (the 10-member row stays the baseline).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
source scripts/lib/results.sh
SIZES=${SIZES:-10,100}
BENCH=$BUILD_DIR/bench/bench_state_gossip
[[ -x $BENCH ]] || { echo "bench-gossip: $BENCH is missing (cmake --build $BUILD_DIR --target bench_state_gossip)" >&2; exit 1; }
use_results_dir gossip.md
cmd="SIZES=$SIZES scripts/bench-gossip.sh $BUILD_DIR"
prov=$(provenance "$cmd")  # the revision and load when the run starts
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "bench-gossip: $SIZES simulated members (progress on stderr)"
start=$(date +%s)
"$BENCH" --sizes "$SIZES" --markdown >"$tmp"
{
  echo "# Gossip state backend: simulated members"
  echo
  echo "$prov"
  echo "- Wall time: $(($(date +%s) - start)) s"
  echo
  echo "\`bench_state_gossip --sizes $SIZES --markdown\`: members in one process on an in-memory network"
  echo "with explicit time (each ticks on its own phase of the round; datagrams arrive at once, none"
  echo "lost), default protocol settings. **join**: from 3 seeds until every member knows every"
  echo "member; **new record everywhere**: a member publishes a record while every member republishes"
  echo "its load every 2 s, time until all hold it (median / max of 5); **dead detected by all**: a"
  echo "member stops, time until every live member declares it dead (median / max of 3); **bytes/s"
  echo "per member**: sent, with that churn and idle. The last column is against the first row."
  echo
  cat "$tmp"
} >"$RESULT_DIR/gossip.md"
echo "bench-gossip: wrote $RESULT_DIR/gossip.md"
