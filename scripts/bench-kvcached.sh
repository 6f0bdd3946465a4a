#!/usr/bin/env bash
# KV block bandwidth (method: bench/kvcached/README.md): cgn-kvcached-bench puts and gets blocks of
# SIZES bytes at THREADS concurrencies (one connection per thread) through
#   memcpy into memory of its own (the baseline), the daemon's local fast path (LocalClient),
#   its gRPC service on loopback (KvClient), and redis-server (libhiredis SET/GET) over TCP on
#   loopback and over a Unix socket;
# then SSD-tier reads: a second daemon with a small RAM tier (SSD_RAM_MIB) over an SSD tier in a
# temp dir is filled with SSD_MIB of SSD_BLOCK_BYTES blocks, and the blocks that went to the SSD
# tier are read back (gRPC and fast path, the segment files' cached pages dropped first with
# posix_fadvise DONTNEED) against a plain sequential read(2) of the same segment files.
# The fast path is measured one block a call (local) and in batches of BATCH blocks a call
# (local-batch: LocalClient::put_many/get_many, at most 4 MiB of blocks a call).
# Goals: fast path >= 0.5x memcpy and >= 2x Redis.
# Writes RESULT_DIR/kvcached-bandwidth.md and kvcached-bandwidth-raw.jsonl (RESULT_DIR:
# bench/results/<date>-<revision>/ unless set; nothing is overwritten).
# Usage: scripts/bench-kvcached.sh [BUILD_DIR]
# Knobs: SIZES (65536,1048576,4194304,16777216), THREADS (1,4), WORKING_SET_MIB (64, per thread
# and measurement), GET_ROUNDS (4), REPEATS (3: rounds over every path, median reported), RAM_MIB (1024), SSD_RAM_MIB (64), SSD_MIB (512),
# SSD_BLOCK_BYTES (1048576), BATCH (64), REDIS_SERVER (redis-server).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
BIN=$PWD/$BUILD_DIR/bin
SIZES=${SIZES:-65536,1048576,4194304,16777216}
THREADS=${THREADS:-1,4}
WORKING_SET_MIB=${WORKING_SET_MIB:-64}
GET_ROUNDS=${GET_ROUNDS:-4}
REPEATS=${REPEATS:-3}
RAM_MIB=${RAM_MIB:-1024}
SSD_RAM_MIB=${SSD_RAM_MIB:-64}
SSD_MIB=${SSD_MIB:-512}
SSD_BLOCK_BYTES=${SSD_BLOCK_BYTES:-1048576}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
BATCH=${BATCH:-64}
source scripts/lib/results.sh
source scripts/lib/procs.sh
source scripts/lib/kvcached-bench.sh
for b in cgn-kvcached cgn-kvcached-bench; do
  [[ -x $BIN/$b ]] || { echo "bench-kvcached: $BIN/$b missing; build it (cmake --build $BUILD_DIR --target $b)" >&2; exit 1; }
done
command -v "$REDIS_SERVER" >/dev/null || { echo "bench-kvcached: $REDIS_SERVER not found (Debian redis-server; scripts/bootstrap.sh)" >&2; exit 1; }
kvcached_results_dir kvcached-bandwidth.md kvcached-bandwidth-raw.jsonl
CMD="SIZES=$SIZES THREADS=$THREADS WORKING_SET_MIB=$WORKING_SET_MIB GET_ROUNDS=$GET_ROUNDS REPEATS=$REPEATS RAM_MIB=$RAM_MIB SSD_RAM_MIB=$SSD_RAM_MIB SSD_MIB=$SSD_MIB SSD_BLOCK_BYTES=$SSD_BLOCK_BYTES BATCH=$BATCH scripts/bench-kvcached.sh $BUILD_DIR"
PROVENANCE=$(provenance "$CMD")

WORK=$(mktemp -d /tmp/cgn-bench-kvcached-XXXXXX)
pids=()
cleanup() { stop_pids; rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/ssd" "$WORK/redis"
SSD_FACTS=$(fs_facts "$WORK/ssd")

# Redis: no persistence, memory for the largest measurement (all threads' working sets) twice over.
REDIS_PORT=$(free_port)
REDIS_SOCK=$WORK/redis/redis.sock
REDIS_MAXMEM=$((2 * 4 * WORKING_SET_MIB + 256))mb
"$REDIS_SERVER" --bind 127.0.0.1 --port "$REDIS_PORT" --unixsocket "$REDIS_SOCK" --unixsocketperm 700 \
  --save '' --appendonly no --maxmemory "$REDIS_MAXMEM" --dir "$WORK/redis" >"$WORK/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do [[ -S $REDIS_SOCK ]] && break; sleep 0.1; done
[[ -S $REDIS_SOCK ]] || { tail -20 "$WORK/redis.log" >&2; echo "bench-kvcached: redis-server did not start" >&2; exit 1; }
REDIS_VERSION=$("$REDIS_SERVER" --version | head -1)

start_kvcached ram $((RAM_MIB << 20))
RAM_GRPC=$KV_GRPC RAM_SOCKET=$KV_SOCKET
start_kvcached tiered $((SSD_RAM_MIB << 20)) "$WORK/ssd"
SSD_GRPC=$KV_GRPC SSD_SOCKET=$KV_SOCKET

echo "== cgn-kvcached-bench: sizes $SIZES, threads $THREADS; SSD: $SSD_FACTS" >&2
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
"$BIN/cgn-kvcached-bench" --sizes "$SIZES" --threads "$THREADS" --working-set-mib "$WORKING_SET_MIB" \
  --get-rounds "$GET_ROUNDS" --repeats "$REPEATS" --warm-mib "$RAM_MIB" --batch "$BATCH" --grpc "$RAM_GRPC" --socket "$RAM_SOCKET" \
  --redis-tcp "127.0.0.1:$REDIS_PORT" --redis-unix "$REDIS_SOCK" \
  --ssd-grpc "$SSD_GRPC" --ssd-socket "$SSD_SOCKET" --ssd-dir "$WORK/ssd" \
  --ssd-block-bytes "$SSD_BLOCK_BYTES" --ssd-mib "$SSD_MIB" | tee "$WORK/raw.jsonl" >&2

cp "$WORK/raw.jsonl" "$RESULT_DIR/kvcached-bandwidth-raw.jsonl"
echo "$PROVENANCE" >"$WORK/provenance.md"
python3 - "$WORK/raw.jsonl" "$RESULT_DIR/kvcached-bandwidth.md" "$WORK/provenance.md" <<PY
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
R = {(r["block_bytes"], r["path"], r["op"], r["threads"]): r for r in rows}
sizes = sorted({r["block_bytes"] for r in rows if not r["path"].startswith("ssd")})
threads = sorted({r["threads"] for r in rows if not r["path"].startswith("ssd")})
def size_name(b): return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
def g(b, p, op, t): r = R.get((b, p, op, t)); return r["gib_s"] if r else float("nan")
ok = lambda c: "met" if c else "**missed**"
out = []; w = out.append
w("# cgn-kvcached: block bandwidth against memcpy and Redis\n")
w(open(sys.argv[3]).read())
w("Generated by \`scripts/bench-kvcached.sh\` (method: [bench/kvcached/README.md](../../kvcached/README.md)); raw results in \`kvcached-bandwidth-raw.jsonl\`.\n")
w("## Setup\n")
w(f"- Load average before the measurements: $LOAD_BEFORE (the machine may be shared; every ratio compares measurements of this one run, interleaved per block size and concurrency).")
w(f"- Per block size and concurrency: each thread (its own connection) puts $WORKING_SET_MIB MiB of fresh blocks, then reads them all back $GET_ROUNDS times into its own buffer, checking each block's stamp. GiB/s = bytes of all threads / wall time (first thread's start to last thread's end). Each number is the median of $REPEATS rounds over every path, the paths in alternating order (every round in the raw file).")
w(f"- memcpy: the same bytes copied into and out of a pre-faulted region of the thread's own. local: the daemon's fast path one block a call (LocalClient: PUT_START, memcpy into the shared arena, PUT_END: two round trips; GET, memcpy out, RELEASE without an answer: one). local-batch: the same connection type, $BATCH blocks a call but at most 4 MiB of blocks (put_many: PUT_START_MANY, memcpy each, PUT_END_MANY; get_many: GET_MANY, memcpy each, RELEASE_MANY without an answer), the blocks in the thread's own buffers. grpc: KvClient on loopback (one channel per thread; streamed chunks). RAM tier $RAM_MIB MiB, no SSD tier.")
w("- Connections (fast path, gRPC, Redis) are opened once per thread and kept for the whole run, as an engine keeps its own; before any measurement every fast-path connection writes $RAM_MIB MiB (the arena's size), unmeasured, as a long-running engine's mapping is warm (LocalClient also maps the arena with MAP_POPULATE, so its first pass takes no page faults either). Each block size and concurrency starts with one unmeasured round over every path.")
w(f"- Redis: {'$REDIS_VERSION'.split(' sha=')[0]}, \`--save '' --appendonly no --maxmemory $REDIS_MAXMEM\`, libhiredis SET/GET (reply copied into the caller's buffer), FLUSHALL before each measurement; over TCP on 127.0.0.1 and over a Unix socket.")
w(f"- SSD tier: a second daemon with a $SSD_RAM_MIB MiB RAM tier over an SSD tier in a temp dir ($SSD_FACTS, direct_io = auto), filled with $SSD_MIB MiB of {size_name($SSD_BLOCK_BYTES)} blocks; the blocks BatchLookup reports on the SSD tier are read once each. Before each read pass every segment file gets fdatasync + posix_fadvise(DONTNEED) (its clean cached pages dropped; no root needed, the system-wide drop_caches was not used). Baseline: read(2) of the same segment files, sequentially, in {size_name($SSD_BLOCK_BYTES)} reads, after the same DONTNEED.\n")
w("## Goals\n")
w("| block | threads | op | local / memcpy (goal ≥ 0.5) | local-batch / memcpy (goal ≥ 0.5) | local / best Redis (goal ≥ 2) | local-batch / best Redis (goal ≥ 2) | grpc / best Redis |")
w("|---|---:|---|---:|---:|---:|---:|---:|")
for b in sizes:
    for t in threads:
        for op in ("put", "get"):
            loc = g(b, "local", op, t); lb = g(b, "local-batch", op, t); mc = g(b, "memcpy", op, t)
            red = max(g(b, "redis-tcp", op, t), g(b, "redis-unix", op, t))
            gr = g(b, "grpc", op, t)
            w(f"| {size_name(b)} | {t} | {op} | {loc/mc:.2f} {ok(loc >= 0.5*mc)} | {lb/mc:.2f} {ok(lb >= 0.5*mc)} | "
              f"{loc/red:.2f} {ok(loc >= 2*red)} | {lb/red:.2f} {ok(lb >= 2*red)} | {gr/red:.2f} |")
w("")
for b in sizes:
    w(f"## {size_name(b)} blocks (GiB/s)\n")
    w("| path | threads | put | get | put / memcpy | get / memcpy | put / Redis unix | get / Redis unix |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in threads:
        for p in ("memcpy", "local", "local-batch", "grpc", "redis-tcp", "redis-unix"):
            pu, ge = g(b, p, "put", t), g(b, p, "get", t)
            w(f"| {p} | {t} | {pu:.2f} | {ge:.2f} | {pu/g(b,'memcpy','put',t):.2f} | {ge/g(b,'memcpy','get',t):.2f} | "
              f"{pu/g(b,'redis-unix','put',t):.2f} | {ge/g(b,'redis-unix','get',t):.2f} |")
    w("")
ssd = [r for r in rows if r["path"].startswith("ssd")]
if ssd:
    seqs = [r for r in ssd if r["path"].startswith("ssd-seqread")]
    seq = max(seqs, key=lambda r: r["gib_s"]) if seqs else None
    w(f"## SSD-tier reads ({size_name(ssd[0]['block_bytes'])} blocks, GiB/s)\n")
    w(f"| path | threads | blocks read | MiB | GiB/s | / the faster sequential read ({seq['path'] if seq else '—'}) |")
    w("|---|---:|---:|---:|---:|---:|")
    for r in ssd:
        rel = r["gib_s"] / seq["gib_s"] if seq and seq["gib_s"] else float("nan")
        w(f"| {r['path']} | {r['threads']} | {r.get('blocks', '—')} | {r['bytes']/2**20:.0f} | {r['gib_s']:.2f} | {rel:.2f} |")
    w("\nssd-seqread reads every segment file of the SSD tier (records' headers and any block not read above included) with buffered read(2) after DONTNEED; ssd-seqread-direct the same with O_DIRECT (as the daemon reads where the filesystem takes it).\n")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
echo "results in $RESULT_DIR/kvcached-bandwidth.md" >&2
