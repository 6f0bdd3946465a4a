// The client-side work on the agent's and router's paths: splitting an
// agent's digest keys (up to its 4096-key cap) into txns, and applying watch
// events and full re-reads to a PrefixMirror's map. Baseline: the same keys
// inserted into a bare std::map, the floor any mirror pays.
#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

#include "core/digest_types.h"
#include "state/etcd/batch.h"
#include "state/etcd/keys.h"
#include "state/etcd/prefix_mirror.h"

namespace cgn::etcd {
namespace {

std::vector<std::string> digest_keys(size_t n) {
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    Digest d{};
    for (size_t b = 0; b < d.size(); ++b) {
      d[b] = static_cast<uint8_t>((i * 131 + b * 17) >> (b % 3));
    }
    d[0] = static_cast<uint8_t>(i);
    d[1] = static_cast<uint8_t>(i >> 8);
    out.push_back(keys::kv_key("gpu-01", d));
  }
  return out;
}

void BM_split_txn_batch(benchmark::State& state) {
  std::vector<TxnOp> ops;
  for (const auto& k : digest_keys(static_cast<size_t>(state.range(0)))) {
    ops.push_back(TxnOp::put(k, "", 0x1234));
  }
  for (auto _ : state) {
    auto chunks = split_txn_batch(ops);
    benchmark::DoNotOptimize(chunks);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_split_txn_batch)->Arg(128)->Arg(4096);

std::vector<WatchEvent> put_events(const std::vector<std::string>& ks) {
  std::vector<WatchEvent> events;
  int64_t rev = 1;
  for (const auto& k : ks) {
    WatchEvent e;
    e.kv.key = k;
    e.kv.mod_revision = rev++;
    events.push_back(std::move(e));
  }
  return events;
}

void BM_mirror_apply_events(benchmark::State& state) {
  auto events = put_events(digest_keys(static_cast<size_t>(state.range(0))));
  MirrorCallbacks cb;
  for (auto _ : state) {
    MirrorState s;
    s.apply(events, cb);
    benchmark::DoNotOptimize(s.map().size());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_mirror_apply_events)->Arg(4096);

void BM_baseline_map_insert(benchmark::State& state) {
  auto events = put_events(digest_keys(static_cast<size_t>(state.range(0))));
  for (auto _ : state) {
    std::map<std::string, KeyValue> m;
    for (const auto& e : events) {
      m[e.kv.key] = e.kv;
    }
    benchmark::DoNotOptimize(m.size());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_baseline_map_insert)->Arg(4096);

void BM_mirror_reset_unchanged(benchmark::State& state) {
  auto events = put_events(digest_keys(static_cast<size_t>(state.range(0))));
  std::vector<KeyValue> read;
  for (const auto& e : events) {
    read.push_back(e.kv);
  }
  MirrorState s;
  MirrorCallbacks cb;
  s.reset(read, 1, cb);
  for (auto _ : state) {
    s.reset(read, 1, cb);  // a resync that finds nothing changed
    benchmark::DoNotOptimize(s.map().size());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_mirror_reset_unchanged)->Arg(4096);

}  // namespace
}  // namespace cgn::etcd
BENCHMARK_MAIN();
