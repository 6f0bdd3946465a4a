#!/usr/bin/env bash
# Every recipe really runs (ctest label: recipes): for each recipes/<model>/<engine>/<topology>/,
# up.sh with CGN_ENGINE=sim (the simulator under the engine's name; the recipe's router, agent and
# kvcached files unchanged but for loopback and a port offset), one chat request through its
# router, the served node checked against the recipe's files (aggregated: a node without a role;
# disagg: X-CGN-Prefill-Node a prefill node, X-CGN-Node a decode node), then down.sh, after which
# no process that mentions the recipe's state folder and no file of it may remain.
#   recipes/test_recipes.sh BIN_DIR [RECIPE-DIR-GLOB]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export CGN_BIN_DIR="$(cd "${1:?usage: test_recipes.sh BIN_DIR [GLOB]}" && pwd)"
glob="${2:-*/*/*}"
export CGN_ENGINE=sim CGN_LOOPBACK=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0 count=0

role_of() {  # NODE-TOML: its [engine] role, "both" when unset
  local r
  r="$(sed -n 's/^role = "\(.*\)"/\1/p' "$1")"
  echo "${r:-both}"
}

check_recipe() {  # DIR
  local dir="$1" name
  name="${dir#"$here"/}"
  export CGN_RECIPE_STATE="$tmp/${name//\//-}"
  # Offsets keep every recipe port (8000..30000) below the kernel's ephemeral range (32768..),
  # where other tests' connections live; a port another test holds anyway means another offset.
  local attempt up=0
  for attempt in 1 2 3; do
    export CGN_PORT_OFFSET=$((1000 + RANDOM % 1700))
    if "$dir/up.sh" >"$tmp/up.log" 2>&1; then
      up=1
      break
    fi
    grep -qi "in use" "$tmp/up.log" || break
    echo "note $name: a port of offset $CGN_PORT_OFFSET is in use; another offset (attempt $attempt)"
  done
  if ((!up)); then
    echo "FAIL $name: up.sh"; sed 's/^/  /' "$tmp/up.log"; return 1
  fi
  local port model headers
  port="$(cat "$CGN_RECIPE_STATE/endpoint")"
  model="$(sed -n 's/^model = "\(.*\)"/\1/p' "$(ls "$dir"/node-*.toml | head -1)")"
  headers="$(curl -s -D - -o "$tmp/body" "http://127.0.0.1:$port/v1/chat/completions" \
    -H 'Content-Type: application/json' \
    -d "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"hello from $name\"}],\"max_tokens\":8}")"
  local node prefill ok=1
  node="$(echo "$headers" | tr -d '\r' | sed -n 's/^X-CGN-Node: //Ip')"
  prefill="$(echo "$headers" | tr -d '\r' | sed -n 's/^X-CGN-Prefill-Node: //Ip')"
  grep -q '"chat.completion"' "$tmp/body" || { echo "FAIL $name: no completion: $(cat "$tmp/body")"; ok=0; }
  if [[ ! -f "$dir/node-$node.toml" ]]; then
    echo "FAIL $name: served by '$node', not a node of the recipe"; ok=0
  elif [[ "$dir" == *disagg* ]]; then
    [[ "$(role_of "$dir/node-$node.toml")" == decode && -f "$dir/node-$prefill.toml" &&
      "$(role_of "$dir/node-$prefill.toml")" == prefill ]] ||
      { echo "FAIL $name: decode '$node' prefill '$prefill'"; ok=0; }
  else
    [[ "$(role_of "$dir/node-$node.toml")" == both ]] || { echo "FAIL $name: '$node' is not aggregated"; ok=0; }
  fi
  "$dir/down.sh" >"$tmp/down.log" 2>&1 || { echo "FAIL $name: down.sh"; cat "$tmp/down.log"; ok=0; }
  if pgrep -f "$CGN_RECIPE_STATE" >/dev/null || [[ -e "$CGN_RECIPE_STATE" ]]; then
    echo "FAIL $name: left behind: $(pgrep -af "$CGN_RECIPE_STATE" || true) $(ls "$CGN_RECIPE_STATE" 2>/dev/null || true)"
    for p in $(pgrep -f "$CGN_RECIPE_STATE" || true); do kill -KILL "$p" 2>/dev/null || true; done
    ok=0
  fi
  ((ok)) && echo "ok $name: served by $node${prefill:+ (prefill $prefill)}, down clean"
  ((ok))
}

for dir in "$here"/$glob/; do
  [[ -x "$dir/up.sh" ]] || continue
  count=$((count + 1))
  check_recipe "${dir%/}" || failures=$((failures + 1))
done
((count > 0)) || { echo "FAIL: no recipe matched $glob"; exit 1; }
echo "test_recipes: $count recipes, $failures failed"
((failures == 0))
