// Hot-path cost of the metrics registry. Baseline: a bare relaxed atomic add, which a handle's
// inc() should match (it is one, behind a null check). Google Benchmark's main comes from
// benchmark_main (see src/core/CMakeLists.txt).
#include <benchmark/benchmark.h>

#include <atomic>
#include <string>

#include "core/metrics.h"

namespace {

using cgn::metrics::Registry;

void BM_BaselineAtomicAdd(benchmark::State& state) {
  static std::atomic<uint64_t> v{0};
  for (auto _ : state) {
    v.fetch_add(1, std::memory_order_relaxed);
  }
  benchmark::DoNotOptimize(v.load());
}
BENCHMARK(BM_BaselineAtomicAdd)->Threads(1)->Threads(4);

void BM_CounterInc(benchmark::State& state) {
  static Registry reg;
  static cgn::metrics::Counter c = reg.counter("cgn_bench_total", "B.", {"model"}).with({"m"});
  for (auto _ : state) {
    c.inc();
  }
  benchmark::DoNotOptimize(c.value());
}
BENCHMARK(BM_CounterInc)->Threads(1)->Threads(4);

// The per-event lookup path: hashing three label values under a shared lock.
void BM_CounterWithLookup(benchmark::State& state) {
  Registry reg;
  auto& f = reg.counter("cgn_bench_lookup_total", "B.", {"model", "endpoint", "code"});
  const cgn::metrics::Labels labels{"meta-llama/Llama-3.1-8B-Instruct", "chat", "200"};
  for (auto _ : state) {
    f.with(labels).inc();
  }
}
BENCHMARK(BM_CounterWithLookup);

void BM_HistogramObserve(benchmark::State& state) {
  static Registry reg;
  static cgn::metrics::Histogram h = reg.histogram("cgn_bench_seconds", "B.", {"model"}).with({"m"});
  double v = 0.0001;
  for (auto _ : state) {
    h.observe(v);
    v = v > 20 ? 0.0001 : v * 1.7;  // walk through every bucket
  }
  benchmark::DoNotOptimize(h.count());
}
BENCHMARK(BM_HistogramObserve)->Threads(1)->Threads(4);

// Scrape cost: 1,000 series (500 counters + 500 histogram series with 11 buckets each).
void BM_Render1kSeries(benchmark::State& state) {
  Registry reg;
  auto& c = reg.counter("cgn_bench_requests_total", "B.", {"node", "code"});
  auto& h = reg.histogram("cgn_bench_latency_seconds", "B.", {"node"});
  for (int i = 0; i < 500; ++i) {
    c.with({"node-" + std::to_string(i), "200"}).inc(i);
    h.with({"node-" + std::to_string(i)}).observe(0.01 * i);
  }
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text = reg.render();
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Render1kSeries)->Unit(benchmark::kMicrosecond);

}  // namespace
