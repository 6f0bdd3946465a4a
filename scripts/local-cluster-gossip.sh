#!/usr/bin/env bash
# `make run CGN_STATE=gossip`: the local cluster through agents and gossip, no external service.
#   CGN_NODES × cgn-agent, each spawning cgn-engine-sim through a wrapper named `vllm` and
#     publishing its node record by gossip (UDP on 127.0.0.1, HMAC-signed with a per-run key)
#   cgn-router with state_backend = "gossip": a member without a record, seeded by every agent,
#     reconciling live members into routing every 2.5 s
# Runs the demo workload once, then serves until Ctrl-C and stops everything it started.
# Environment: CGN_PORT (router port, default 8080; 0 = any free port), CGN_NODES (default 3),
#              CGN_TIME_SCALE (simulator speed, default 1.0), CGN_MODEL, BIN (default build/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/procs.sh
BIN=${BIN:-build/bin}
NODES=${CGN_NODES:-3}
PORT=${CGN_PORT:-8080}
MODEL=${CGN_MODEL:-demo-model}
TIME_SCALE=${CGN_TIME_SCALE:-1.0}
for b in cgn-router cgn-agent cgn-engine-sim; do
  [[ -x $BIN/$b ]] || { echo "$BIN/$b is not built (make build)" >&2; exit 2; }
done
BIN=$(cd "$BIN" && pwd)
RUN_DIR=$(mktemp -d /tmp/cognitora-run-gossip.XXXXXX)
pids=()

cleanup() {
  trap - EXIT INT TERM
  echo
  echo "stopping the local cluster"
  # Router first, then the agents (they stop their engines).
  stop_pids
  rm -rf "$RUN_DIR"
}
trap cleanup EXIT
trap 'exit 0' INT TERM


# Packets are signed with a key only this run knows; the processes read it from the environment.
CGN_GOSSIP_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CGN_GOSSIP_KEY
# And the router presents a per-run cluster token to the agents, which answer nobody else.
CGN_CLUSTER_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CGN_CLUSTER_TOKEN
router_gossip=$(free_udp_port)
gossip_toml() {  # LISTEN_PORT
  printf '[state.gossip]\nlisten = "127.0.0.1:%s"\nseeds = ["127.0.0.1:%s"]\ncluster_id = "cognitora-local"\nsecret_env = "CGN_GOSSIP_KEY"\n' \
    "$1" "$router_gossip"
  printf '\n[cluster]\ntoken_env = "CGN_CLUSTER_TOKEN"\n'
}

# The agents run `vllm serve ...`: a wrapper named like the engine runs the simulator.
mkdir -p "$RUN_DIR/engines"
ln -s "$BIN/cgn-engine-sim" "$RUN_DIR/engines/vllm"

echo "starting $NODES agents, each supervising a simulated vLLM (model $MODEL, time scale $TIME_SCALE)"
for i in $(seq 1 "$NODES"); do
  agent_port=$(free_port)
  engine_port=$(free_port)
  {
    printf '[agent]\nnode_id = "node%s"\nlisten = "127.0.0.1:%s"\ngrpc_listen = "127.0.0.1:0"\nstate_backend = "gossip"\n\n' \
      "$i" "$agent_port"
    printf '[engine]\nkind = "vllm"\nmodel = "%s"\nport = %s\nextra_args = ["--sim-time-scale", "%s"]\n\n' \
      "$MODEL" "$engine_port" "$TIME_SCALE"
    # The simulator's power model, read through the dcgm-exporter source (docs/sim.md "Power model").
    printf '[[power.sources]]\nkind = "dcgm_exporter"\nurl = "http://127.0.0.1:%s/dcgm/metrics"\n\n' "$engine_port"
    gossip_toml "$(free_udp_port)"
  } >"$RUN_DIR/agent$i.toml"
  PATH="$RUN_DIR/engines:$PATH" "$BIN/cgn-agent" --config "$RUN_DIR/agent$i.toml" >"$RUN_DIR/agent$i.log" 2>&1 &
  pids+=($!)
  echo "  node$i  agent http://127.0.0.1:$agent_port -> engine :$engine_port  (log $RUN_DIR/agent$i.log)"
done

{
  printf '[router]\nstate_backend = "gossip"\n\n'
  gossip_toml "$router_gossip"
} >"$RUN_DIR/router.toml"
[[ $PORT == 0 ]] && PORT=$(free_port)
"$BIN/cgn-router" --listen "127.0.0.1:$PORT" --config "$RUN_DIR/router.toml" >"$RUN_DIR/router.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$PORT/health"
echo "waiting for the agents' node records to reach the router by gossip (UDP 127.0.0.1:$router_gossip)"
up=0
for _ in $(seq 1 600); do
  up=$(curl -fsS "http://127.0.0.1:$PORT/metrics" 2>/dev/null | grep -c '^cgn_cluster_node_up{.*} 1' || true)
  [[ $up -ge $NODES ]] && break
  sleep 0.1
done
echo "  $up of $NODES nodes in routing"

echo
echo "demo workload: 5 tenants with long system prompts (policy kv, node records by gossip)"
python3 scripts/demo_workload.py --endpoint "http://127.0.0.1:$PORT" --model "$MODEL" --policy kv || true

cat <<TXT

Cognitora is serving on http://127.0.0.1:$PORT  (state_backend gossip, $NODES agents, no external service)
  curl -s http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' \\
       -d '{"model":"$MODEL","messages":[{"role":"user","content":"Hello!"}]}' -i
  gossip counters:  curl -s http://127.0.0.1:$PORT/metrics | grep '^cgn_gossip_'
  kill an agent (kill -9 <pid> of cgn-agent) and watch it leave routing within the documented bound
  dashboard: http://127.0.0.1:$PORT/dashboard/    metrics: http://127.0.0.1:$PORT/metrics
  logs:      $RUN_DIR
Press Ctrl-C to stop.
TXT
wait "${pids[-1]}"
