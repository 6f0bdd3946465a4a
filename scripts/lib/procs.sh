# Shell helpers for the scripts that start local processes (make run, the live benchmarks).
# Source it: `source "$(dirname "$0")/lib/procs.sh"`. The caller keeps its pids in the array `pids`.

# A free TCP / UDP port on 127.0.0.1.
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
free_udp_port() {
  python3 -c 'import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}

# wait_http URL [TRIES]: until URL answers 2xx, polling every 0.1 s (default 300 tries).
wait_http() {
  for _ in $(seq 1 "${2:-300}"); do
    if curl -fsS -o /dev/null "$1" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "timed out waiting for $1" >&2; return 1
}

# wait_port_file FILE: prints the port a process wrote there (our binaries write the whole line,
# newline included, and rename it into place), polling every 0.1 s for at most 30 s.
wait_port_file() {
  for _ in $(seq 1 300); do
    if [[ -s $1 ]] && [[ $(tail -c1 "$1" | od -An -c | tr -d ' ') == '\n' ]]; then head -1 "$1"; return 0; fi
    sleep 0.1
  done
  echo "timed out waiting for $1" >&2; return 1
}

# stop_pids: SIGTERM every pid in `pids`, newest first, waiting for each (routers before the
# agents they route to, agents before the etcd they publish to).
stop_pids() {
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[$i]}" 2>/dev/null || true
    wait "${pids[$i]}" 2>/dev/null || true
  done
}
