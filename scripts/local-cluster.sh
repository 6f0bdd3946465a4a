#!/usr/bin/env bash
# `make run`: a local Cognitora cluster with no external services.
#   3 × cgn-engine-sim (vLLM flavour), each behind a cgn-agent that reads the simulator's power
#   model (its dcgm-exporter page, through cgn-power's dcgm_exporter source in process), and
#   cgn-router with the agents as static nodes ([[router.nodes]] agent = ...), all on 127.0.0.1.
#   The router polls each agent's node record, so the dashboard's watts and J/token are live.
# Runs a short multi-tenant demo per routing policy, the kv one last on the router it then keeps
# serving until Ctrl-C (so its dashboard shows the demo's prefix index), prints TTFT p50/p90 and
# the cache hit rate per policy with the kv policy's gain over round robin, and stops everything
# it started.
# Environment: CGN_PORT (router port, default 8080; 0 = any free port), CGN_NODES (default 3),
#              CGN_TIME_SCALE (simulator speed, default 1.0), BIN (default build/bin),
#              CGN_DEMO_ROUNDS (requests per tenant and policy, default 4),
#              CGN_DEMO_EXIT=1 (stop after the summary instead of serving; for tests),
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
ROUNDS=${CGN_DEMO_ROUNDS:-4}
RUN_DIR=$(mktemp -d /tmp/cognitora-run.XXXXXX)
SUMMARY=$RUN_DIR/summary.jsonl
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
agent_urls=()
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

# The admin key cgn-ctl's `routes explain` presents ([router.admin]); a file, never printed.
od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$RUN_DIR/admin.key"
printf '[router.admin]\nkey_env = "CGN_ADMIN_KEY"\n' >"$RUN_DIR/router.toml"

# One agent per simulator, attached to it (the simulator keeps running on its own, so evict_all
# below still reaches its admin API); its power reader reads the simulator's /dcgm/metrics.
for i in $(seq 1 "$NODES"); do
  cat >"$RUN_DIR/agent$i.toml" <<TOML
[agent]
node_id = "node$i"
listen = "127.0.0.1:0"
grpc_listen = "127.0.0.1:0"
scrape_interval_ms = 500

[engine]
kind = "external"
attach_kind = "vllm"
model = "$MODEL"
url = "${node_urls[$((i - 1))]}"

[power]
poll_interval_ms = 500

[[power.sources]]
name = "gpus"
kind = "dcgm_exporter"
url = "${node_urls[$((i - 1))]}/dcgm/metrics"
TOML
  agent_port=$(free_port)
  "$BIN/cgn-agent" --config "$RUN_DIR/agent$i.toml" --listen "127.0.0.1:$agent_port" \
    --grpc-port-file "$RUN_DIR/agent$i.grpc" >"$RUN_DIR/agent$i.log" 2>&1 &
  pids+=($!)
  agent_urls+=("http://127.0.0.1:$agent_port")
done
for i in $(seq 1 "$NODES"); do
  g=$(wait_port_file "$RUN_DIR/agent$i.grpc")
  printf '\n[[router.nodes]]\nname = "node%s"\nurl = "%s"\nagent = "127.0.0.1:%s"\n' \
    "$i" "${agent_urls[$((i - 1))]}" "$g" >>"$RUN_DIR/router.toml"
  echo "  node$i  agent ${agent_urls[$((i - 1))]} -> sim$i, power from its /dcgm/metrics  (log $RUN_DIR/agent$i.log)"
done

start_router() {  # POLICY PORT
  CGN_ADMIN_KEY=$(cat "$RUN_DIR/admin.key") "$BIN/cgn-router" --config "$RUN_DIR/router.toml" \
    --listen "127.0.0.1:$2" --policy "$1" >"$RUN_DIR/router-$1.log" 2>&1 &
  router_pid=$!
  pids+=("$router_pid")
  wait_http "http://127.0.0.1:$2/health"
  # Every node in routing (the router polls the agents' records) before the workload starts.
  local up=0
  for _ in $(seq 1 300); do
    up=$(curl -fsS "http://127.0.0.1:$2/metrics" 2>/dev/null | grep -c '^cgn_cluster_node_up{.*} 1' || true)
    [[ $up -ge $NODES ]] && return 0
    sleep 0.1
  done
  echo "only $up of $NODES nodes in routing after 30 s (logs in $RUN_DIR)" >&2
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
  python3 scripts/demo_workload.py --endpoint "http://127.0.0.1:$p" --model "$MODEL" --policy "$policy" \
    --rounds "$ROUNDS" --summary "$SUMMARY" || true
  kill -TERM "$router_pid"; wait "$router_pid" 2>/dev/null || true
done

[[ $PORT == 0 ]] && PORT=$(free_port)
evict_all
start_router kv "$PORT"
python3 scripts/demo_workload.py --endpoint "http://127.0.0.1:$PORT" --model "$MODEL" --policy kv \
  --rounds "$ROUNDS" --summary "$SUMMARY" || true
echo
python3 scripts/demo_summary.py "$SUMMARY"
[[ ${CGN_DEMO_EXIT:-} == 1 ]] && exit 0
CTL="$BIN/cgn-ctl --router http://127.0.0.1:$PORT"
cat <<TXT

Cognitora is serving on http://127.0.0.1:$PORT  (policy kv, $NODES nodes)
  curl -s http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' \\
       -d '{"model":"$MODEL","messages":[{"role":"user","content":"Hello!"}]}' -i
  dashboard: http://127.0.0.1:$PORT/dashboard/   (watts and J/token from the simulators' power model)
  logs:      $RUN_DIR
Next steps, with cgn-ctl (docs/cgn-ctl.md):
  $CTL status                       # the cluster at a glance
  export CGN_ADMIN_KEY=\$(cat $RUN_DIR/admin.key)
  $CTL routes explain --model $MODEL --prompt "Hello!"   # why a request goes where it goes
  $CTL bench -- --workload small --limit 20 --model $MODEL
  CGN_STATE=etcd make run            # then: cgn-ctl --config <its toml> nodes | drain NODE | policy set
Press Ctrl-C to stop.
TXT
wait "$router_pid"
