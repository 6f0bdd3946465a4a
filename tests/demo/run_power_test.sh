#!/usr/bin/env bash
# `make run`'s topology carries power: the local cluster (scripts/local-cluster.sh, one round per
# tenant) keeps serving after its demo; its router must then report cgn_cluster_node_power_watts
# (at least the simulator's idle draw) and cgn_cluster_node_energy_joules_total for every node,
# the fleet total, and — with a little traffic — cgn_cluster_joules_per_token, the figures the
# dashboard's power and J/token charts plot.
#   tests/demo/run_power_test.sh BIN_DIR
set -euo pipefail
bin="${1:?usage: run_power_test.sh BIN_DIR}"
cd "$(dirname "$0")/../.."
out=$(mktemp)
page=$(mktemp)
CGN_PORT=0 CGN_DEMO_ROUNDS=1 BIN="$bin" scripts/local-cluster.sh >"$out" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$out" "$page"' EXIT
port=""
for _ in $(seq 1 1200); do  # the demo runs five policies first: up to 120 s
  port=$(sed -n 's|^Cognitora is serving on http://127.0.0.1:\([0-9]*\).*|\1|p' "$out")
  [[ -n $port ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[[ -n $port ]] || { cat "$out"; echo "FAIL: make run did not reach serving"; exit 1; }
url="http://127.0.0.1:$port"
nodes=3
ok=0
for _ in $(seq 1 300); do  # the router's energy gauges move every 5 s: up to 60 s
  curl -fsS -o /dev/null "$url/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"demo-model","messages":[{"role":"user","content":"Hello!"}],"max_tokens":16}' || true
  curl -fsS "$url/metrics" >"$page" 2>/dev/null || true
  watts=$(grep -c '^cgn_cluster_node_power_watts{node="node[0-9]*"} [0-9]' "$page" || true)
  energy=$(grep -c '^cgn_cluster_node_energy_joules_total{node="node[0-9]*"} [0-9]' "$page" || true)
  if [[ $watts -ge $nodes && $energy -ge $nodes ]] && grep -q '^cgn_cluster_joules_per_token [0-9]' "$page"; then
    ok=1
    break
  fi
  sleep 0.2
done
grep '^cgn_cluster_\(node_power_watts\|node_energy_joules_total\|power_watts_total\|joules_per_token\)' "$page" || true
[[ $ok == 1 ]] || { cat "$out"; echo "FAIL: the router lacks power or J/token for some of the $nodes nodes"; exit 1; }
# Every node draws at least the simulated GPU's idle watts (never 0 W, never absent).
awk '/^cgn_cluster_node_power_watts\{/ { n++; if ($2 + 0 <= 0) bad = 1 } END { exit !(n >= 3 && !bad) }' "$page" ||
  { echo "FAIL: a node reports 0 W"; exit 1; }
echo "PASS: every node's watts and energy, and fleet J/token, reach the router in make run's topology"
