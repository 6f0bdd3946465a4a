#!/usr/bin/env bash
# Runs every micro-benchmark binary in BUILD_DIR/bench and prints its report.
# Benchmarks compare against a baseline measured in the same run (ratios).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
OUT=${BENCH_OUT:-$BUILD_DIR/bench-results}
mkdir -p "$OUT"
for b in "$BUILD_DIR"/bench/bench_*; do
  [[ -x $b ]] || continue
  name=$(basename "$b")
  echo "== $name"
  "$b" --benchmark_out="$OUT/$name.json" --benchmark_out_format=json | tee "$OUT/$name.txt"
done
echo "results in $OUT"
