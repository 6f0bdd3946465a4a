// The RAM tier's put and get against memcpy of the same bytes, in the same run. A put is
// put_start (allocation, evicting the least recently used block once the arena is full), one
// copy into the arena, put_end; a get is the pinned lookup plus one copy out of the arena (what a
// reader of the block does with it). Each row's bytes/s compares with BM_Memcpy of its size.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/digest.h"
#include "kvcache/block_store.h"

namespace cgn::kvcache {
namespace {

constexpr uint64_t kArenaBytes = 256ull << 20;

std::vector<BlockKey> make_keys(size_t n) {
  std::vector<BlockKey> keys(n);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = blake3_hash("bench-block-" + std::to_string(i));
  }
  return keys;
}

std::unique_ptr<BlockStore> open_store() {
  StoreConfig cfg;
  cfg.ram_bytes = kArenaBytes;
  cfg.max_block_bytes = kArenaBytes;
  auto s = BlockStore::open(cfg, SteadyClock::instance());
  if (!s) {
    return nullptr;
  }
  return std::move(*s);
}

// The baseline: the same copy into successive blocks of an arena-sized buffer (as a put does).
void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src(n, 0x5a);
  std::vector<uint8_t> dst(kArenaBytes, 0);
  size_t off = 0;
  for (auto _ : state) {
    std::memcpy(dst.data() + off, src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
    off = off + 2 * n > dst.size() ? 0 : off + n;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}

// Every put is a new block: twice the arena's worth of keys, so past the first lap each put
// also evicts one.
void BM_Put(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto store = open_store();
  if (!store) {
    state.SkipWithError("open failed");
    return;
  }
  const std::vector<BlockKey> keys = make_keys(2 * kArenaBytes / n);
  std::vector<uint8_t> value(n, 0xa5);
  size_t i = 0;
  for (auto _ : state) {
    if (!store->put(keys[i], value)) {
      state.SkipWithError("put failed");
      return;
    }
    i = (i + 1) % keys.size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}

void BM_Get(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto store = open_store();
  if (!store) {
    state.SkipWithError("open failed");
    return;
  }
  const std::vector<BlockKey> keys = make_keys(kArenaBytes / n / 2);
  std::vector<uint8_t> value(n, 0xa5);
  for (const BlockKey& k : keys) {
    (void)store->put(k, value);
  }
  std::vector<uint8_t> out(n);
  size_t i = 0;
  for (auto _ : state) {
    auto h = store->get(keys[i]);
    if (!h) {
      state.SkipWithError("get failed");
      return;
    }
    std::memcpy(out.data(), h->data().data(), n);
    benchmark::DoNotOptimize(out.data());
    i = (i + 1) % keys.size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}

BENCHMARK(BM_Memcpy)->Arg(64 << 10)->Arg(4 << 20);
BENCHMARK(BM_Put)->Arg(64 << 10)->Arg(4 << 20);
BENCHMARK(BM_Get)->Arg(64 << 10)->Arg(4 << 20);

}  // namespace
}  // namespace cgn::kvcache

BENCHMARK_MAIN();
