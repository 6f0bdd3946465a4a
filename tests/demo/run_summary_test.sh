#!/usr/bin/env bash
# `make run`'s summary, parsed: the local cluster demo (scripts/local-cluster.sh, 3 rounds per
# tenant, stopping after the summary) must print TTFT p50/p90 and the hit rate for every policy,
# the kv-over-round-robin line, and kv must beat round robin on TTFT p50.
#   tests/demo/run_summary_test.sh BIN_DIR
set -euo pipefail
bin="${1:?usage: run_summary_test.sh BIN_DIR}"
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
CGN_PORT=0 CGN_DEMO_ROUNDS=3 CGN_DEMO_EXIT=1 BIN="$bin" scripts/local-cluster.sh >"$out" 2>&1 || {
  cat "$out"
  echo "FAIL: the demo exited with an error"
  exit 1
}
echo "demo took $(($(date +%s) - start)) s"
cat "$out"
p50() { awk -v p="$1" '$1 == p && $3 == "ms" {print $2}' "$out"; }
for policy in round_robin random least_load session kv; do
  [[ -n $(p50 "$policy") ]] || { echo "FAIL: no summary row for $policy"; exit 1; }
done
grep -q '^kv vs round_robin: TTFT p50 ' "$out" || { echo "FAIL: no kv vs round_robin line"; exit 1; }
kv=$(p50 kv)
rr=$(p50 round_robin)
if ! awk -v kv="$kv" -v rr="$rr" 'BEGIN {exit !(kv < rr)}'; then
  echo "FAIL: kv TTFT p50 $kv ms is not below round_robin's $rr ms"
  exit 1
fi
echo "PASS: kv TTFT p50 $kv ms < round_robin $rr ms"
