#!/usr/bin/env bash
# Carbon-aware admission, end to end: cgn-router with [router.carbon] polling cgn-fake-carbon
# (Electricity Maps v3 on loopback) every POLL_MS, in front of cgn-fake-engine, while a client
# sends LOW_PER_TICK low-priority and one normal-priority chat request per tick. The fake grid's
# intensity is 300 gCO2/kWh, then 650 (over the 400 threshold), then 350 again. Every tick the
# router's /metrics is scraped: the timeline of the reading, the gate state and the low-priority
# requests admitted and deferred goes to RESULT_DIR/carbon-timeline.md (RESULT_DIR: a new
# bench/results/<date>-<revision>/ unless set; see scripts/lib/results.sh).
# Usage: scripts/bench-carbon.sh [BUILD_DIR]. Not part of `make test` (about 30 s).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
BIN=${BIN_DIR:-$PWD/$BUILD_DIR/bin}
source scripts/lib/results.sh
source scripts/lib/procs.sh
POLL_MS=${POLL_MS:-1000}
TICK_S=${TICK_S:-1}
LOW_PER_TICK=${LOW_PER_TICK:-5}
# Phases: seconds at each intensity (gCO2/kWh).
PHASES=${PHASES:-"8:300 10:650 10:350"}
THRESHOLD=400
use_results_dir carbon-timeline.md
cmd="POLL_MS=$POLL_MS TICK_S=$TICK_S LOW_PER_TICK=$LOW_PER_TICK PHASES='$PHASES' scripts/bench-carbon.sh $BUILD_DIR"

WORK=$(mktemp -d)
pids=()
trap 'stop_pids; rm -rf "$WORK"' EXIT

"$BIN/cgn-fake-carbon" --port-file "$WORK/carbon.port" --gco2 300 --em-token bench-em-token &
pids+=($!)
carbon_port=$(wait_port_file "$WORK/carbon.port")
"$BIN/cgn-fake-engine" --name n0 --model bench-model --port-file "$WORK/engine.port" &
pids+=($!)
engine_port=$(wait_port_file "$WORK/engine.port")
cat > "$WORK/cognitora.toml" <<TOML
[router]
listen = "127.0.0.1:0"

[router.carbon]
provider = "electricitymaps"
url = "http://127.0.0.1:$carbon_port"
zone = "DE"
token_env = "CGN_BENCH_EM_TOKEN"
threshold_gco2_per_kwh = $THRESHOLD
poll_interval_ms = $POLL_MS
TOML
CGN_BENCH_EM_TOKEN=bench-em-token "$BIN/cgn-router" --config "$WORK/cognitora.toml" \
  --node "http://127.0.0.1:$engine_port" --port-file "$WORK/router.port" --log-level warn \
  --poll-interval-ms 200 &
pids+=($!)
router_port=$(wait_port_file "$WORK/router.port")
R=http://127.0.0.1:$router_port
wait_http "$R/health"

body='{"model":"bench-model","messages":[{"role":"user","content":"carbon bench"}]}'
# metric NAME{LABELS}: the sample's value, or "-" when the router has none.
metric() { awk -v s="$1" 'index($0, s " ") == 1 { print $2; f = 1 } END { if (!f) print "-" }' "$WORK/metrics"; }
fmt1() { if [ "$1" = - ]; then echo -; else printf '%.1f' "$1"; fi; }
post() { curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -H "X-CGN-Priority: $1" -d "$body" "$R/v1/chat/completions"; }

rows=()
low_ok=0 low_429=0 normal_ok=0 normal_other=0 retry_after=-
t0=$(date +%s.%N)
for phase in $PHASES; do
  secs=${phase%%:*}
  g=${phase##*:}
  curl -fsS -X POST "http://127.0.0.1:$carbon_port/fake/set?gco2=$g" > /dev/null
  for _ in $(seq 1 $((secs / TICK_S))); do
    tick_ok=0 tick_429=0
    for _ in $(seq 1 "$LOW_PER_TICK"); do
      code=$(post low)
      if [ "$code" = 200 ]; then tick_ok=$((tick_ok + 1)); elif [ "$code" = 429 ]; then tick_429=$((tick_429 + 1)); fi
    done
    if [ "$tick_429" -gt 0 ]; then
      retry_after=$(curl -s -D - -o /dev/null -H 'Content-Type: application/json' -H 'X-CGN-Priority: low' \
        -d "$body" "$R/v1/chat/completions" | awk -F': ' 'tolower($1) == "retry-after" { gsub("\r", "", $2); print $2 }')
      retry_after=${retry_after:--}
      tick_429=$((tick_429 + 1))
    else
      retry_after=-
    fi
    if [ "$(post normal)" = 200 ]; then normal_ok=$((normal_ok + 1)); else normal_other=$((normal_other + 1)); fi
    low_ok=$((low_ok + tick_ok))
    low_429=$((low_429 + tick_429))
    curl -fsS "$R/metrics" > "$WORK/metrics"
    state=-
    for s in no_reading stale admit defer; do
      if [ "$(metric "cgn_router_carbon_gate_state{state=\"$s\"}")" = 1 ]; then state=$s; fi
    done
    t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    rows+=("| $t | $g | $(metric 'cgn_router_carbon_intensity_gco2_per_kwh{provider="electricitymaps",zone="DE"}') | $state | $(fmt1 "$(metric 'cgn_router_carbon_reading_age_seconds{provider="electricitymaps",zone="DE"}')") | $tick_ok | $tick_429 | $retry_after | $low_ok | $(metric 'cgn_router_admission_rejections_total{model="bench-model",reason="carbon"}') | $normal_ok |")
    sleep "$TICK_S"
  done
done

out=$RESULT_DIR/carbon-timeline.md
{
  echo "# Carbon-aware admission: metric timeline"
  echo
  provenance "$cmd"
  echo
  echo "cgn-router with \`[router.carbon]\` provider = \"electricitymaps\" polling cgn-fake-carbon (the Electricity"
  echo "Maps v3 wire format on loopback) every $POLL_MS ms, threshold $THRESHOLD gCO2/kWh, in front of one"
  echo "cgn-fake-engine. Each tick ($TICK_S s) the client sends $LOW_PER_TICK low-priority chat requests (plus one more"
  echo "to read Retry-After when any was deferred) and one normal-priority request, then scrapes /metrics."
  echo "Phases (seconds:gCO2/kWh set on the fake): $PHASES."
  echo
  echo "Columns: t (s since start); grid = the fake's intensity; reading = \`cgn_router_carbon_intensity_gco2_per_kwh\`;"
  echo "gate = the \`cgn_router_carbon_gate_state\` series at 1; age = \`cgn_router_carbon_reading_age_seconds\`;"
  echo "low 200 / low 429 = this tick's low-priority answers; Retry-After of a deferred one; low admitted (total);"
  echo "carbon rejections = \`cgn_router_admission_rejections_total{reason=\"carbon\"}\`; normal 200 (total)."
  echo
  echo "| t | grid | reading | gate | age | low 200 | low 429 | Retry-After | low admitted | carbon rejections | normal 200 |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Totals: low-priority admitted $low_ok, deferred $low_429; normal-priority 200 $normal_ok, other $normal_other."
} > "$out"
echo "wrote $out"
