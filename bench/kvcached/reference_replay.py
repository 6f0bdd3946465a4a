#!/usr/bin/env python3
"""Reference replay of a Mooncake trace's blocks through one LRU cache (standard library only).

Each hash_id of a request is one block. Per request, in trace order:
  1. hits += the length of the longest leading run of the request's hash_ids that are resident;
  2. every hash_id of the request, in order, is inserted (or, when resident, moved to the most
     recently used end); past `capacity` blocks the least recently used block is dropped.
The hit rate is hits / (all blocks of all requests). cgn-kvcached-replay measures the daemon
against this (bench/kvcached/README.md); on the conversation trace it gives 28.75 % with a
capacity of 20,000 blocks and 36.64 % unbounded.

Usage: reference_replay.py [--trace PATH] [--capacity N] [--limit K] [--json]
"""
import argparse
import collections
import gzip
import json
import os
import sys

DEFAULT_TRACE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "traces",
                             "conversation_trace.jsonl.gz")


def read_requests(path, limit):
    """Yields each request's hash_ids, the first `limit` requests (all when limit is 0)."""
    opener = gzip.open if path.endswith(".gz") else open
    count = 0
    with opener(path, "rt", encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            if limit and count >= limit:
                return
            try:
                ids = json.loads(line)["hash_ids"]
            except (ValueError, KeyError, TypeError) as e:
                raise SystemExit(f"{path}:{line_no}: not a trace line ({e})")
            if not isinstance(ids, list) or not all(isinstance(i, int) and i >= 0 for i in ids):
                raise SystemExit(f"{path}:{line_no}: hash_ids must be a list of non-negative integers")
            count += 1
            yield ids


def replay(requests, capacity):
    """Returns (requests, blocks, hits) of an LRU cache of `capacity` blocks (0: unbounded)."""
    lru = collections.OrderedDict()  # hash_id -> None, least recently used first
    n_requests = blocks = hits = 0
    for ids in requests:
        n_requests += 1
        blocks += len(ids)
        for i in ids:
            if i not in lru:
                break
            hits += 1
        for i in ids:
            if i in lru:
                lru.move_to_end(i)
            else:
                lru[i] = None
                if capacity and len(lru) > capacity:
                    lru.popitem(last=False)
    return n_requests, blocks, hits


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=DEFAULT_TRACE, help="Mooncake trace (JSON Lines, .gz or plain)")
    ap.add_argument("--capacity", type=int, default=0, help="blocks the cache holds (0: unbounded)")
    ap.add_argument("--limit", type=int, default=0, help="replay only the first K requests (0: all)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = ap.parse_args()
    if args.capacity < 0 or args.limit < 0:
        ap.error("--capacity and --limit must be >= 0")
    try:
        n, blocks, hits = replay(read_requests(args.trace, args.limit), args.capacity)
    except OSError as e:
        raise SystemExit(f"reference_replay: {e}")
    rate = 100.0 * hits / blocks if blocks else 0.0
    if args.json:
        print(json.dumps({"requests": n, "blocks": blocks, "hits": hits, "capacity": args.capacity,
                          "hit_rate_pct": rate}))
    else:
        cap = f"{args.capacity} blocks" if args.capacity else "unbounded"
        print(f"requests {n}, blocks {blocks}, hits {hits}, capacity {cap}: hit rate {rate:.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
