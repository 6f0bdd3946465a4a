#!/usr/bin/env bash
# Before and after a change, in one run: builds an older revision beside this checkout and
# measures both on the same machine at the same time, so every number is read as a ratio.
#   1. router req/s against nginx, both routers alternating against the same nginx, upstream and
#      core (scripts/bench-proxy.sh with BASE_BIN, closed loop only);
#   2. the routing decision against raw BLAKE3 of 16 KiB (bench_routing), base and head
#      alternating ROUTING_RUNS times each;
#   3. the conversation trace's headline row (cgn-bench sim, 16 nodes, level 0.85, kv and
#      round_robin; virtual time, so the numbers do not depend on the machine);
#   4. the longest function and the longest main() in src/ (scripts/check-function-size.sh).
# Writes RESULT_DIR/revisions.md (a new bench/results/<date>-<revision>/ unless RESULT_DIR is set;
# nothing is overwritten) and proxy-ab.md beside it.
#
#   scripts/bench-revisions.sh BASE_REV [BUILD_DIR]
# Knobs: ROUTING_RUNS (3), PROXY_RUNS (5), JOBS (nproc), LIMIT (0: the whole trace).
# Takes about 10 minutes on 2 cores with a warm ccache (the base build dominates when it is cold).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE_REV=${1:?usage: scripts/bench-revisions.sh BASE_REV [BUILD_DIR]}
BUILD_DIR=${2:-build}
ROUTING_RUNS=${ROUTING_RUNS:-3}
PROXY_RUNS=${PROXY_RUNS:-5}
JOBS=${JOBS:-$(nproc)}
LIMIT=${LIMIT:-0}
source scripts/lib/results.sh
base_sha=$(git rev-parse --verify "$BASE_REV^{commit}") || { echo "bench-revisions: no such revision: $BASE_REV" >&2; exit 2; }
head_sha=$(git rev-parse HEAD)
use_results_dir revisions.md proxy-ab.md
OUT=$RESULT_DIR
CMD="ROUTING_RUNS=$ROUTING_RUNS PROXY_RUNS=$PROXY_RUNS LIMIT=$LIMIT scripts/bench-revisions.sh $BASE_REV $BUILD_DIR"
PROVENANCE=$(provenance "$CMD")  # the revision and load when the run starts

WORK=$(mktemp -d /tmp/cgn-bench-revisions-XXXXXX)
cleanup() {
  git worktree remove --force "$WORK/base" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache} CCACHE_NOHASHDIR=1
targets=(cgn-router cgn-bench bench_routing)
proxy_targets=(cgn-loadgen cgn-canned-upstream)

echo "bench-revisions: building the base ${base_sha:0:10} in $WORK/base"
git worktree add --detach -q "$WORK/base" "$base_sha"
t0=$(date +%s)
(cd "$WORK/base" && CCACHE_BASEDIR=$PWD cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >"$WORK/base-configure.log" 2>&1 &&
  CCACHE_BASEDIR=$PWD cmake --build build -j "$JOBS" --target "${targets[@]}" >"$WORK/base-build.log" 2>&1) ||
  { tail -20 "$WORK/base-build.log" "$WORK/base-configure.log" >&2 2>/dev/null; exit 1; }
echo "bench-revisions: building the head ${head_sha:0:10} in $BUILD_DIR"
CCACHE_BASEDIR=$PWD cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}" "${proxy_targets[@]}" >"$WORK/head-build.log" 2>&1 ||
  { tail -20 "$WORK/head-build.log" >&2; exit 1; }
build_s=$(($(date +%s) - t0))

echo "bench-revisions: router against nginx (base and head alternating)"
BASE_BIN=$WORK/base/build/bin CLOSED_ONLY=1 RUNS=$PROXY_RUNS RESULT_DIR=$OUT scripts/bench-proxy.sh "$BUILD_DIR" >"$WORK/proxy.log" 2>&1 ||
  { tail -20 "$WORK/proxy.log" >&2; exit 1; }
proxy_line=$(grep -m1 '^router / base' "$OUT/proxy-ab.md")
rps_line=$(grep -m1 '^closed loop' "$OUT/proxy-ab.md")

echo "bench-revisions: routing decision against raw BLAKE3 ($ROUTING_RUNS alternating runs each)"
for i in $(seq 1 "$ROUTING_RUNS"); do
  for side in base head; do
    if [[ $side == base ]]; then bin=$WORK/base/build/bench/bench_routing; else bin=$BUILD_DIR/bench/bench_routing; fi
    "$bin" 2>&1 | grep '^{' | sed "s/^/$side /" >>"$WORK/routing.txt"
  done
done

echo "bench-revisions: conversation trace, level 0.85 (both revisions at once, virtual time)"
sim() {  # SIDE BIN
  "$2" sim -w conversation -j 1 --levels 0.85 --policies kv,round_robin --limit "$LIMIT" --md "$WORK/conv-$1.md" \
    >"$WORK/conv-$1.log" 2>&1 || { tail -5 "$WORK/conv-$1.log" >&2; return 1; }
}
sim base "$WORK/base/build/bin/cgn-bench" &
base_pid=$!
sim head "$BUILD_DIR/bin/cgn-bench"
wait "$base_pid"

echo "bench-revisions: function sizes"
ROOT=$WORK/base scripts/check-function-size.sh --report >"$WORK/sizes-base.txt"
scripts/check-function-size.sh --report >"$WORK/sizes-head.txt"

python3 - "$WORK" "$OUT/revisions.md" "${base_sha:0:10}" "${head_sha:0:10}" "$PROVENANCE" "$proxy_line" "$rps_line" "$build_s" <<'EOF'
import json, statistics, sys
work, out, base, head, prov, proxy_line, rps_line, build_s = sys.argv[1:]
runs = {"base": [], "head": []}
for line in open(f"{work}/routing.txt"):
    side, _, js = line.partition(" ")
    runs[side].append(json.loads(js))
def med(side, key):
    return statistics.median(r[key] for r in runs[side])
def conv_rows(side):
    rows = {}
    for line in open(f"{work}/conv-{side}.md"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 10 and cells[0] in ("kv", "round_robin"):
            rows[cells[0]] = cells
    return rows
header = None
for line in open(f"{work}/conv-head.md"):
    if line.startswith("| policy | TTFT"):
        header = line.strip()
        break
def sizes(side):
    lines = open(f"{work}/sizes-{side}.txt").read().splitlines()
    return lines[0], lines[-1].removeprefix("longest main(): ")
w = open(out, "w")
w.write(f"# Before and after: {base} against {head}\n\n{prov}\n\n")
w.write(f"Both revisions were built and measured in this one run (build {build_s} s with the ccache at hand); "
        "every wall-time number compares runs of this run, alternating.\n\n")
w.write("## Router against nginx (closed loop, req/s)\n\n")
w.write(f"{rps_line}\n\n{proxy_line} (head = `router`, base = `base router`; proxy-ab.md has the runs)\n\n")
w.write(f"## Routing decision against raw BLAKE3 of 16 KiB (median of {len(runs['head'])} runs each)\n\n")
w.write("| revision | BLAKE3 p50 ns | p99 ns | decision p50 ns | p99 ns | decision / BLAKE3 p50 | p99 |\n|---|---:|---:|---:|---:|---:|---:|\n")
for side, rev in (("base", base), ("head", head)):
    w.write(f"| {side} {rev} | {med(side, 'blake3_p50_ns'):.0f} | {med(side, 'blake3_p99_ns'):.0f} | "
            f"{med(side, 'decision_p50_ns'):.0f} | {med(side, 'decision_p99_ns'):.0f} | "
            f"{med(side, 'p50_ratio'):.2f}x | {med(side, 'p99_ratio'):.2f}x |\n")
w.write("\n## Conversation trace, 16 nodes, level 0.85 (cgn-bench sim, virtual time)\n\n")
cols = header.count("|") - 1
w.write("| revision " + header + "\n|---" + "|---" * cols + "|\n")
for side, rev in (("base", base), ("head", head)):
    rows = conv_rows(side)
    for policy in ("kv", "round_robin"):
        w.write(f"| {side} {rev} | " + " | ".join(rows[policy]) + " |\n")
w.write("\n## Function sizes in src/ (tests excepted; lines, where, name)\n\n| revision | longest function | longest main() |\n|---|---|---|\n")
for side, rev in (("base", base), ("head", head)):
    f, m = sizes(side)
    w.write(f"| {side} {rev} | {f} | {m} |\n")
w.close()
print(open(out).read())
EOF
