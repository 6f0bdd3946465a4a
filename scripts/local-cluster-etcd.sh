#!/usr/bin/env bash
# `make run CGN_STATE=etcd`: the local cluster through agents and etcd.
#   etcd (Debian etcd-server) on free loopback ports, data dir on tmpfs (/dev/shm)
#   CGN_NODES × cgn-agent, each spawning cgn-engine-sim through a wrapper named `vllm` and
#     publishing its node record and live KV prefixes under /cognitora/ on a heartbeat lease
#   cgn-router with state_backend = "etcd" (--etcd URL): nodes, prefixes, cordon flags and the
#     routing policy come from etcd
# Runs the demo workload once, prints cgn-ctl commands to see the fleet, explain a route, drain a
# node or change the policy, then serves until Ctrl-C and stops everything it started.
# Environment: CGN_PORT (router port, default 8080; 0 = any free port), CGN_NODES (default 3),
#              CGN_TIME_SCALE (simulator speed, default 1.0), CGN_MODEL, BIN (default build/bin),
#              ETCD (default /usr/bin/etcd), CGN_DEMO_ROUNDS (requests per tenant, default 4),
#              CGN_CTL_SESSION=FILE: instead of serving, run a cgn-ctl session (status, nodes,
#              routes explain, drain, policy set) and write its transcript to FILE (markdown).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/procs.sh
BIN=${BIN:-build/bin}
NODES=${CGN_NODES:-3}
PORT=${CGN_PORT:-8080}
MODEL=${CGN_MODEL:-demo-model}
TIME_SCALE=${CGN_TIME_SCALE:-1.0}
ETCD=${ETCD:-/usr/bin/etcd}
if [[ ! -x $ETCD ]]; then
  echo "etcd not found at $ETCD: install the Debian package etcd-server (scripts/bootstrap.sh does)" >&2
  exit 2
fi
for b in cgn-router cgn-agent cgn-engine-sim; do
  [[ -x $BIN/$b ]] || { echo "$BIN/$b is not built (make build)" >&2; exit 2; }
done
BIN=$(cd "$BIN" && pwd)
RUN_DIR=$(mktemp -d /tmp/cognitora-run-etcd.XXXXXX)
SHM=/dev/shm
[[ -d $SHM && -w $SHM ]] || SHM=$RUN_DIR
ETCD_DATA=$(mktemp -d "$SHM/cognitora-etcd.XXXXXX")
pids=()

cleanup() {
  trap - EXIT INT TERM
  echo
  echo "stopping the local cluster"
  # Router first, then agents (they stop their engines), then etcd.
  stop_pids
  rm -rf "$RUN_DIR" "$ETCD_DATA"
}
trap cleanup EXIT
trap 'exit 0' INT TERM


client_port=$(free_port)
peer_port=$(free_port)
ETCD_URL="http://127.0.0.1:$client_port"
echo "starting etcd on $ETCD_URL (data on $ETCD_DATA)"
"$ETCD" --name cgn-run --data-dir "$ETCD_DATA" \
  --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "cgn-run=http://127.0.0.1:$peer_port" --log-level warn >"$RUN_DIR/etcd.log" 2>&1 &
pids+=($!)
wait_http "$ETCD_URL/health" || { cat "$RUN_DIR/etcd.log" >&2; exit 1; }

# The agents run `vllm serve ...`: a wrapper named like the engine runs the simulator.
mkdir -p "$RUN_DIR/engines"
ln -s "$BIN/cgn-engine-sim" "$RUN_DIR/engines/vllm"

echo "starting $NODES agents, each supervising a simulated vLLM (model $MODEL, time scale $TIME_SCALE)"
for i in $(seq 1 "$NODES"); do
  agent_port=$(free_port)
  engine_port=$(free_port)
  cat >"$RUN_DIR/agent$i.toml" <<TOML
[agent]
node_id = "node$i"
listen = "127.0.0.1:$agent_port"
grpc_listen = "127.0.0.1:0"
state_backend = "etcd"

[engine]
kind = "vllm"
model = "$MODEL"
port = $engine_port
extra_args = ["--sim-time-scale", "$TIME_SCALE"]

# The simulator's power model, read through the dcgm-exporter source (docs/sim.md "Power model").
[[power.sources]]
kind = "dcgm_exporter"
url = "http://127.0.0.1:$engine_port/dcgm/metrics"

[state.etcd]
endpoints = ["$ETCD_URL"]
TOML
  PATH="$RUN_DIR/engines:$PATH" "$BIN/cgn-agent" --config "$RUN_DIR/agent$i.toml" >"$RUN_DIR/agent$i.log" 2>&1 &
  pids+=($!)
  echo "  node$i  agent http://127.0.0.1:$agent_port -> engine :$engine_port  (log $RUN_DIR/agent$i.log)"
done

[[ $PORT == 0 ]] && PORT=$(free_port)
# One cognitora.toml for the router and cgn-ctl: etcd, and the admin key (a file, never printed).
od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$RUN_DIR/admin.key"
cat >"$RUN_DIR/cognitora.toml" <<TOML
state_backend = "etcd"

[router.admin]
key_env = "CGN_ADMIN_KEY"

[state.etcd]
endpoints = ["$ETCD_URL"]
TOML
CGN_ADMIN_KEY=$(cat "$RUN_DIR/admin.key") "$BIN/cgn-router" --config "$RUN_DIR/cognitora.toml" \
  --listen "127.0.0.1:$PORT" >"$RUN_DIR/router.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$PORT/health"
echo "waiting for the agents' node records to reach the router through etcd"
for _ in $(seq 1 600); do
  up=$(curl -fsS "http://127.0.0.1:$PORT/metrics" 2>/dev/null | grep -c '^cgn_cluster_node_up{.*} 1' || true)
  [[ $up -ge $NODES ]] && break
  sleep 0.1
done
echo "  $up of $NODES nodes in routing"

echo
echo "demo workload: 5 tenants with long system prompts (policy kv, live KV prefixes from etcd)"
python3 scripts/demo_workload.py --endpoint "http://127.0.0.1:$PORT" --model "$MODEL" --policy kv \
  --rounds "${CGN_DEMO_ROUNDS:-4}" || true

CTL="$BIN/cgn-ctl --config $RUN_DIR/cognitora.toml --router http://127.0.0.1:$PORT"
if [[ -n ${CGN_CTL_SESSION:-} ]]; then
  export CGN_ADMIN_KEY
  CGN_ADMIN_KEY=$(cat "$RUN_DIR/admin.key")
  # The demo's first request of tenant acme, to explain: its system prompt is cached on one node.
  python3 -c "import json, sys; sys.path.insert(0, 'scripts'); import demo_workload as d
print(json.dumps({'model': '$MODEL', 'messages': [{'role': 'system', 'content': d.system_prompt('acme')},
                  {'role': 'user', 'content': 'Question 0 from acme?'}]}))" >"$RUN_DIR/acme.json"
  {
    echo "# A cgn-ctl session"
    echo
    echo "<!-- Generated by scripts/gen-cgn-ctl-session.sh against a local etcd cluster (2 agents with"
    echo "     simulated vLLM engines); numbers vary from run to run. -->"
    for cmd in "status" "nodes" "routes explain --file $RUN_DIR/acme.json" \
      "drain node1 --timeout-s 60" "nodes" "policy set least_load --set weights.queue_ms_per_request=50" "policy get" \
      "uncordon node1"; do
      echo
      echo '```text'
      echo "\$ cgn-ctl $cmd"
      eval "$CTL $cmd" 2>&1 || echo "(exit $?)"
      echo '```'
    done
  } >"$CGN_CTL_SESSION"
  echo "wrote $CGN_CTL_SESSION"
  exit 0
fi

cat <<TXT

Cognitora is serving on http://127.0.0.1:$PORT  (state_backend etcd at $ETCD_URL, $NODES agents)
  curl -s http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' \\
       -d '{"model":"$MODEL","messages":[{"role":"user","content":"Hello!"}]}' -i
Next steps, with cgn-ctl (docs/cgn-ctl.md):
  $CTL status
  $CTL nodes
  export CGN_ADMIN_KEY=\$(cat $RUN_DIR/admin.key)
  $CTL routes explain --model $MODEL --prompt "Hello!"
  $CTL drain node1          # cordon, then wait for its in-flight requests
  $CTL uncordon node1
  $CTL policy set least_load
  dashboard: http://127.0.0.1:$PORT/dashboard/    metrics: http://127.0.0.1:$PORT/metrics
  logs:      $RUN_DIR
Press Ctrl-C to stop.
TXT
wait "${pids[-1]}"
