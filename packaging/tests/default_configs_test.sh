#!/usr/bin/env bash
# The default configurations the package installs in /etc/cognitora load in the binaries that read
# them: cgn-kvcached and cgn-power --print-config, cgn-agent --print-command (the engine line it would run), and
# cgn-router started on loopback with its file (the etcd it names need not answer: the router keeps
# running and retrying) then stopped.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin_dir="${1:?usage: default_configs_test.sh BIN_DIR}"
etc="$here/etc/cognitora"

"$bin_dir/cgn-kvcached" --config "$etc/kvcached.toml" --print-config >/dev/null
echo "ok: kvcached.toml"
"$bin_dir/cgn-power" --config "$etc/power.toml" --print-config >/dev/null
echo "ok: power.toml"
line="$("$bin_dir/cgn-agent" --config "$etc/agent.toml" --print-command)"
[[ "$line" == "vllm serve "* ]] || { echo "FAIL: agent.toml gives: $line" >&2; exit 1; }
echo "ok: agent.toml ($line)"

tmp="$(mktemp -d)"
"$bin_dir/cgn-router" --config "$etc/router.toml" --listen 127.0.0.1:0 --port-file "$tmp/port" \
  --etcd http://127.0.0.1:1 >"$tmp/log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 300); do
  [[ -s "$tmp/port" ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [[ ! -s "$tmp/port" ]]; then
  echo "FAIL: cgn-router did not start with router.toml:" >&2
  cat "$tmp/log" >&2
  exit 1
fi
kill -TERM "$pid"
wait "$pid"
echo "ok: router.toml (listened on port $(cat "$tmp/port"), stopped cleanly)"
