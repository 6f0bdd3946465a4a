#!/usr/bin/env python3
"""The `make run` summary: TTFT p50/p90 and cache hit rate per routing policy (the JSON lines that
scripts/demo_workload.py --summary appends), then the kv policy's gain over round robin in one
line. Standard library only."""
import json
import sys


def main() -> int:
    rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
    print(f"{'policy':<12} {'TTFT p50':>10} {'TTFT p90':>10} {'cache hit':>10} {'errors':>7}")
    for r in rows:
        print(f"{r['policy']:<12} {r['ttft_p50_ms']:>7.1f} ms {r['ttft_p90_ms']:>7.1f} ms "
              f"{r['hit_rate']:>9.1f}% {r['errors']:>7}")
    by = {r["policy"]: r for r in rows}
    kv, rr = by.get("kv"), by.get("round_robin")
    if kv and rr and kv["ttft_p50_ms"] > 0:
        print(f"kv vs round_robin: TTFT p50 {kv['ttft_p50_ms']:.1f} ms vs {rr['ttft_p50_ms']:.1f} ms "
              f"({rr['ttft_p50_ms'] / kv['ttft_p50_ms']:.1f}x faster), p90 {kv['ttft_p90_ms']:.1f} ms vs "
              f"{rr['ttft_p90_ms']:.1f} ms, cache hit {kv['hit_rate']:.1f}% vs {rr['hit_rate']:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
