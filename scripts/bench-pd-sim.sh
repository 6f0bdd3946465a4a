#!/usr/bin/env bash
# Aggregated against disaggregated prefill/decode in virtual time (`cgn-bench sim --pd-prefill`,
# src/bench_harness/cluster_sim_pd.h; method: docs/architecture/disaggregation.md, "Benchmark"):
# the llm-d shape on 8 nodes with 2, 3 and 4 prefill nodes at levels 0.5 0.85 1.0 1.2, and the
# first LIMIT requests of the Mooncake conversation trace on 16 nodes with 4, 8 and 12 prefill
# nodes at 0.5 0.85 1.0. Writes RESULT_DIR/pd-sim.md (RESULT_DIR: a new
# bench/results/<date>-<revision>/ unless set; nothing is overwritten, scripts/lib/results.sh).
#
#   scripts/bench-pd-sim.sh [BUILD_DIR]
# Environment: JOBS [nproc], LIMIT [4000] (conversation requests), LLMD_LIMIT [0 = all],
#   LLMD_LEVELS ["0.5 0.85 1.0 1.2"], CONV_LEVELS ["0.5 0.85 1.0"].
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
BIN=$BUILD_DIR/bin/cgn-bench
source scripts/lib/results.sh
JOBS=${JOBS:-$(nproc)}
LIMIT=${LIMIT:-4000}
LLMD_LIMIT=${LLMD_LIMIT:-0}
LLMD_LEVELS=${LLMD_LEVELS:-0.5 0.85 1.0 1.2}
CONV_LEVELS=${CONV_LEVELS:-0.5 0.85 1.0}
[[ -x $BIN ]] || { echo "bench-pd-sim: $BIN is missing (cmake --build $BUILD_DIR --target cgn-bench)" >&2; exit 1; }
use_results_dir pd-sim.md
cmd="JOBS=$JOBS LIMIT=$LIMIT LLMD_LIMIT=$LLMD_LIMIT LLMD_LEVELS=\"$LLMD_LEVELS\" CONV_LEVELS=\"$CONV_LEVELS\" scripts/bench-pd-sim.sh $BUILD_DIR"
prov=$(provenance "$cmd")  # the revision and load when the run starts
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
read -r -a llmd_levels <<<"$LLMD_LEVELS"
read -r -a conv_levels <<<"$CONV_LEVELS"

start=$(date +%s)
echo "bench-pd-sim: llm-d shape, 8 nodes, 2/3/4 prefill nodes at levels $LLMD_LEVELS"
"$BIN" sim -w llmd -n 8 --limit "$LLMD_LIMIT" --pd-prefill 2 3 4 --levels "${llmd_levels[@]}" -j "$JOBS" \
  --md "$tmp/llmd.md" >/dev/null
echo "bench-pd-sim: conversation trace (first $LIMIT requests), 16 nodes, 4/8/12 prefill nodes at levels $CONV_LEVELS"
"$BIN" sim -w conversation -n 16 --limit "$LIMIT" --pd-prefill 4 8 12 --levels "${conv_levels[@]}" -j "$JOBS" \
  --md "$tmp/conversation.md" >/dev/null
{
  echo "# Aggregated against disaggregated prefill/decode, simulated"
  echo
  echo "$prov"
  echo "- Wall time: $(($(date +%s) - start)) s"
  echo
  echo "Same node count and arrivals per level; aggregated = every node \`both\` under the kv policy;"
  echo "\`pd P:D\` = P prefill and D decode nodes with the router's two legs replayed in virtual time."
  echo "Method and reading: docs/architecture/disaggregation.md (\"Benchmark\")."
  echo
  echo "## llm-d shape, 8 nodes"
  echo
  sed -e 's/^#/##/' "$tmp/llmd.md"
  echo
  echo "## Mooncake conversation trace, first $LIMIT requests, 16 nodes"
  echo
  sed -e 's/^#/##/' "$tmp/conversation.md"
} >"$RESULT_DIR/pd-sim.md"
echo "bench-pd-sim: wrote $RESULT_DIR/pd-sim.md"
