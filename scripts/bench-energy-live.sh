#!/usr/bin/env bash
# Energy per routing policy, live: for each policy NODES fresh cgn-engine-sim (vLLM flavour, with
# the simulator's power model), each behind a cgn-agent whose power reader reads the simulator's
# dcgm-exporter page, and a cgn-router with the agents as static nodes; the same workload
# (scripts/demo_workload.py: tenants with long shared system prompts) through each router. Energy
# is read where an operator reads it — the router's cgn_cluster_node_energy_joules_total, summed
# over the nodes — as the delta between two of the router's mirror updates around the workload;
# tokens and requests are the router's own counters over the same span. The energy is
# **modelled** (docs/sim.md "Power model": idle 75 W, prefill 650 W, decode 450 W per simulated
# GPU), not measured. "Above idle" subtracts the fleet's idle draw (read from the router before the
# workload) over the span, which removes the idle time the span's alignment adds.
# Writes RESULT_DIR/energy-live.md (RESULT_DIR: a new bench/results/<date>-<revision>/ unless set;
# nothing is overwritten, scripts/lib/results.sh).
#
#   scripts/bench-energy-live.sh
# Environment: BIN [build/bin], NODES [3], POLICIES ["kv round_robin"], ROUNDS [6 requests per
#   tenant], TIME_SCALE [1.0 simulator speed].
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/procs.sh
source scripts/lib/results.sh
BIN=${BIN:-build/bin}
NODES=${NODES:-3}
POLICIES=${POLICIES:-kv round_robin}
ROUNDS=${ROUNDS:-6}
TIME_SCALE=${TIME_SCALE:-1.0}
MODEL=demo-model
for b in cgn-router cgn-agent cgn-engine-sim; do
  [[ -x $BIN/$b ]] || { echo "bench-energy-live: $BIN/$b is missing (make build)" >&2; exit 1; }
done
use_results_dir energy-live.md
prov=$(provenance "BIN=$BIN NODES=$NODES POLICIES=\"$POLICIES\" ROUNDS=$ROUNDS TIME_SCALE=$TIME_SCALE scripts/bench-energy-live.sh")
RUN_DIR=$(mktemp -d /tmp/cgn-bench-energy-live.XXXXXX)
pids=()
cleanup() {
  stop_pids
  rm -rf "$RUN_DIR"
}
trap cleanup EXIT

# sum_metric PAGE NAME: the sum of NAME's samples on a /metrics page ("" when it has none).
sum_metric() {
  awk -v n="$2" '($1 == n || index($1, n "{") == 1) { s += $2; k++ } END { if (k) printf "%.6f\n", s }' "$1"
}
# sum0 PAGE NAME: the same, 0 when the page has none (a counter before its first increment).
sum0() {
  local v
  v=$(sum_metric "$1" "$2")
  echo "${v:-0}"
}
scrape() { curl -fsS "http://127.0.0.1:$1/metrics" >"$2" 2>/dev/null || : >"$2"; }
# wait_mirror PORT OUT: until the router's fleet energy changes (a mirror update just happened,
# every node reporting energy); leaves that page in OUT. Up to 60 s.
wait_mirror() {
  local before now
  scrape "$1" "$2"
  before=$(sum_metric "$2" cgn_cluster_node_energy_joules_total)
  for _ in $(seq 1 600); do
    sleep 0.1
    scrape "$1" "$2"
    now=$(sum_metric "$2" cgn_cluster_node_energy_joules_total)
    local n
    n=$(grep -c '^cgn_cluster_node_energy_joules_total{' "$2" || true)
    if [[ -n $now && $now != "$before" && $n -ge $NODES ]]; then return 0; fi
  done
  echo "bench-energy-live: the router's energy gauges did not move in 60 s" >&2
  return 1
}

echo "bench-energy-live: $NODES nodes, policies $POLICIES, $ROUNDS rounds of the demo workload"
rows=()
start_all=$(date +%s)
for policy in $POLICIES; do
  urls=()
  for i in $(seq 1 "$NODES"); do
    "$BIN/cgn-engine-sim" --flavor vllm --model "$MODEL" --port 0 --port-file "$RUN_DIR/$policy-sim$i.port" \
      --time-scale "$TIME_SCALE" --log-level warn >"$RUN_DIR/$policy-sim$i.log" 2>&1 &
    pids+=($!)
  done
  : >"$RUN_DIR/$policy-router.toml"
  for i in $(seq 1 "$NODES"); do
    sim="http://127.0.0.1:$(wait_port_file "$RUN_DIR/$policy-sim$i.port")"
    cat >"$RUN_DIR/$policy-agent$i.toml" <<TOML
[agent]
node_id = "node$i"
listen = "127.0.0.1:0"
grpc_listen = "127.0.0.1:0"
scrape_interval_ms = 250

[engine]
kind = "external"
attach_kind = "vllm"
model = "$MODEL"
url = "$sim"

[power]
poll_interval_ms = 250

[[power.sources]]
name = "gpus"
kind = "dcgm_exporter"
url = "$sim/dcgm/metrics"
TOML
    ap=$(free_port)
    "$BIN/cgn-agent" --config "$RUN_DIR/$policy-agent$i.toml" --listen "127.0.0.1:$ap" \
      --grpc-port-file "$RUN_DIR/$policy-agent$i.grpc" --log-level warn >"$RUN_DIR/$policy-agent$i.log" 2>&1 &
    pids+=($!)
    urls+=("http://127.0.0.1:$ap")
  done
  for i in $(seq 1 "$NODES"); do
    g=$(wait_port_file "$RUN_DIR/$policy-agent$i.grpc")
    printf '[[router.nodes]]\nname = "node%s"\nurl = "%s"\nagent = "127.0.0.1:%s"\n\n' "$i" "${urls[$((i - 1))]}" "$g" \
      >>"$RUN_DIR/$policy-router.toml"
  done
  "$BIN/cgn-router" --config "$RUN_DIR/$policy-router.toml" --listen 127.0.0.1:0 \
    --port-file "$RUN_DIR/$policy-router.port" --policy "$policy" >"$RUN_DIR/$policy-router.log" 2>&1 &
  router_pid=$!
  pids+=("$router_pid")
  rp=$(wait_port_file "$RUN_DIR/$policy-router.port")

  wait_mirror "$rp" "$RUN_DIR/$policy-before.prom"
  t0=$(date +%s.%N)
  idle_w=$(sum_metric "$RUN_DIR/$policy-before.prom" cgn_cluster_node_power_watts)
  python3 scripts/demo_workload.py --endpoint "http://127.0.0.1:$rp" --model "$MODEL" --policy "$policy" \
    --rounds "$ROUNDS" >"$RUN_DIR/$policy-workload.log"
  # Two mirror updates after the workload: the second post-dates every reading of its last step.
  wait_mirror "$rp" "$RUN_DIR/$policy-after.prom"
  wait_mirror "$rp" "$RUN_DIR/$policy-after.prom"
  t1=$(date +%s.%N)
  b=$RUN_DIR/$policy-before.prom
  a=$RUN_DIR/$policy-after.prom
  rows+=("$policy $(sum_metric "$b" cgn_cluster_node_energy_joules_total) $(sum_metric "$a" cgn_cluster_node_energy_joules_total) \
$(sum0 "$b" cgn_router_generation_tokens_total) $(sum0 "$a" cgn_router_generation_tokens_total) \
$(sum0 "$b" cgn_router_prompt_tokens_total) $(sum0 "$a" cgn_router_prompt_tokens_total) \
$(sum0 "$b" cgn_router_requests_total) $(sum0 "$a" cgn_router_requests_total) $idle_w $t0 $t1 \
$(grep -m1 -o 'hit rate *[0-9.]*%' "$RUN_DIR/$policy-workload.log" | tr -d 'a-z %' || echo -)")
  echo "  $policy: done"
  # This policy's processes go before the next policy starts (fresh caches, a quiet machine).
  stop_pids
  pids=()
done

python3 - "$RESULT_DIR/energy-live.md" "$NODES" "$ROUNDS" "$TIME_SCALE" "$(($(date +%s) - start_all))" "$prov" "${rows[@]}" <<'PY'
import sys
out, nodes, rounds, ts, wall, prov = sys.argv[1:7]
R = {}
order = []
for row in sys.argv[7:]:
    f = row.split()
    p = f[0]
    e0, e1, g0, g1, q0, q1, r0, r1, idle, t0, t1 = map(float, f[1:12])
    de, gen, req = e1 - e0, g1 - g0, r1 - r0
    span = t1 - t0
    above = de - idle * span
    R[p] = dict(de=de, gen=gen, prompt=q1 - q0, req=req, idle=idle, span=span, above=above,
                hit=f[12] if len(f) > 12 else "-")
    order.append(p)
base = R.get("round_robin")
lines = ["# Energy per routing policy, live through router and agents (modelled energy)", "", prov,
         "- Wall time: %s s" % wall, "",
         "Per policy: %s fresh `cgn-engine-sim` (vLLM flavour, time scale %s), each behind a `cgn-agent` "
         "reading the simulator's dcgm-exporter page (`[[power.sources]] kind = \"dcgm_exporter\"`), a "
         "`cgn-router` with the agents as static nodes, and the same workload "
         "(`scripts/demo_workload.py --rounds %s`: five tenants with long shared system prompts). "
         "Energy is the router's `cgn_cluster_node_energy_joules_total` summed over the nodes, as the "
         "delta between two router mirror updates around the workload; tokens and requests are the "
         "router's counters over the same span." % (nodes, ts, rounds), "",
         "Energy is **modelled**, not measured: the simulator's power model (docs/sim.md \"Power "
         "model\") prices each simulated GPU at idle 75 W, prefill 650 W, decode 450 W (limit 700 W). "
         "*Above idle* subtracts the fleet's idle draw (the router's `cgn_cluster_node_power_watts` "
         "before the workload) over the span, which removes the idle tail that the span's alignment to "
         "the router's 5 s mirror adds; it is the prefill and decode work.", "",
         "| policy | requests | cache hit % | prompt tokens | generated tokens | span s | fleet energy J | J/request | J/token | above idle J | above idle J/request | above idle J/token | vs round_robin (above idle) |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for p in order:
    r = R[p]
    vs = "—"
    if base and p != "round_robin" and base["above"] > 0:
        vs = "%+.1f%%" % (100 * (r["above"] - base["above"]) / base["above"])
    lines.append("| %s | %d | %s | %d | %d | %.1f | %.0f | %.1f | %.2f | %.0f | %.1f | %.2f | %s |" % (
        p, r["req"], r["hit"], r["prompt"], r["gen"], r["span"], r["de"], r["de"] / r["req"] if r["req"] else 0,
        r["de"] / r["gen"] if r["gen"] else 0, r["above"], r["above"] / r["req"] if r["req"] else 0,
        r["above"] / r["gen"] if r["gen"] else 0, vs))
lines += ["", "J/token divides by generated tokens (the router's `cgn_router_generation_tokens_total`), "
          "as the router's `cgn_cluster_joules_per_token` does; the prefill energy KV-aware routing "
          "saves is in the numerator."]
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines[-(len(order) + 4):]))
PY
echo "bench-energy-live: wrote $RESULT_DIR/energy-live.md"
