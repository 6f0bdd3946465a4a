# Shared by every recipe's up.sh and down.sh (sourced; bash). A recipe folder holds:
#   cognitora.toml     the router's configuration ([router], its static [[router.nodes]]: the agents)
#   node-<id>.toml     one cgn-agent's configuration ([agent], [engine]) per node of the recipe
#   kvcached.toml      (optional) the node's cgn-kvcached
#   up.sh, down.sh     recipe_up / recipe_down with the per-node agent flags
# Processes run from $CGN_BIN_DIR (else PATH), each in its own session, with logs, pid files and
# the rendered configuration under the state folder:
#   CGN_RECIPE_STATE   default ${XDG_RUNTIME_DIR:-/tmp}/cognitora-recipes/<model>-<engine>-<topology>
#   CGN_PORT_OFFSET    added to every port in the recipe's files (default 0: the files unchanged)
#   CGN_LOOPBACK=1     listeners on 0.0.0.0 bind 127.0.0.1 instead (tests)
#   CGN_ENGINE=sim     the agents' engines are cgn-engine-sim, started under the engine's own name
#                      (a `vllm` program, a `python3` that answers `-m sglang.launch_server`) from
#                      a folder put first on the agents' PATH; every other setting stays the recipe's
#   CGN_SIM_KVCACHED_RAM_BYTES  with CGN_ENGINE=sim, kvcached's RAM tier (default 256 MiB; the
#                      recipe's own size is for a GPU server and is allocated at start)
#   CGN_UP_TIMEOUT_S   how long up waits for the router to list the model (default: 60 with sim,
#                      1800 with a real engine loading weights)
set -euo pipefail

recipe_init() {  # DIR
  RECIPE_DIR="$(cd "$1" && pwd)"
  local rel="${RECIPE_DIR#"$(cd "$RECIPE_DIR/../../.." && pwd)"/}"
  RECIPE_NAME="${rel//\//-}"
  STATE="${CGN_RECIPE_STATE:-${XDG_RUNTIME_DIR:-/tmp}/cognitora-recipes/$RECIPE_NAME}"
  if [[ -n "${CGN_BIN_DIR:-}" ]]; then
    BIN="$CGN_BIN_DIR"
  else
    BIN="$(dirname "$(command -v cgn-router || echo /usr/bin/cgn-router)")"
  fi
}

say() { echo "recipe $RECIPE_NAME: $*"; }

# A recipe file with every 4-5 digit port after ':' or 'port = ' moved by CGN_PORT_OFFSET.
# CGN_LOOPBACK=1 (the tests) also turns 0.0.0.0 listeners into 127.0.0.1.
render() {  # SRC DST
  perl -pe 'my $o = $ENV{CGN_PORT_OFFSET} // 0; s/(:|port = )(\d{4,5})\b/$1.($2+$o)/ge;
            s/0\.0\.0\.0:/127.0.0.1:/g if $ENV{CGN_LOOPBACK}' "$1" >"$2"
}

start_bg() {  # NAME ARGS... : a daemon in its own session, its pid and log in the state folder
  local name="$1"
  shift
  setsid "$@" >"$STATE/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/$name.pid"
  say "started $name (pid $!): $*"
}

sim_engines() {  # the engines' program names, answered by cgn-engine-sim
  local sim="$BIN/cgn-engine-sim" d="$STATE/engines"
  mkdir -p "$d"
  local scale="${CGN_SIM_TIME_SCALE:-0.01}"
  printf '#!/bin/sh\nexec "%s" -- vllm "$@" --sim-time-scale %s\n' "$sim" "$scale" >"$d/vllm"
  printf '#!/bin/sh\nif [ "$1" = "-m" ] && [ "$2" = "sglang.launch_server" ]; then\n  shift 2\n  exec "%s" -- python -m sglang.launch_server "$@" --sim-time-scale %s\nfi\nexec /usr/bin/python3 "$@"\n' \
    "$sim" "$scale" >"$d/python3"
  chmod 755 "$d/vllm" "$d/python3"
  AGENT_PATH="$d:$PATH"
  say "CGN_ENGINE=sim: vllm and python3 -m sglang.launch_server are cgn-engine-sim ($d)"
}

recipe_agent() {  # NODE-ID [cgn-agent flags...]
  local id="$1"
  shift
  render "$RECIPE_DIR/node-$id.toml" "$STATE/node-$id.toml"
  start_bg "agent-$id" env PATH="$AGENT_PATH" "$BIN/cgn-agent" --config "$STATE/node-$id.toml" "$@"
}

recipe_kvcached() {
  render "$RECIPE_DIR/kvcached.toml" "$STATE/kvcached.toml"
  if [[ "${CGN_ENGINE:-}" == sim ]]; then
    # The arena is allocated and prefaulted at start: the recipe's tens of GiB are for a GPU
    # server, not for the machine standing in for one.
    local ram="${CGN_SIM_KVCACHED_RAM_BYTES:-268435456}"
    sed -i "s/^ram_bytes = .*/ram_bytes = $ram/" "$STATE/kvcached.toml"
    say "CGN_ENGINE=sim: kvcached's RAM tier is $ram bytes (CGN_SIM_KVCACHED_RAM_BYTES)"
  fi
  start_bg kvcached "$BIN/cgn-kvcached" --config "$STATE/kvcached.toml" --socket "$STATE/kvcached.sock"
}

# True when the router at PORT knows nodes and every one of them is healthy (/health): a disagg
# recipe is up only once its prefill and its decode nodes both are.
all_healthy() {  # PORT
  local h known healthy
  h="$(curl -sf "http://127.0.0.1:$1/health")" || return 1
  known="$(sed -n 's/.*"nodes":\([0-9]*\).*/\1/p' <<<"$h")"
  healthy="$(sed -n 's/.*"nodes_healthy":\([0-9]*\).*/\1/p' <<<"$h")"
  [[ -n "$known" && "$known" -gt 0 && "$known" == "$healthy" ]]
}

# Starts the router over the agents and waits until it lists MODEL and every node is healthy;
# prints the endpoint.
recipe_router() {  # MODEL
  render "$RECIPE_DIR/cognitora.toml" "$STATE/cognitora.toml"
  start_bg router "$BIN/cgn-router" --config "$STATE/cognitora.toml" --port-file "$STATE/router.port"
  local timeout="${CGN_UP_TIMEOUT_S:-$([[ "${CGN_ENGINE:-}" == sim ]] && echo 60 || echo 1800)}"
  local deadline=$(($(date +%s) + timeout)) port=""
  while (($(date +%s) < deadline)); do
    port="$(cat "$STATE/router.port" 2>/dev/null || true)"
    if [[ -n "$port" ]] && curl -sf "http://127.0.0.1:$port/v1/models" | grep -q "\"$1\"" && all_healthy "$port"; then
      echo "$port" >"$STATE/endpoint"
      say "up: http://127.0.0.1:$port/v1 serves $1 (logs: $STATE)"
      return 0
    fi
    for p in "$STATE"/*.pid; do
      kill -0 "$(cat "$p")" 2>/dev/null || { say "$(basename "$p" .pid) exited; its log:"; tail -20 "${p%.pid}.log"; recipe_down; return 1; }
    done
    sleep 0.5
  done
  say "the router did not list $1 within ${timeout}s; logs in $STATE"
  recipe_down
  return 1
}

recipe_up_begin() {
  if [[ -f "$STATE/endpoint" ]]; then
    say "already up: http://127.0.0.1:$(cat "$STATE/endpoint")/v1 (down.sh first)"
    exit 0
  fi
  mkdir -p "$STATE"
  AGENT_PATH="$PATH"
  [[ "${CGN_ENGINE:-}" == sim ]] && sim_engines
  return 0
}

# SIGTERM to every process the recipe started (router first), SIGKILL after 30 s, then the state
# folder goes: nothing of the recipe is left.
recipe_down() {
  [[ -d "$STATE" ]] || { say "not up"; return 0; }
  local order=("$STATE/router.pid" "$STATE"/agent-*.pid "$STATE/kvcached.pid")
  for p in "${order[@]}"; do
    [[ -f "$p" ]] || continue
    local pid
    pid="$(cat "$p")"
    if kill -TERM "$pid" 2>/dev/null; then
      for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL -- "-$pid" 2>/dev/null || true
      for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      say "stopped $(basename "$p" .pid) (pid $pid)"
    fi
  done
  rm -rf "$STATE"
  say "down"
}
