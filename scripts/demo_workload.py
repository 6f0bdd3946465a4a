#!/usr/bin/env python3
"""A short multi-tenant demo workload for `make run` (Python standard library only).

Sends streamed chat requests from a few tenants, each with its own long system prompt, through
the router and prints which node served each tenant, the time to first token (p50/p90, measured
here: request sent to the first content chunk) and the prompt-cache hit rate the engines reported
(usage.prompt_tokens_details.cached_tokens), so the effect of the routing policy is visible at a
glance. --summary appends one JSON line per run (policy, hit rate, TTFT) for scripts/run.sh.
"""
import argparse
import collections
import json
import sys
import time
import urllib.error
import urllib.request

# Five tenants over three nodes: coprime, so round-robin cannot line up with tenants by accident.
TENANTS = ["acme", "globex", "initech", "umbrella", "hooli"]
WORDS = ("cluster replica prefix cache block digest router engine token latency decode "
         "prefill batch queue tenant policy score load power shard").split()


def system_prompt(tenant: str) -> str:
    # ~6 KB of deterministic text per tenant: a long shared prefix, like a real system prompt.
    out, x = [], sum(map(ord, tenant)) * 2654435761 % 2**32
    for i in range(1100):
        x = (x * 1103515245 + 12345) % 2**31
        out.append(WORDS[x % len(WORDS)])
        if i % 16 == 15:
            out.append("\n")
    return f"You are {tenant}'s assistant.\n" + " ".join(out)


def chat(endpoint: str, model: str, tenant: str, question: str, api_key: str | None):
    body = {
        "model": model,
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": system_prompt(tenant)},
            {"role": "user", "content": question},
        ],
    }
    req = urllib.request.Request(
        endpoint + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    if api_key:
        req.add_header("Authorization", "Bearer " + api_key)
    start = time.monotonic()
    ttft = None
    usage = {}
    with urllib.request.urlopen(req, timeout=60) as resp:
        node = resp.headers.get("X-CGN-Node", "?")
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if ttft is None and any((c.get("delta") or {}).get("content") for c in event.get("choices") or []):
                ttft = time.monotonic() - start
            usage = event.get("usage") or usage
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return node, usage.get("prompt_tokens", 0), cached, ttft if ttft is not None else time.monotonic() - start


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(q / 100.0 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--endpoint", required=True, help="router base URL, e.g. http://127.0.0.1:8080")
    ap.add_argument("--model", default="demo-model")
    ap.add_argument("--policy", default="", help="label printed with the results")
    ap.add_argument("--rounds", type=int, default=4, help="requests per tenant")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--summary", default=None, help="append one JSON line with the results here")
    args = ap.parse_args()

    served = collections.defaultdict(collections.Counter)
    prompt_total = cached_total = errors = 0
    ttfts = []
    for r in range(args.rounds):
        for t in TENANTS:
            try:
                node, prompt, cached, ttft = chat(args.endpoint, args.model, t, f"Question {r} from {t}?",
                                                  args.api_key)
            except (urllib.error.URLError, TimeoutError, ValueError) as e:
                errors += 1
                print(f"  request failed: {e}", file=sys.stderr)
                continue
            served[t][node] += 1
            prompt_total += prompt
            cached_total += cached
            ttfts.append(ttft)
    hit = 100.0 * cached_total / prompt_total if prompt_total else 0.0
    p50, p90 = percentile(ttfts, 50) * 1000, percentile(ttfts, 90) * 1000
    label = f"policy {args.policy}" if args.policy else "results"
    print(f"{label}: TTFT p50 {p50:6.1f} ms, p90 {p90:6.1f} ms, cache hit rate {hit:5.1f}% "
          f"({cached_total}/{prompt_total} prompt tokens), {errors} errors")
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as f:
            f.write(json.dumps({"policy": args.policy, "requests": len(ttfts), "errors": errors,
                                "hit_rate": hit, "ttft_p50_ms": p50, "ttft_p90_ms": p90}) + "\n")
    for t in TENANTS:
        nodes = ", ".join(f"{n}×{c}" for n, c in sorted(served[t].items()))
        print(f"    {t:<9} -> {nodes}")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
