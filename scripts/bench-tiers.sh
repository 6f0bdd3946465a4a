#!/usr/bin/env bash
# What KV offload tiers buy (`cgn-bench sim --tiers`, src/bench_harness/tier_compare.h; method and
# reading: docs/benchmarks.md, "KV offload tiers"): the held-out (odd) sessions of the Mooncake
# conversation trace on 16 nodes at the fixed levels 0.5 0.85 1.0, comparing kv routing without
# tiers, kv routing with tiers, round_robin with tiers and disagg-cgn (4 prefill + 12 decode
# nodes, every node offloading). Writes RESULT_DIR/tiers.md (RESULT_DIR: a new
# bench/results/<date>-<revision>/ unless set; nothing is overwritten, scripts/lib/results.sh).
#
#   scripts/bench-tiers.sh [BUILD_DIR]
# Environment: LEVELS ["0.5 0.85 1.0"], RAM_BLOCKS [27500], SSD_BLOCKS [55000] (per node),
#   PD_PREFILL [4]. Memory: about 16 x (RAM_BLOCKS + SSD_BLOCKS) x 4 KiB (5.4 GB by default).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
BIN=$BUILD_DIR/bin/cgn-bench
source scripts/lib/results.sh
LEVELS=${LEVELS:-0.5 0.85 1.0}
RAM_BLOCKS=${RAM_BLOCKS:-27500}
SSD_BLOCKS=${SSD_BLOCKS:-55000}
PD_PREFILL=${PD_PREFILL:-4}
[[ -x $BIN ]] || { echo "bench-tiers: $BIN is missing (cmake --build $BUILD_DIR --target cgn-bench)" >&2; exit 1; }
use_results_dir tiers.md
cmd="LEVELS=\"$LEVELS\" RAM_BLOCKS=$RAM_BLOCKS SSD_BLOCKS=$SSD_BLOCKS PD_PREFILL=$PD_PREFILL scripts/bench-tiers.sh $BUILD_DIR"
prov=$(provenance "$cmd")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
read -r -a levels <<<"$LEVELS"
start=$(date +%s)
echo "bench-tiers: conversation trace, odd sessions, 16 nodes, levels $LEVELS"
"$BIN" sim -w conversation -n 16 --sessions odd --levels "${levels[@]}" --tiers --tier-ram-blocks "$RAM_BLOCKS" \
  --tier-ssd-blocks "$SSD_BLOCKS" --tier-pd-prefill "$PD_PREFILL" --md "$tmp/tiers.md" >/dev/null
{
  echo "# KV offload tiers, simulated"
  echo
  echo "$prov"
  echo "- Wall time: $(($(date +%s) - start)) s"
  echo
  echo "Mooncake conversation trace, held-out (odd) sessions, 16 nodes; the same arrivals per level."
  echo "Method and reading: docs/benchmarks.md (\"KV offload tiers\")."
  echo
  sed -e 's/^#/##/' "$tmp/tiers.md"
} >"$RESULT_DIR/tiers.md"
echo "bench-tiers: wrote $RESULT_DIR/tiers.md"
