#!/usr/bin/env bash
# Energy per routing policy in the cluster simulator (`cgn-bench sim`): the same trace and the
# same arrivals for every policy, fleet J/token and J/request from the simulator's power model
# (docs/sim.md "Power model": modelled, not measured; the report prints the model's figures beside
# the numbers). KV-aware routing skips prefill work; the "vs round_robin" column is what that
# saves. Writes RESULT_DIR/energy.md (RESULT_DIR: a new bench/results/<date>-<revision>/ unless
# set; nothing is overwritten, scripts/lib/results.sh).
#
#   scripts/bench-energy.sh [BUILD_DIR]
# Environment: WORKLOAD [conversation], NODES [16], LEVELS ["0.5 0.85"], LIMIT [0 = all requests],
#   POLICIES [kv,round_robin,least_load,random,session].
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
BIN=$BUILD_DIR/bin/cgn-bench
source scripts/lib/results.sh
WORKLOAD=${WORKLOAD:-conversation}
NODES=${NODES:-16}
LEVELS=${LEVELS:-0.5 0.85}
LIMIT=${LIMIT:-0}
POLICIES=${POLICIES:-kv,round_robin,least_load,random,session}
[[ -x $BIN ]] || { echo "bench-energy: $BIN is missing (cmake --build $BUILD_DIR --target cgn-bench)" >&2; exit 1; }
use_results_dir energy.md energy.json
cmd="WORKLOAD=$WORKLOAD NODES=$NODES LEVELS=\"$LEVELS\" LIMIT=$LIMIT POLICIES=$POLICIES scripts/bench-energy.sh $BUILD_DIR"
prov=$(provenance "$cmd")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
read -r -a levels <<<"$LEVELS"
start=$(date +%s)
echo "bench-energy: $WORKLOAD, $NODES nodes, levels $LEVELS, policies $POLICIES"
"$BIN" sim -w "$WORKLOAD" -n "$NODES" --limit "$LIMIT" --levels "${levels[@]}" --policies "$POLICIES" \
  --md "$tmp/energy.md" --json "$RESULT_DIR/energy.json" >/dev/null
{
  echo "# Energy per routing policy, simulated (modelled energy)"
  echo
  echo "$prov"
  echo "- Wall time: $(($(date +%s) - start)) s"
  echo
  echo "Every policy replays the same arrivals. Energy is **modelled**: each engine's prefill and"
  echo "decode step time and idle time priced with the simulator's power model (docs/sim.md,"
  echo "\"Power model\"), not measured; the figures are printed above each energy table."
  echo
  sed -e 's/^#/##/' "$tmp/energy.md"
} >"$RESULT_DIR/energy.md"
echo "bench-energy: wrote $RESULT_DIR/energy.md"
