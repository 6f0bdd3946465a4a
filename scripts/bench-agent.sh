#!/usr/bin/env bash
# Agent benchmarks (method: bench/agent/README.md):
#   1. data-path overhead: router -> agent -> simulator against router -> simulator, interleaved
#      in one run, buffered and streamed chat; p50/p99 added latency (target <= 100 us at p50);
#   2. etcd load: NODES publishers against a real etcd at RPS requests/s each; txns and keys
#      written per second per agent against the one-txn-per-interval bound; lease stalls.
# Writes RESULT_DIR/agent-overhead.md and RESULT_DIR/agent-etcd-load.md (RESULT_DIR: a new
# bench/results/<date>-<revision>/ unless set; nothing is overwritten, see scripts/lib/results.sh).
# Usage: scripts/bench-agent.sh [BUILD_DIR]. Not part of `make test` (about a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
BIN=${BIN_DIR:-$PWD/$BUILD_DIR/bin}
source scripts/lib/results.sh
REQUESTS=${REQUESTS:-2000}
NODES=${NODES:-4}
RPS=${RPS:-50}
SECONDS_RUN=${SECONDS_RUN:-60}
use_results_dir agent-overhead.md agent-etcd-load.md
cmd="REQUESTS=$REQUESTS NODES=$NODES RPS=$RPS SECONDS_RUN=$SECONDS_RUN scripts/bench-agent.sh $BUILD_DIR"

out=$RESULT_DIR/agent-overhead.md
{
  echo "# Agent data-path overhead"
  echo
  provenance "$cmd"
  echo
  echo "Method: bench/agent/README.md."
  echo
} > "$out"
"$BIN/cgn-agent-bench" overhead --bin-dir "$BIN" --requests "$REQUESTS" --out "$out"

out=$RESULT_DIR/agent-etcd-load.md
{
  echo "# Agent etcd publishing load"
  echo
  provenance "$cmd"
  echo
  echo "Method: bench/agent/README.md."
  echo
} > "$out"
"$BIN/cgn-agent-bench" etcd --nodes "$NODES" --rps "$RPS" --seconds "$SECONDS_RUN" --out "$out"
