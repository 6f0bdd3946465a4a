#!/usr/bin/env bash
# Chooses the kv policy's score weights on the EVEN half of the Mooncake conversation trace
# (`cgn-bench sim --sessions even`: sessions numbered by first request, the split defined once in
# src/bench_harness/workload.h), so that the report can show them on the odd half it never saw.
#
# A grid of the kv score's uncached_weight, kv policy only, at the headline level. The pick is
# the lowest TTFT p50 (the gain the routing targets are stated in); p90 and hit / ideal stand
# beside it. prefill_tokens_per_s, the node speed assumed when a node reports none, is a fact
# about hardware rather than a policy knob: it stays at its default unless RATES names values. Writes RESULT_DIR/tune-even.md and tune-even.jsonl (RESULT_DIR: a new
# bench/results/<date>-<revision>/ unless set; nothing is overwritten, scripts/lib/results.sh) and
# says whether the pick is the routing default.
#
#   scripts/bench-tune.sh [BUILD_DIR]
# Environment: JOBS [nproc], LEVEL [0.85], NODES [16], LIMIT [0 = the whole half],
#   WEIGHTS ["1 3 5 8 12"] (uncached_weight), RATES [the routing default] (prefill_tokens_per_s).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
BIN=$BUILD_DIR/bin/cgn-bench
source scripts/lib/results.sh
JOBS=${JOBS:-$(nproc)}
LEVEL=${LEVEL:-0.85}
NODES=${NODES:-16}
LIMIT=${LIMIT:-0}
WEIGHTS=${WEIGHTS:-1 3 5 8 12}
RATES=${RATES:-default}
[[ -x $BIN ]] || { echo "bench-tune: $BIN is missing (cmake --build $BUILD_DIR --target cgn-bench)" >&2; exit 1; }
use_results_dir tune-even.md tune-even.jsonl
cmd="JOBS=$JOBS LEVEL=$LEVEL NODES=$NODES LIMIT=$LIMIT WEIGHTS=\"$WEIGHTS\" RATES=\"$RATES\" scripts/bench-tune.sh $BUILD_DIR"
prov=$(provenance "$cmd")  # the revision and load when the run starts
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One run per grid point plus the defaults (no flags: "routing_defaults": true in its JSON).
points=("default")
for w in $WEIGHTS; do
  for r in $RATES; do
    points+=("$w:$r")
  done
done
echo "bench-tune: ${#points[@]} kv runs on the even sessions at level $LEVEL, -j $JOBS"
run_point() {
  local p=$1 args=()
  if [[ $p != default ]]; then
    args=(--uncached-weight "${p%%:*}")
    if [[ ${p##*:} != default ]]; then
      args+=(--prefill-rate "${p##*:}")
    fi
  fi
  "$BIN" sim -w conversation --sessions even -n "$NODES" --limit "$LIMIT" --levels "$LEVEL" \
    --headline "$LEVEL" --policies kv "${args[@]}" --json "$tmp/${p/:/_}.json" >/dev/null 2>"$tmp/${p/:/_}.err" ||
    { echo "bench-tune: run $p failed: $(tail -1 "$tmp/${p/:/_}.err")" >&2; return 1; }
}
export -f run_point
export BIN NODES LIMIT LEVEL tmp
printf '%s\n' "${points[@]}" | xargs -P "$JOBS" -I{} bash -c 'run_point "$@"' _ {}

# One JSON line per run: weights, whether they are the defaults, the kv policy's figures.
for p in "${points[@]}"; do
  python3 - "$tmp/${p/:/_}.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
kv = d["levels"][0]["policies"][0]
print(json.dumps({"uncached_weight": d["weights"]["uncached_weight"],
                  "prefill_tokens_per_s": d["weights"]["prefill_tokens_per_s"],
                  "routing_defaults": d["routing_defaults"], "requests": d["requests"],
                  "ttft_p50_s": kv["ttft_p50_s"], "ttft_p90_s": kv["ttft_p90_s"],
                  "hit_over_ideal": kv["hit_over_ideal"], "goodput_rps": kv["goodput_rps"]}))
EOF
done >"$RESULT_DIR/tune-even.jsonl"

python3 - "$RESULT_DIR/tune-even.jsonl" "$LEVEL" >"$tmp/table.md" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
default = next(r for r in rows if r["routing_defaults"])
grid = [r for r in rows if not r["routing_defaults"]]
# The defaults are also a grid point when the grid holds them: compare by value.
key = lambda r: (r["uncached_weight"], r["prefill_tokens_per_s"])
best = min(grid, key=lambda r: (r["ttft_p50_s"], r["ttft_p90_s"]))
print(f"{default['requests']} requests (the even sessions), kv policy, level {sys.argv[2]}. "
      "Pick: the lowest TTFT p50 (ties: p90).")
print()
print("| uncached_weight | prefill tokens/s | TTFT p50 s | p90 s | hit / ideal | goodput req/s | |")
print("|---:|---:|---:|---:|---:|---:|---|")
for r in sorted(grid, key=key):
    mark = []
    if key(r) == key(best):
        mark.append("**pick**")
    if key(r) == key(default):
        mark.append("default")
    print(f"| {r['uncached_weight']:g} | {r['prefill_tokens_per_s']:.0f} | {r['ttft_p50_s']:.3f} | "
          f"{r['ttft_p90_s']:.3f} | {r['hit_over_ideal']:.2f} | {r['goodput_rps']:.2f} | {' '.join(mark)} |")
print()
if key(best) == key(default):
    print(f"The pick is the routing default (uncached_weight {default['uncached_weight']:g}, "
          f"prefill_tokens_per_s {default['prefill_tokens_per_s']:.0f}).")
else:
    gain = default["ttft_p50_s"] / best["ttft_p50_s"]
    print(f"**The pick is not the routing default** (uncached_weight {default['uncached_weight']:g}, "
          f"prefill_tokens_per_s {default['prefill_tokens_per_s']:.0f}: p50 {default['ttft_p50_s']:.3f} s); "
          f"the pick's p50 is {gain:.3f}x better on this half.")
EOF

{
  echo "# Routing defaults chosen on the even half of the conversation trace"
  echo
  echo "$prov"
  echo
  cat "$tmp/table.md"
} >"$RESULT_DIR/tune-even.md"
echo "bench-tune: wrote $RESULT_DIR/tune-even.md"
