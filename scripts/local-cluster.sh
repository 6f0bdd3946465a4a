#!/usr/bin/env bash
# `make run`: a local Cognitora cluster with no external services.
#   3 × cgn-engine-sim (vLLM flavour) + cgn-router, all on 127.0.0.1.
# Runs a short multi-tenant demo per routing policy, the kv one last on the router it then keeps
# serving until Ctrl-C (so its dashboard shows the demo's prefix index), and stops everything it
# started.
# Environment: CGN_PORT (router port, default 8080; 0 = any free port), CGN_NODES (default 3),
#              CGN_TIME_SCALE (simulator speed, default 1.0), BIN (default build/bin),
#              CGN_STATE=etcd (scripts/local-cluster-etcd.sh: etcd + agents),
#              CGN_STATE=gossip (scripts/local-cluster-gossip.sh: agents + gossip, no external service);
#              default: static --node list.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/procs.sh
# CGN_STATE=etcd: etcd + one cgn-agent per simulator + the router watching etcd.
if [[ ${CGN_STATE:-} == etcd ]]; then exec scripts/local-cluster-etcd.sh "$@"; fi
# CGN_STATE=gossip: one cgn-agent per simulator + the router, finding each other by gossip.
if [[ ${CGN_STATE:-} == gossip ]]; then exec scripts/local-cluster-gossip.sh "$@"; fi
BIN=${BIN:-build/bin}
NODES=${CGN_NODES:-3}
PORT=${CGN_PORT:-8080}
MODEL=${CGN_MODEL:-demo-model}
TIME_SCALE=${CGN_TIME_SCALE:-1.0}
RUN_DIR=$(mktemp -d /tmp/cognitora-run.XXXXXX)
pids=()

cleanup() {
  trap - EXIT INT TERM
  echo
  echo "stopping the local cluster"
  stop_pids
  rm -rf "$RUN_DIR"
}
trap cleanup EXIT
trap 'exit 0' INT TERM


echo "starting $NODES simulated vLLM engines (model $MODEL, time scale $TIME_SCALE)"
node_urls=()
for i in $(seq 1 "$NODES"); do
  "$BIN/cgn-engine-sim" --flavor vllm --model "$MODEL" --port 0 --port-file "$RUN_DIR/sim$i.port" \
    --time-scale "$TIME_SCALE" --enable-admin >"$RUN_DIR/sim$i.log" 2>&1 &
  pids+=($!)
done
for i in $(seq 1 "$NODES"); do
  p=$(wait_port_file "$RUN_DIR/sim$i.port")
  node_urls+=("http://127.0.0.1:$p")
  echo "  sim$i  http://127.0.0.1:$p  (log $RUN_DIR/sim$i.log)"
done
node_args=()
for u in "${node_urls[@]}"; do node_args+=(--node "$u"); done

start_router() {  # POLICY PORT
  "$BIN/cgn-router" --listen "127.0.0.1:$2" --policy "$1" "${node_args[@]}" \
    >"$RUN_DIR/router-$1.log" 2>&1 &
  router_pid=$!
  pids+=("$router_pid")
  wait_http "http://127.0.0.1:$2/health"
}
evict_all() {
  for u in "${node_urls[@]}"; do
    curl -fsS -X POST -H 'Content-Type: application/json' -d '{"all":true}' "$u/admin/evict" >/dev/null
  done
}

echo
echo "demo workload: 5 tenants with long system prompts, per routing policy"
for policy in round_robin random least_load session; do
  evict_all
  p=$(free_port)
  start_router "$policy" "$p"
  python3 scripts/demo_workload.py --endpoint "http://127.0.0.1:$p" --model "$MODEL" --policy "$policy" || true
  kill -TERM "$router_pid"; wait "$router_pid" 2>/dev/null || true
done

[[ $PORT == 0 ]] && PORT=$(free_port)
evict_all
start_router kv "$PORT"
python3 scripts/demo_workload.py --endpoint "http://127.0.0.1:$PORT" --model "$MODEL" --policy kv || true
cat <<TXT

Cognitora is serving on http://127.0.0.1:$PORT  (policy kv, $NODES nodes)
  curl -s http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' \\
       -d '{"model":"$MODEL","messages":[{"role":"user","content":"Hello!"}]}' -i
  dashboard: http://127.0.0.1:$PORT/dashboard/
  metrics:   http://127.0.0.1:$PORT/metrics
  logs:      $RUN_DIR
Press Ctrl-C to stop.
TXT
wait "$router_pid"
