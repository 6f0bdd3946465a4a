#!/usr/bin/env bash
# Every recipe's engine command line (what its agent runs: `cgn-agent --print-command` on each
# node-*.toml) starts cgn-engine-sim, which checks the flags against the engine's own parser
# (src/sim/engine_flags.cpp); a misspelt flag makes it exit 2 with the engine's argparse error
# naming the flag, so a typo in a recipe fails here before any GPU is involved.
#   recipes/test_recipe_flags.sh BIN_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$(cd "${1:?usage: test_recipe_flags.sh BIN_DIR}" && pwd)"
tmp="$(mktemp -d)"
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Starts the simulator on the engine line (a bound port proves it was accepted), then stops it.
accepts() {  # WORDS...
  rm -f "$tmp/port"
  "$bin/cgn-engine-sim" --port 0 --port-file "$tmp/port" -- "$@" >"$tmp/log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    [[ -s "$tmp/port" ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  local ok=0
  [[ -s "$tmp/port" ]] && ok=1
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
  [[ $ok == 1 ]]
}
# The simulator refuses the line: exit 2, the engine's error naming FLAG.
refuses() {  # FLAG WORDS...
  local flag="$1" rc=0
  shift
  timeout 20 "$bin/cgn-engine-sim" --port 0 -- "$@" >"$tmp/log" 2>&1 || rc=$?
  [[ $rc == 2 ]] || fail "a line with $flag: exit $rc, want 2: $(cat "$tmp/log")"
  grep -q "error: unrecognized arguments: $flag" "$tmp/log" || fail "the error does not name $flag: $(cat "$tmp/log")"
}

n=0
for toml in "$here"/*/*/*/node-*.toml; do
  line="$("$bin/cgn-agent" --config "$toml" --print-command)"
  eval "words=($line)"
  accepts "${words[@]}" || fail "${toml#"$here/"}: the simulator refused: $line: $(cat "$tmp/log")"
  n=$((n + 1))
done
[[ $n -gt 0 ]] || fail "no recipe node files under $here"
echo "ok: $n recipe engine lines accepted"

eval "words=($("$bin/cgn-agent" --config "$here/llama3-8b/vllm/agg/node-agg-0.toml" --print-command))"
refuses --max-model-lenn "${words[@]/--max-model-len/--max-model-lenn}"
eval "words=($("$bin/cgn-agent" --config "$here/qwen3/sglang/agg/node-agg-0.toml" --print-command))"
refuses --mem-fraction-statik "${words[@]}" --mem-fraction-statik 0.8
echo "ok: misspelt vLLM and SGLang flags are refused with exit 2, naming the flag"
echo "test_recipe_flags: ok"
