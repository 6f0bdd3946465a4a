#!/usr/bin/env bash
# The dashboard's browser suite against a real router: 3 cgn-engine-sim + cgn-router on
# loopback, with a bounded background workload so every chart has data, then
# tests/browser/run.sh --endpoint <router>/metrics. Stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${CGN_BIN_DIR:-build/bin}
RUN_DIR=$(mktemp -d /tmp/cgn-browser-router.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$RUN_DIR"
}
trap cleanup EXIT
wait_file() { for _ in $(seq 1 300); do [[ -s $1 ]] && { head -1 "$1"; return 0; }; sleep 0.1; done; return 1; }

args=()
for i in 1 2 3; do
  "$BIN/cgn-engine-sim" --flavor vllm --model demo-model --port 0 --port-file "$RUN_DIR/s$i" \
    --time-scale 0.05 >"$RUN_DIR/s$i.log" 2>&1 &
  pids+=($!)
done
for i in 1 2 3; do args+=(--node "http://127.0.0.1:$(wait_file "$RUN_DIR/s$i")"); done
"$BIN/cgn-router" --listen 127.0.0.1:0 --port-file "$RUN_DIR/r" --policy kv "${args[@]}" \
  >"$RUN_DIR/router.log" 2>&1 &
pids+=($!)
port=$(wait_file "$RUN_DIR/r")
endpoint="http://127.0.0.1:$port"
# Bounded workload: at most 2,000 requests or 120 s, whichever comes first.
python3 - "$endpoint" >"$RUN_DIR/load.log" 2>&1 <<'PY' &
import json, sys, time, urllib.request
ep = sys.argv[1]; end = time.time() + 120
for i in range(2000):
    if time.time() > end: break
    body = {"model": "demo-model", "max_tokens": 8, "stream": i % 2 == 0,
            "messages": [{"role": "system", "content": f"tenant {i % 5} " * 200},
                         {"role": "user", "content": f"q{i}"}]}
    req = urllib.request.Request(ep + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=10).read()
    except Exception as e:
        print("request failed:", e)
    time.sleep(0.02)
PY
pids+=($!)
tests/browser/run.sh --endpoint "$endpoint/metrics"
