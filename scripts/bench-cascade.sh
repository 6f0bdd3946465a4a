#!/usr/bin/env bash
# The streaming cascade against the large model alone: cgn-router with a [router.cascade] alias
# "auto" (step 1 "small", gated on the mean token logprob >= THRESHOLD; step 2 "large") in front of
# two cgn-engine-sim processes on loopback. The small one has the simulator's default node model
# (Llama-3.1-8B on one H100, docs/sim.md); the large one the same model with every per-step cost
# multiplied by LARGE_FACTOR (step overhead, prefill per token, decode per sequence): a model
# LARGE_FACTOR times costlier per token. The small model's confidence is 0.9 per token (logprob
# -0.105, accepted) except on "hard" prompts, where a rule-file item makes it 0.3 (-1.2,
# escalated). EASY_FRACTION of the prompts are easy: an input of the benchmark, not a result.
#
# The same workload (N streamed chat requests, CONCURRENCY clients in a closed loop, MAX_TOKENS
# each, ignore_eos) runs twice on the same processes: model "large" (baseline), then "auto"
# (cascade), each asking for the usage chunk. Per run: TTFT and end-to-end latency p50/p90 (client side: first content chunk, last
# byte), by prompt class, and the requests and generated tokens the large model served (router
# /metrics). Result: RESULT_DIR/cascade.md (a new bench/results/<date>-<revision>/ unless set;
# scripts/lib/results.sh). Usage: scripts/bench-cascade.sh [BUILD_DIR]. Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
BIN=${BIN_DIR:-$PWD/$BUILD_DIR/bin}
source scripts/lib/results.sh
source scripts/lib/procs.sh
N=${N:-120}
CONCURRENCY=${CONCURRENCY:-4}
EASY_FRACTION=${EASY_FRACTION:-0.7}
MAX_TOKENS=${MAX_TOKENS:-48}
THRESHOLD=${THRESHOLD:--0.5}
LARGE_FACTOR=${LARGE_FACTOR:-4}
use_results_dir cascade.md
cmd="N=$N CONCURRENCY=$CONCURRENCY EASY_FRACTION=$EASY_FRACTION MAX_TOKENS=$MAX_TOKENS THRESHOLD=$THRESHOLD LARGE_FACTOR=$LARGE_FACTOR scripts/bench-cascade.sh $BUILD_DIR"

WORK=$(mktemp -d)
pids=()
trap 'stop_pids; rm -rf "$WORK"' EXIT

echo "prompt:hardq confidence=0.3" > "$WORK/small.rules"
"$BIN/cgn-engine-sim" --flavor vllm --model m --served-model-name small --port 0 \
  --port-file "$WORK/small.port" --fault-rules "$WORK/small.rules" --log-level warn &
pids+=($!)
small_port=$(wait_port_file "$WORK/small.port")
scaled() { awk -v a="$1" -v f="$LARGE_FACTOR" 'BEGIN { printf "%g", a * f }'; }
# The node model's defaults (sim/node_model.h): 6 ms step overhead, 65 us per prefill token,
# 60 us per decode sequence.
"$BIN/cgn-engine-sim" --flavor vllm --model m --served-model-name large --port 0 \
  --port-file "$WORK/large.port" --log-level warn \
  --step-overhead-ms "$(scaled 6)" --prefill-us-per-token "$(scaled 65)" --decode-us-per-seq "$(scaled 60)" &
pids+=($!)
large_port=$(wait_port_file "$WORK/large.port")
cat > "$WORK/cognitora.toml" <<TOML
[router]
listen = "127.0.0.1:0"

[router.cascade.aliases.auto]
[[router.cascade.aliases.auto.steps]]
model = "small"
statistic = "mean"
threshold = $THRESHOLD
[[router.cascade.aliases.auto.steps]]
model = "large"

[[router.nodes]]
name = "small"
url = "http://127.0.0.1:$small_port"
models = ["small"]

[[router.nodes]]
name = "large"
url = "http://127.0.0.1:$large_port"
models = ["large"]
TOML
"$BIN/cgn-router" --config "$WORK/cognitora.toml" --port-file "$WORK/router.port" --log-level warn \
  --poll-interval-ms 200 &
pids+=($!)
router_port=$(wait_port_file "$WORK/router.port")
wait_http "http://127.0.0.1:$router_port/health"
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$router_port/health" | grep -q '"nodes_healthy":2'; then break; fi
  sleep 0.1
done

python3 - "$router_port" "$N" "$CONCURRENCY" "$EASY_FRACTION" "$MAX_TOKENS" "$WORK" <<'PY'
import http.client, json, random, sys, threading, time

port, n, conc, easy, max_tokens, work = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rng = random.Random(42)
# Which requests are hard: exactly round((1 - easy) * n) of them, at seeded-random positions.
hard = set(rng.sample(range(n), round((1 - easy) * n)))
words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]

def prompt(i):
    body = " ".join(rng.choice(words) for _ in range(150))
    return ("hardq " if i in hard else "") + f"question {i}: " + body

prompts = [prompt(i) for i in range(n)]

def one(model, i):
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompts[i]}],
                       "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    step = r.getheader("X-CGN-Cascade-Step", "-")
    ttft = None
    while True:
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data: ") and ttft is None and b'"content":"' in line and b'"content":""' not in line:
            ttft = time.perf_counter() - t0
    e2e = time.perf_counter() - t0
    c.close()
    return {"i": i, "status": r.status, "ttft": ttft, "e2e": e2e, "step": step, "hard": i in hard}

def run(model):
    out, lock, nxt = [], threading.Lock(), [0]
    def worker():
        while True:
            with lock:
                i = nxt[0]; nxt[0] += 1
            if i >= n:
                return
            res = one(model, i)
            with lock:
                out.append(res)
    ts = [threading.Thread(target=worker) for _ in range(conc)]
    t0 = time.perf_counter()
    for t in ts: t.start()
    for t in ts: t.join()
    return out, time.perf_counter() - t0

for model in ("large", "auto"):
    res, wall = run(model)
    json.dump({"model": model, "wall_s": wall, "results": res}, open(f"{work}/{model}.json", "w"))
    print(f"{model}: {len(res)} requests in {wall:.1f} s", file=sys.stderr)
PY
curl -fsS "http://127.0.0.1:$router_port/metrics" > "$WORK/metrics"

out=$RESULT_DIR/cascade.md
python3 - "$WORK" "$N" "$CONCURRENCY" "$EASY_FRACTION" "$MAX_TOKENS" "$THRESHOLD" "$LARGE_FACTOR" > "$WORK/table.md" <<'PY'
import json, sys
work, n, conc, easy, max_tokens, threshold, factor = sys.argv[1:8]
def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100
    lo = int(k); hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)
def metric(name):
    for line in open(f"{work}/metrics"):
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0
runs = {m: json.load(open(f"{work}/{m}.json")) for m in ("large", "auto")}
print("| run | prompts | requests | errors | TTFT p50 (ms) | TTFT p90 (ms) | end-to-end p50 (ms) | end-to-end p90 (ms) |")
print("|---|---|---|---|---|---|---|---|")
for m, label in (("large", "all to the large model"), ("auto", "cascade small -> large")):
    rs = runs[m]["results"]
    for cls, sel in (("all", lambda r: True), ("easy", lambda r: not r["hard"]), ("hard", lambda r: r["hard"])):
        rows = [r for r in rs if sel(r)]
        ok = [r for r in rows if r["status"] == 200 and r["ttft"] is not None]
        t = [r["ttft"] * 1000 for r in ok]; e = [r["e2e"] * 1000 for r in ok]
        print(f"| {label} | {cls} | {len(rows)} | {len(rows) - len(ok)} | {pct(t,50):.0f} | {pct(t,90):.0f} | {pct(e,50):.0f} | {pct(e,90):.0f} |")
auto = runs["auto"]["results"]
steps = {}
for r in auto:
    steps[r["step"]] = steps.get(r["step"], 0) + 1
print()
print(f"Cascade answers by step (X-CGN-Cascade-Step): " + ", ".join(f"step {k}: {v}" for k, v in sorted(steps.items())) + ".")
large_req = metric('cgn_router_requests_total{model="large",endpoint="chat",code="200"}')
large_tok = metric('cgn_router_generation_tokens_total{model="large"}')
base_req = len([r for r in runs["large"]["results"] if r["status"] == 200])
casc_large = large_req - base_req
print(f"Large-model requests: {base_req} without the cascade, {casc_large:.0f} with it: "
      f"{100 * (1 - casc_large / base_req):.1f}% of its requests (and of its generated tokens, at a fixed "
      f"{max_tokens} per request) saved.")
acc = metric('cgn_router_cascade_steps_total{alias="auto",step="1",outcome="accepted"}')
esc = metric('cgn_router_cascade_steps_total{alias="auto",step="1",outcome="escalated"}')
gate_sum = metric('cgn_router_cascade_gate_seconds_sum{alias="auto"}')
gate_n = metric('cgn_router_cascade_gate_seconds_count{alias="auto"}')
print(f"Router counters: large model {large_req:.0f} requests / {large_tok:.0f} generated tokens over both runs; "
      f"step 1 accepted {acc:.0f}, escalated {esc:.0f}; gate time {gate_sum:.2f} s over {gate_n:.0f} gated steps "
      f"(mean {1000 * gate_sum / max(gate_n, 1):.0f} ms).")
print(f"Wall time: {runs['large']['wall_s']:.1f} s without, {runs['auto']['wall_s']:.1f} s with the cascade.")
PY
{
  echo "# Streaming cascade: latency and large-model load"
  echo
  provenance "$cmd"
  echo
  echo "cgn-router, alias \`auto\` = step 1 \`small\` (gated: mean token logprob >= $THRESHOLD) then step 2"
  echo "\`large\`, over two cgn-engine-sim processes on loopback: \`small\` with the simulator's default node model"
  echo "(Llama-3.1-8B on one H100), \`large\` with every per-step cost x$LARGE_FACTOR. Workload (inputs): $N streamed chat"
  echo "requests, $CONCURRENCY clients in a closed loop, about 160-token prompts, $MAX_TOKENS generated tokens each"
  echo "(ignore_eos); a fraction $EASY_FRACTION of the prompts are easy (the small model's token confidence 0.9, accepted),"
  echo "the rest hard (0.3, escalated; a simulator rule-file item). Baseline: the same requests with model \`large\`."
  echo "TTFT = first content chunk at the client; end-to-end = last byte; both from the client's send."
  echo
  cat "$WORK/table.md"
} > "$out"
cat "$out"
echo "wrote $out"
