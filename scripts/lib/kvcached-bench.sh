# Shell helpers of the cgn-kvcached benchmarks (scripts/bench-kvcached.sh,
# scripts/bench-kvcached-replay.sh). Source after scripts/lib/procs.sh and scripts/lib/results.sh;
# the caller sets BIN and WORK and keeps its pids in the array `pids`.

# The results folder: $RESULT_DIR, else bench/results/<UTC date>-<revision> (shared by the
# kvcached scripts run at one revision); fails when one of FILE... is already there.
kvcached_results_dir() {
  RESULT_DIR=${RESULT_DIR:-bench/results/$(date -u +%F)-$(results_revision)}
  use_results_dir "$@"
}

# start_kvcached NAME RAM_BYTES [SSD_DIR]: a cgn-kvcached on loopback (gRPC and metrics on free
# ports, the fast path on $WORK/NAME.sock); sets KV_GRPC, KV_SOCKET and KV_PID.
start_kvcached() {
  local name=$1 ram=$2 ssd=${3:-}
  {
    echo "[kvcached]"
    echo "listen = \"127.0.0.1:0\""
    echo "metrics_listen = \"127.0.0.1:0\""
    echo "socket = \"$WORK/$name.sock\""
    echo "ram_bytes = $ram"
    echo "max_block_bytes = $((ram < 64 << 20 ? ram : 64 << 20))"
    if [[ -n $ssd ]]; then echo "ssd_dir = \"$ssd\""; fi
  } >"$WORK/$name.toml"
  "$BIN/cgn-kvcached" --config "$WORK/$name.toml" --port-file "$WORK/$name.port" >"$WORK/$name.log" 2>&1 &
  KV_PID=$!
  pids+=("$KV_PID")
  local port
  port=$(wait_port_file "$WORK/$name.port") || { tail -20 "$WORK/$name.log" >&2; return 1; }
  KV_GRPC=127.0.0.1:$port
  KV_SOCKET=$WORK/$name.sock
}

# stop_pid PID: SIGTERM and wait.
stop_pid() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# fs_facts DIR: "<filesystem type>, O_DIRECT yes|no" of DIR.
fs_facts() {
  python3 - "$1" <<'PY'
import os, subprocess, sys
d = sys.argv[1]
fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", d], capture_output=True, text=True).stdout.strip()
fs = fs or subprocess.run(["stat", "-f", "-c", "%T", d], capture_output=True, text=True).stdout.strip() or "unknown"
probe = os.path.join(d, ".odirect-probe")
try:
    fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600)
    os.close(fd)
    direct = "yes"
except OSError:
    direct = "no"
finally:
    try:
        os.unlink(probe)
    except OSError:
        pass
print(f"{fs}, O_DIRECT {direct}")
PY
}
