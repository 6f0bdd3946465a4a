#!/usr/bin/env bash
# `make bench-report`: the performance report in one command.
# Runs the deterministic cluster simulator (`cgn-bench sim`) on the Mooncake conversation trace
# (16 nodes) and the llm-d shared-prefix shape (8 nodes), every policy at the fixed load levels
# 0.5 / 0.85 / 1.0, plus the micro-benchmarks (prefix digests, routing decision), draws the
# plots with gnuplot and writes report.md into a new folder bench/results/<date>-<revision>/
# (never over an older report: scripts/lib/results.sh). Beside the whole conversation trace it
# reports the held-out half: the kv weights are chosen on the even sessions (scripts/bench-tune.sh)
# and every policy is run on the odd ones. Then, alone and one after another because they
# measure wall time: the gateway against nginx (scripts/bench-proxy.sh), the agent's data-path
# overhead and etcd load (scripts/bench-agent.sh), the gossip backend (scripts/bench-gossip.sh,
# simulated time), prefill/decode (scripts/bench-pd-sim.sh in virtual time, scripts/bench-pd.sh
# live) and live against simulated (scripts/bench-live.sh). Each writes its own stamped
# file into the same folder; report.md quotes them.
#
#   scripts/bench-report.sh [BUILD_DIR]
# QUICK=1: the documented quick mode (about 5 minutes on 2 idle cores): level 0.85 only, the
#   first 2,000 requests of each workload, a 2-point tuning grid, one short proxy round, 300
#   agent requests and 10 s of etcd load, 10 and 100 gossip members. The report says so first.
# Overrides: OUT=folder (must not hold a report.md yet), JOBS=n, PLOTS=0 (no gnuplot: the plot
# data is still written and the report says how to draw it), LEVELS="0.85" and LIMIT=N (only the
# first N requests of each workload), and per part LIVE=0 PROXY=0 AGENT=0 GOSSIP=0 TUNE=0 PD=0 to skip
# it (the report says it was not measured).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
source scripts/lib/results.sh
DATE=$(date -u +%F)
if [ -n "${OUT:-}" ]; then
  refuse_overwrite "$OUT/report.md"
else
  OUT=$(new_results_dir)
fi
QUICK=${QUICK:-0}
if [[ $QUICK != 0 ]]; then
  LEVELS=${LEVELS:-0.85}
  LIMIT=${LIMIT:-2000}
fi
COMMAND="OUT=$OUT QUICK=$QUICK JOBS=${JOBS:-$(nproc)} LEVELS=\"${LEVELS:-0.5 0.85 1.0}\" LIMIT=${LIMIT:-0} LIVE=${LIVE:-1} PROXY=${PROXY:-1} AGENT=${AGENT:-1} GOSSIP=${GOSSIP:-1} TUNE=${TUNE:-1} PD=${PD:-1} PLOTS=${PLOTS:-1} scripts/bench-report.sh $BUILD_DIR"
PROVENANCE=$(provenance "$COMMAND")  # the revision and load when the run starts
commit=$(git rev-parse --short HEAD)
dirty=""
if ! git diff --quiet HEAD -- src 2>/dev/null; then
  dirty=" (with uncommitted changes under src/)"
fi
JOBS=${JOBS:-$(nproc)}
LEVELS=${LEVELS:-0.5 0.85 1.0}
read -r -a level_args <<<"$LEVELS"
LIMIT=${LIMIT:-0}
LIVE=${LIVE:-1}  # 0: skip the live run (a report-live-vs-sim.md already in OUT is included, marked)
PLOTS=${PLOTS:-1}
PROXY=${PROXY:-1}
AGENT=${AGENT:-1}
GOSSIP=${GOSSIP:-1}
TUNE=${TUNE:-1}
PD=${PD:-1}

if [[ $PLOTS != 0 ]] && ! command -v gnuplot >/dev/null 2>&1; then
  echo "bench-report: gnuplot is missing; run scripts/bootstrap.sh --bench (or PLOTS=0 for a report without plots)" >&2
  exit 1
fi

start=$(date +%s)
echo "bench-report: building cgn-bench, bench_core, bench_routing in $BUILD_DIR"
targets=(cgn-bench bench_core bench_routing)
if [[ $LIVE != 0 ]]; then
  targets+=(cgn-engine-sim cgn-router)
fi
if [[ $PROXY != 0 ]]; then
  targets+=(cgn-router cgn-loadgen cgn-canned-upstream)
fi
if [[ $AGENT != 0 ]]; then
  targets+=(cgn-agent cgn-agent-bench cgn-engine-sim cgn-router)
fi
if [[ $GOSSIP != 0 ]]; then
  targets+=(bench_state_gossip)
fi
if [[ $PD != 0 ]]; then
  targets+=(cgn-engine-sim cgn-router)
fi
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}" >/dev/null
BIN=$BUILD_DIR/bin/cgn-bench
mkdir -p "$OUT/plots"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TIMEFORMAT='%R %U %S'  # bash `time`: wall, user, sys seconds
build_s=$(($(date +%s) - start))

# The two sweeps run at the same time (each with -j JOBS): neither leaves a core idle while the
# other's last runs finish. Their numbers do not depend on it (virtual time).
echo "bench-report: Mooncake conversation trace (16 nodes) and llm-d shape (8 nodes), 5 policies at levels $LEVELS"
t=$(date +%s)
{ time "$BIN" sim -w conversation -j "$JOBS" --levels "${level_args[@]}" --limit "$LIMIT" --diagnose \
  --md "$tmp/conversation.md" --json "$OUT/sim-conversation.json" --plot-data "$OUT/plots/conversation" \
  >/dev/null 2>"$tmp/conversation.err"; } 2>"$tmp/conversation.time" &
conv_pid=$!
{ time "$BIN" sim -w llmd -j "$JOBS" --levels "${level_args[@]}" --limit "$LIMIT" --md "$tmp/llmd.md" \
  --json "$OUT/sim-llmd.json" --plot-data "$OUT/plots/llmd" >/dev/null 2>"$tmp/llmd.err"; } 2>"$tmp/llmd.time" &
llmd_pid=$!
wait "$conv_pid" || { cat "$tmp/conversation.err" >&2; exit 1; }
wait "$llmd_pid" || { cat "$tmp/llmd.err" >&2; exit 1; }
sims_s=$(($(date +%s) - t))
read -r conv_wall conv_user conv_sys <"$tmp/conversation.time"
read -r llmd_wall llmd_user llmd_sys <"$tmp/llmd.time"

# The held-out half: the kv weights chosen on the even sessions, every policy on the odd ones.
echo "bench-report: held-out split (weights tuned on the even sessions, reported on the odd ones)"
tune_note=""
held_wall=0 held_user=0 held_sys=0
{ time {
  if [[ $TUNE != 0 ]]; then
    tune_env=(RESULT_DIR="$OUT" JOBS="$JOBS" LIMIT="$LIMIT")
    if [[ $QUICK != 0 ]]; then
      tune_env+=(WEIGHTS="1 8" RATES="8000")
    fi
    env "${tune_env[@]}" scripts/bench-tune.sh "$BUILD_DIR" >"$tmp/tune.log" 2>&1 ||
      tune_note="scripts/bench-tune.sh failed in this run: $(tail -1 "$tmp/tune.log")"
  fi
  "$BIN" sim -w conversation --sessions odd -j "$JOBS" --levels "${level_args[@]}" --limit "$LIMIT" \
    --md "$tmp/odd.md" --json "$OUT/sim-conversation-odd.json" --plot-data "$OUT/plots/conversation-odd" \
    >/dev/null 2>"$tmp/odd.err" || { cat "$tmp/odd.err" >&2; exit 1; }
}; } 2>"$tmp/held.time"
read -r held_wall held_user held_sys <"$tmp/held.time"

draw_plots() {
  gnuplot -e "prefix='$OUT/plots/conversation'; out='$OUT/plots/conversation.svg'; \
title='Mooncake conversation trace, 16 simulated nodes'" bench/plots.gp
  gnuplot -e "prefix='$OUT/plots/llmd'; out='$OUT/plots/llmd.svg'; \
title='Shared prefix, llm-d shape (150 tenants x 6000-token prompts), 8 simulated nodes'" bench/plots.gp
  gnuplot -e "prefix='$OUT/plots/conversation-odd'; out='$OUT/plots/conversation-odd.svg'; \
title='Mooncake conversation trace, odd sessions (held out), 16 simulated nodes'" bench/plots.gp
}
if [[ $PLOTS != 0 ]]; then
  echo "bench-report: plots"
  draw_plots
fi
# The plot's image line, or a note saying how to draw it from the data this run wrote.
plot() {
  if [[ $PLOTS != 0 ]]; then
    echo "![$1](plots/$1.svg)"
  else
    echo "_Plot not drawn (PLOTS=0: no gnuplot on this host). Its data is plots/$1-*.dat; draw it with_"
    echo "_bench/plots.gp as scripts/bench-report.sh does (\`draw_plots\`)._"
  fi
}

echo "bench-report: micro-benchmarks"
{ time {
  "$BUILD_DIR/bench/bench_core" --benchmark_filter='BM_Blake3Raw/16384|BM_PrefixDigests/16384|BM_PrefixDigests/131072' \
    --benchmark_min_time=0.2 >"$tmp/digest.txt" 2>&1
  "$BUILD_DIR/bench/bench_routing" >"$tmp/routing.txt" 2>&1
}; } 2>"$tmp/micro.time"
read -r micro_wall micro_user micro_sys <"$tmp/micro.time"

# Live against simulated (scripts/bench-live.sh, small preset at engine time scale 1, ~35 s on an
# idle host): alone, after the sweeps, because a starved host delays live TTFTs.
live_note=""
live_wall=0 live_user=0 live_sys=0
if [[ $LIVE != 0 ]]; then
  echo "bench-report: live against simulated (scripts/bench-live.sh, small preset)"
  if { time BIN="$BUILD_DIR/bin" OUT="$OUT" NAME=report-live-vs-sim scripts/bench-live.sh >"$tmp/live.log" 2>&1; } \
    2>"$tmp/live.time"; then
    read -r live_wall live_user live_sys <"$tmp/live.time"
  else
    live_note="scripts/bench-live.sh failed in this run: $(tail -1 "$tmp/live.log")"
  fi
fi
# The remaining parts measure wall time (gossip excepted): alone, one after another. A part that
# fails is reported as failed with its last line; the others still run.
run_part() {  # NAME SWITCH ENV... -- SCRIPT ARGS...: runs a part into OUT unless the variable SWITCH is 0
  local name=$1 switch=$2
  local flag=${!switch}
  shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  printf -v "${name}_note" '%s' ""
  printf -v "${name}_wall" '%s' 0
  if [[ $flag == 0 ]]; then
    printf -v "${name}_note" '%s' "Not run by this report ($switch=0)."
    return 0
  fi
  echo "bench-report: $name ($1)"
  local t0
  t0=$(date +%s)
  if ! env RESULT_DIR="$OUT" "${envs[@]}" "$@" >"$tmp/$name.log" 2>&1; then
    printf -v "${name}_note" '%s' "$1 failed in this run: $(tail -1 "$tmp/$name.log")"
  fi
  printf -v "${name}_wall" '%s' $(($(date +%s) - t0))
}
proxy_env=() agent_env=() gossip_env=() pd_sim_env=()
if [[ $QUICK != 0 ]]; then
  pd_sim_env=(LIMIT=1000 LLMD_LIMIT=600 LLMD_LEVELS=0.85 CONV_LEVELS=0.85)
  proxy_env=(RUNS=1 DURATION=2 STREAM_DURATION=2 HOLD_STREAMS=1000 HOLD_SECONDS=1)
  agent_env=(REQUESTS=300 SECONDS_RUN=10)
  gossip_env=(SIZES=10,100)
fi
run_part proxy PROXY "${proxy_env[@]}" -- scripts/bench-proxy.sh "$BUILD_DIR"
run_part agent AGENT "${agent_env[@]}" BIN_DIR="$PWD/$BUILD_DIR/bin" -- scripts/bench-agent.sh "$BUILD_DIR"
run_part gossip GOSSIP "${gossip_env[@]}" -- scripts/bench-gossip.sh "$BUILD_DIR"
# Prefill/decode: the deterministic sweeps (CPU-bound), then the live comparison (wall time).
run_part pd_sim PD "${pd_sim_env[@]}" JOBS="$JOBS" -- scripts/bench-pd-sim.sh "$BUILD_DIR"
run_part pd_live PD OUT="$OUT" BIN="$BUILD_DIR/bin" NAME=pd-live -- scripts/bench-pd.sh

total_s=$(($(date +%s) - start))
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || echo unknown)
loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
# CPU seconds (user + sys) per phase, and what the run would take on an idle host with these
# cores: the sweeps are CPU-bound and parallel (their CPU over the cores, or the longer sweep's
# CPU over its JOBS threads, whichever is larger); micro-benchmarks and the live check run alone
# at their own wall time (they measure time), so they count with their CPU time here; the
# held-out runs count as CPU over the cores; proxy, agent and gossip at their wall time (the first
# two run fixed-length windows).
read -r conv_cpu llmd_cpu micro_cpu live_cpu idle_est < <(awk -v cu="$conv_user" -v cs="$conv_sys" \
  -v lu="$llmd_user" -v ls="$llmd_sys" -v mu="$micro_user" -v ms="$micro_sys" -v vu="$live_user" \
  -v vs="$live_sys" -v lw="$live_wall" -v n="$(nproc)" -v j="$JOBS" -v b="$build_s" \
  -v hu="$held_user" -v hs="$held_sys" -v pw="$proxy_wall" -v aw="$agent_wall" -v gw="$gossip_wall" \
  -v dw="$pd_sim_wall" -v ew="$pd_live_wall" 'BEGIN {
    c = cu + cs; l = lu + ls; m = mu + ms; v = vu + vs
    sweeps = (c + l) / n; if (c / j > sweeps) sweeps = c / j
    printf "%.0f %.0f %.0f %.0f %.0f\n", c, l, m, v,
      b + sweeps + (hu + hs) / n + m + (lw > v ? lw : v) + pw + aw + gw + dw + ew }')

# A part's file quoted under its section (title dropped, headings one level down, its own stamp
# kept), or why it is absent.
quote_part() {  # NAME FILE
  local note_var=${1}_note
  if [[ -n ${!note_var} ]]; then
    echo "_${!note_var}_"
  elif [[ -f $OUT/$2 ]]; then
    echo "From [$2]($2):"
    echo
    sed -e '1d' -e '2{/^$/d}' -e 's/^## /### /' "$OUT/$2"
  else
    echo "_Not measured: $2 is absent._"
  fi
}

# Headings of the simulator's markdown move one level down under the report's sections.
demote() { sed -e 's/^###/####/' "$1"; }

{
  echo "# Cognitora performance report — $DATE"
  echo
  echo "Written by \`make bench-report\` (scripts/bench-report.sh) at commit \`$commit\`$dirty on"
  echo "$(nproc) cores ($cpu), \`-j $JOBS\`, in **${total_s} s wall** (load average at the end: $loadavg)."
  echo "Definitions of every column: [docs/benchmarks.md](../../../docs/benchmarks.md)."
  echo
  echo "$PROVENANCE"
  echo
  echo "| phase | wall s | CPU s (user+sys) |"
  echo "|---|---:|---:|"
  echo "| build check | $build_s | |"
  echo "| conversation sweep ($((${#level_args[@]} * 5)) runs + ideal bound, with hit attribution) | ${conv_wall%.*} | $conv_cpu |"
  echo "| llm-d sweep ($((${#level_args[@]} * 5)) runs + ideal bound), beside it | ${llmd_wall%.*} | $llmd_cpu |"
  echo "| held-out split (tuning grid on the even sessions, sweep on the odd ones) | ${held_wall%.*} | $(awk -v u="$held_user" -v s="$held_sys" 'BEGIN{printf "%.0f", u + s}') |"
  echo "| micro-benchmarks | ${micro_wall%.*} | $micro_cpu |"
  echo "| live against simulated | ${live_wall%.*} | $live_cpu |"
  echo "| proxy against nginx | $proxy_wall | |"
  echo "| agent overhead and etcd load | $agent_wall | |"
  echo "| gossip (simulated members) | $gossip_wall | |"
  echo "| prefill/decode: simulated sweeps, then live | $pd_sim_wall + $pd_live_wall | |"
  echo
  echo "On an idle host with these $(nproc) cores the whole run would take about **${idle_est} s** (the sweeps'"
  echo "CPU time over the cores; the rest at its own time). Wall time above that is other work on"
  echo "the host."
  echo
  echo "Everything below the micro-benchmarks is simulated: N engines with the simulator's documented"
  echo "default node model (Llama-3.1-8B bf16 on one H100 SXM, vLLM V1; docs/sim.md), driven in virtual"
  echo "time through the routing core with the router's own digests, index, score and load guard and"
  echo "1 s scrape lag. The arrival rate is fixed per level so that round_robin would run at that"
  echo "utilisation; nothing is tuned per run. Same inputs, same numbers."
  echo
  if [[ $QUICK != 0 ]]; then
    echo "> **Quick mode** (QUICK=1): fewer levels, requests, tuning points, proxy runs, agent"
    echo "> requests and gossip members than the full report. For a look, not for publication."
    echo
  fi
  if [[ $LEVELS != "0.5 0.85 1.0" || $LIMIT != 0 ]]; then
    echo "> **Reduced run** (LEVELS=\"$LEVELS\", LIMIT=$LIMIT: only the first $LIMIT requests of each"
    echo "> workload when LIMIT > 0). Not the full benchmark: the levels and the ideal bound are"
    echo "> those of the shortened workload, and with one level the sweep plot has one point per"
    echo "> policy and the throughput column only tells whether that level meets p90 <= 2 s."
    echo
  fi
  echo "## 1. Routing quality: Mooncake conversation trace (16 nodes)"
  echo
  plot conversation
  echo
  demote "$tmp/conversation.md"
  echo
  echo "### Held out: the odd sessions"
  echo
  echo "The conversation trace's sessions (first two blocks of a prompt) are numbered in the order of"
  echo "their first request; the kv score's weights are chosen on the even ones by"
  echo "scripts/bench-tune.sh and every policy is reported here on the odd ones, which the choice"
  echo "never saw. The figures above are in-sample (the whole trace)."
  echo
  if [[ -n $tune_note ]]; then
    echo "_${tune_note}_"
  elif [[ -f $OUT/tune-even.md ]]; then
    echo "**The choice, on the even sessions** ([tune-even.md](tune-even.md)):"
    echo
    sed -n '/^[0-9]* requests/,$p' "$OUT/tune-even.md"
  else
    echo "_The tuning grid was not run by this report (TUNE=0)._"
  fi
  echo
  echo "**Every policy on the odd sessions:**"
  echo
  plot conversation-odd
  echo
  demote "$tmp/odd.md"
  echo
  echo "## 2. Routing quality: synthetic shared prefix, llm-d shape (8 nodes)"
  echo
  plot llmd
  echo
  demote "$tmp/llmd.md"
  echo
  echo "## 3. Micro-benchmarks"
  echo
  echo "### Prefix digests (src/core/digest_bench.cpp) against raw BLAKE3 in the same run"
  echo
  echo '```'
  grep -E '^(BM_|Run on|CPU|Benchmark|-{5})' "$tmp/digest.txt" || cat "$tmp/digest.txt"
  echo '```'
  echo
  echo "### Routing decision (src/routing/routing_bench.cpp): 64-digest prompt, 64 nodes, 1M index entries"
  echo
  echo '```'
  cat "$tmp/routing.txt"
  echo '```'
  echo
  echo "## 4. Gateway proxy overhead against nginx"
  echo
  quote_part proxy proxy.md
  echo
  echo "## 5. Agent data-path overhead and etcd load"
  echo
  quote_part agent agent-overhead.md
  echo
  if [[ -f $OUT/agent-etcd-load.md ]]; then
    sed -e '1s/^# /### /' -e 's/^## /#### /' "$OUT/agent-etcd-load.md"
    echo
  fi
  echo "## 6. Gossip backend (simulated members)"
  echo
  quote_part gossip gossip.md
  echo
  echo "## 7. Aggregated against disaggregated prefill/decode"
  echo
  quote_part pd_sim pd-sim.md
  echo
  quote_part pd_live pd-live.md
  echo
  echo "## 8. Live against simulated"
  echo
  if [[ -n $live_note ]]; then
    echo "_${live_note}_"
  elif [[ -f $OUT/report-live-vs-sim.md ]]; then
    if [[ $LIVE == 0 ]]; then
      echo "_Not run by this report (LIVE=0): the file below is from a separate run of scripts/bench-live.sh;_"
      echo "_its first line says when._"
      echo
    fi
    echo "scripts/bench-live.sh: the small shared-prefix preset (4 nodes, level 0.85) through \`cgn-bench sim\`"
    echo "and through real \`cgn-router\` + \`cgn-engine-sim\` processes on loopback at engine time scale 1"
    echo "(one model second = one wall second). Full file: [report-live-vs-sim.md](report-live-vs-sim.md); method and"
    echo "earlier runs, including the Mooncake slice: [docs/benchmarks-live.md](../../../docs/benchmarks-live.md)."
    echo
    # Its header and agreement tables, not the two full reports it carries.
    sed -n '/^## Simulated/q; /^# /d; s/^##/###/; p' "$OUT/report-live-vs-sim.md"
  else
    echo "_Not measured: $OUT/report-live-vs-sim.md is absent (LIVE=0)._"
  fi
} >"$OUT/report.md"

echo "bench-report: wrote $OUT/report.md and $OUT/plots/ in ${total_s} s"
