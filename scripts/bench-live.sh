#!/usr/bin/env bash
# Live against simulated: the same workload through `cgn-bench sim` (virtual time) and
# through `cgn-bench load` against real processes on loopback — per policy, NODES fresh
# cgn-engine-sim (vLLM flavour, --time-scale ENGINE_TS) behind its own cgn-router — then the
# agreement on hit rate and on the TTFT ratio between policies, written to
# $OUT/live-vs-sim.md (+ the two JSON reports).
#
# Environment (defaults in brackets):
#   BIN [build/bin]  OUT [a new bench/results/<UTC date>-<revision>]  WORKLOAD [small]  LIMIT [0 = all]
#   NODES [4]  LEVEL [0.85]  ENGINE_TS [1.0]  POLICIES ["kv round_robin"]  SEED [1]
#   TOLERANCE [0.10]  NAME [live-vs-sim]  (the output files' stem)
# ENGINE_TS < 1 runs the engines faster than modelled (and the arrivals with them); the client
# reports engine-model seconds either way. Exit status: 0 whether or not they agree (the report
# says); non-zero only when something failed to run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/procs.sh
BIN=${BIN:-build/bin}
source scripts/lib/results.sh
WORKLOAD=${WORKLOAD:-small}
LIMIT=${LIMIT:-0}
NODES=${NODES:-4}
LEVEL=${LEVEL:-0.85}
ENGINE_TS=${ENGINE_TS:-1.0}
POLICIES=${POLICIES:-kv round_robin}
SEED=${SEED:-1}
TOLERANCE=${TOLERANCE:-0.10}
NAME=${NAME:-live-vs-sim}
MODEL=meta-llama/Llama-3.1-8B-Instruct
for b in cgn-bench cgn-bench-load cgn-engine-sim cgn-router; do
  [[ -x $BIN/$b ]] || { echo "bench-live: $BIN/$b is missing (cmake --build build --target $b)" >&2; exit 1; }
done
# Nothing is overwritten (scripts/lib/results.sh): a given OUT must not hold this run's files.
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  refuse_overwrite "$OUT/$NAME.md" "$OUT/$NAME-live.json" "$OUT/$NAME-sim.json"
else
  OUT=$(new_results_dir)
fi
RUN_DIR=$(mktemp -d /tmp/cgn-bench-live.XXXXXX)
provenance "OUT=$OUT WORKLOAD=$WORKLOAD LIMIT=$LIMIT NODES=$NODES LEVEL=$LEVEL ENGINE_TS=$ENGINE_TS NAME=$NAME ${0#./}" \
  >"$RUN_DIR/provenance.md"
pids=()
cleanup() {
  stop_pids
  rm -rf "$RUN_DIR"
}
trap cleanup EXIT

wait_log() {  # FILE TEXT
  for _ in $(seq 1 300); do
    if grep -qF -- "$2" "$1" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "bench-live: timed out waiting for '$2' in $1" >&2; return 1
}

wl_args=(-w "$WORKLOAD" --limit "$LIMIT" --seed "$SEED")
sim_policies=$(echo "$POLICIES" | tr ' ' ',')
echo "bench-live: cgn-bench sim ${wl_args[*]} -n $NODES at level $LEVEL"
"$BIN/cgn-bench" sim "${wl_args[@]}" -n "$NODES" --levels "$LEVEL" --headline "$LEVEL" \
  --policies "$sim_policies" --md "$RUN_DIR/sim.md" --json "$OUT/$NAME-sim.json" >/dev/null

# Per policy: NODES fresh engines (empty caches, as each simulated run starts) and a router.
poll_ms=$(python3 -c "print(max(50, round(1000 * $ENGINE_TS)))")
targets=()
for policy in $POLICIES; do
  node_args=()
  for i in $(seq 1 "$NODES"); do
    "$BIN/cgn-engine-sim" --flavor vllm --model "$MODEL" --port 0 --port-file "$RUN_DIR/$policy-sim$i.port" \
      --time-scale "$ENGINE_TS" --log-level warn >"$RUN_DIR/$policy-sim$i.log" 2>&1 &
    pids+=($!)
  done
  for i in $(seq 1 "$NODES"); do
    p=$(wait_port_file "$RUN_DIR/$policy-sim$i.port")
    node_args+=(--node "http://127.0.0.1:$p")
  done
  "$BIN/cgn-router" --listen 127.0.0.1:0 --port-file "$RUN_DIR/$policy-router.port" --policy "$policy" \
    --threads 2 --poll-interval-ms "$poll_ms" "${node_args[@]}" >"$RUN_DIR/$policy-router.log" 2>&1 &
  pids+=($!)
  rp=$(wait_port_file "$RUN_DIR/$policy-router.port")
  for ((i = 1; i < ${#node_args[@]}; i += 2)); do
    wait_log "$RUN_DIR/$policy-router.log" "node in routing node=${node_args[$i]#http://}"
  done
  targets+=(--target "$policy=http://127.0.0.1:$rp")
done

echo "bench-live: cgn-bench load ${targets[*]} (engine time scale $ENGINE_TS)"
load_start=$(date +%s)
"$BIN/cgn-bench" load "${wl_args[@]}" -n "$NODES" --level "$LEVEL" --engine-time-scale "$ENGINE_TS" \
  "${targets[@]}" --md "$RUN_DIR/live.md" --json "$OUT/$NAME-live.json" >/dev/null
load_wall=$(($(date +%s) - load_start))

python3 - "$OUT/$NAME-sim.json" "$OUT/$NAME-live.json" "$RUN_DIR/sim.md" "$RUN_DIR/live.md" \
  "$OUT/$NAME.md" "$TOLERANCE" "$ENGINE_TS" "$load_wall" "$WORKLOAD" "$LIMIT" "$NODES" "$LEVEL" \
  "$RUN_DIR/provenance.md" <<'PY'
import json, sys, subprocess, datetime
sim_j, live_j, sim_md, live_md, out, tol, ets, wall, wl, limit, nodes, level, prov = sys.argv[1:14]
tol = float(tol)
S = {p["policy"]: p for p in json.load(open(sim_j))["levels"][0]["policies"]}
LJ = json.load(open(live_j))
L = {p["policy"]: p for p in LJ["levels"][0]["policies"]}
C = LJ.get("client", {})
pols = [p for p in S if p in L]
def rel(a, b):
    return abs(a - b) / b if b else float("inf") if a else 0.0
def verdict(r):
    return "agree" if r <= tol else "**disagree**"
rows = []
ok = True
rows.append("| measure | simulated | live | difference | within %d%% |" % round(tol * 100))
rows.append("|---|---:|---:|---:|---|")
for p in pols:
    s, l = S[p]["hit_rate"], L[p]["hit_rate"]
    r = rel(l, s); ok &= r <= tol
    rows.append("| hit rate, %s | %.1f%% | %.1f%% | %+.1f%% (rel.) | %s |" % (p, 100 * s, 100 * l, 100 * (l - s) / s if s else 0, verdict(r)))
base = pols[0]
for p in pols[1:]:
    for key, label in (("ttft_p50_s", "p50"), ("ttft_mean_s", "mean"), ("ttft_p90_s", "p90")):
        if not S[base][key] or not L[base][key]:
            continue
        s = S[p][key] / S[base][key]; l = L[p][key] / L[base][key]
        r = rel(l, s)
        if label != "p90":
            ok &= r <= tol
        rows.append("| TTFT %s %s / %s | %.2fx | %.2fx | %+.1f%% (rel.) | %s%s |" % (label, p, base, s, l, 100 * (l - s) / s, verdict(r), "" if label != "p90" else " (not judged)"))
rows.append("")
rows.append("Absolute TTFT (engine-model seconds), for reference:")
rows.append("")
rows.append("| policy | sim p50 | live p50 | sim mean | live mean | sim p90 | live p90 | live errors | live shed | client max send lag ms |")
rows.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for p in pols:
    rows.append("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %d | %d | %.1f |" % (p, S[p]["ttft_p50_s"], L[p]["ttft_p50_s"], S[p]["ttft_mean_s"], L[p]["ttft_mean_s"], S[p]["ttft_p90_s"], L[p]["ttft_p90_s"], L[p]["errors"], L[p]["shed"], 1e3 * C.get(p, {}).get("max_send_lag_s", 0)))
rows.append("")
rows.append("A client send lag of more than a few ms means this machine was starved of CPU during the run: every live latency then carries scheduling delay the model does not have.")
load = open("/proc/loadavg").read().split()[:3]
head = ["# Live against simulated: %s" % wl, "", open(prov).read(),
        "Generated by `scripts/bench-live.sh` at %s UTC (WORKLOAD=%s LIMIT=%s NODES=%s LEVEL=%s ENGINE_TS=%s); "
        "live runs took %s s wall; load average at the end %s." % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), wl, limit, nodes, level, ets, wall, " ".join(load)), "",
        "Judged: hit rate per policy and the TTFT ratio to %s (p50 and mean), relative difference <= %d%%. "
        "Verdict: **%s**." % (base, round(tol * 100), "all agree" if ok else "not all agree"), "",
        "## Agreement", ""]
text = "\n".join(head + rows) + "\n\n## Simulated (`cgn-bench sim`)\n\n" + open(sim_md).read() + "\n## Live (`cgn-bench load`)\n\n" + open(live_md).read()
open(out, "w").write(text)
print("\n".join(rows))
print("bench-live: %s" % ("all agree" if ok else "not all agree"))
PY
echo "bench-live: wrote $OUT/$NAME.md"
