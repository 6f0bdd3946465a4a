#!/usr/bin/env bash
# Runs every libFuzzer target in BUILD_DIR/fuzz for SECONDS each, starting from its
# seed corpus (tests/fuzz/corpus/<name>/). New inputs go to a scratch corpus under
# BUILD_DIR; copy interesting ones into tests/fuzz/corpus/<name>/ by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build-fuzz}
SECONDS_EACH=${2:-60}
status=0
for target in "$BUILD_DIR"/fuzz/fuzz_*; do
  [[ -x $target ]] || continue
  name=$(basename "$target")
  name=${name#fuzz_}
  seeds=tests/fuzz/corpus/$name
  scratch=$BUILD_DIR/fuzz-corpus/$name
  mkdir -p "$scratch"
  echo "fuzz: $name for ${SECONDS_EACH}s (seeds: $seeds)"
  if ! "$target" -max_total_time="$SECONDS_EACH" -max_len=65536 -rss_limit_mb=2048 \
      -print_final_stats=1 "$scratch" "$seeds" 2>"$BUILD_DIR/fuzz-$name.log"; then
    echo "fuzz: $name FOUND A CRASH — see $BUILD_DIR/fuzz-$name.log"
    status=1
  fi
  tail -n 12 "$BUILD_DIR/fuzz-$name.log" | grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' || true
done
exit $status
