#!/usr/bin/env bash
# gRPC Generate against HTTP chat for the same request, in the same run, through one router
# (bench_router_grpc: RouterApp + [router.grpc] in front of an in-process fake engine with no
# token delay, clients on loopback that keep their connections). Writes RESULT_DIR/grpc-vs-http.md
# (RESULT_DIR: a new bench/results/<date>-<revision>/ unless set; see scripts/lib/results.sh):
# the time per request of each protocol, buffered and streamed (1 and 64 tokens), the gRPC
# overhead per request and the time per streamed token of each (the slope between 1 and 64).
# Usage: scripts/bench-grpc.sh [BUILD_DIR]. Not part of `make test` (about a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
BENCH=$BUILD_DIR/bench/bench_router_grpc
REPS=${REPS:-5}
source scripts/lib/results.sh
[ -x "$BENCH" ] || { echo "bench-grpc: $BENCH not built (cmake --build $BUILD_DIR --target bench_router_grpc)" >&2; exit 1; }
use_results_dir grpc-vs-http.md grpc-vs-http.json
cmd="REPS=$REPS scripts/bench-grpc.sh $BUILD_DIR"
{
  echo "# gRPC Generate vs HTTP chat (same router, same request, same run)"
  echo
  provenance "$cmd"
  echo
} > "$RESULT_DIR/grpc-vs-http.md"
"$BENCH" --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
  --benchmark_min_time=0.5 --benchmark_format=json > "$RESULT_DIR/grpc-vs-http.json"
python3 - "$RESULT_DIR/grpc-vs-http.json" >> "$RESULT_DIR/grpc-vs-http.md" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
med = {r["run_name"].removesuffix("/real_time"): r["real_time"] for r in runs if r.get("aggregate_name") == "median"}
def t(name):
    return med[name]
rows = [("buffered, 1 token", "BM_Http_Buffered/tokens:1", "BM_Grpc_Buffered/tokens:1"),
        ("streamed, 1 token", "BM_Http_Stream/tokens:1", "BM_Grpc_Stream/tokens:1"),
        ("streamed, 64 tokens", "BM_Http_Stream/tokens:64", "BM_Grpc_Stream/tokens:64")]
print("Median of the repetitions, microseconds per whole request (client to engine and back).")
print()
print("| request | HTTP µs | gRPC µs | gRPC added µs |")
print("|---|---|---|---|")
for label, h, g in rows:
    print(f"| {label} | {t(h):.1f} | {t(g):.1f} | {t(g) - t(h):+.1f} |")
ph = (t("BM_Http_Stream/tokens:64") - t("BM_Http_Stream/tokens:1")) / 63
pg = (t("BM_Grpc_Stream/tokens:64") - t("BM_Grpc_Stream/tokens:1")) / 63
print()
print("| per streamed token | HTTP µs | gRPC µs | gRPC added µs |")
print("|---|---|---|---|")
print(f"| slope 1 → 64 tokens | {ph:.2f} | {pg:.2f} | {pg - ph:+.2f} |")
PY
echo "bench-grpc: $RESULT_DIR/grpc-vs-http.md"
cat "$RESULT_DIR/grpc-vs-http.md"
