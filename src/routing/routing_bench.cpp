// Routing decision benchmark, with its baseline measured in the same run:
//   - a 16 KiB prompt = 64 digests at 256-byte blocks, over 64 nodes, 1M (digest, node)
//     entries indexed; all 64 request digests are held by 8 nodes with staggered runs
//     (8, 16, ..., 64 blocks) so the lookup cannot stop early;
//   - baseline: raw BLAKE3 bulk hashing of the same 16 KiB;
//   - targets: decision p50 <= 6x and p99 <= 20x the baseline's; index memory from the RSS
//     change while filling 1M entries <= 150 bytes per entry.
// Timing is manual (steady_clock around each call, interleaved with the baseline so both
// see the same machine noise). `--check` exits 1 when a target is missed; `--gbench` also
// runs the Google Benchmark cases (Prometheus parsing) after the report.
#include <benchmark/benchmark.h>
#include <blake3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "routing/prometheus.h"
#include "routing/rng.h"
#include "routing/router_core.h"

namespace {

using namespace cgn;
using namespace cgn::routing;

constexpr size_t kPromptBytes = 16 * 1024;
constexpr size_t kRequestDigests = 64;
constexpr int kNodes = 64;
constexpr size_t kEntries = 1'000'000;
constexpr int kIterations = 20'000;

size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  size_t resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

void fill_digest(Digest& d, uint64_t& state) {
  for (size_t i = 0; i < d.size(); i += 8) {
    const uint64_t v = splitmix64(state);
    std::memcpy(d.data() + i, &v, 8);
  }
}

double percentile(std::vector<double>& v, double p) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

double now_ns() {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
}

void bm_parse_vllm_page(benchmark::State& state) {
  std::string page;
  for (int e = 0; e < 4; ++e) {
    page += "vllm:num_requests_running{engine=\"" + std::to_string(e) + "\",model_name=\"m\"} 3.0\n";
    page += "vllm:kv_cache_usage_perc{engine=\"" + std::to_string(e) + "\",model_name=\"m\"} 0.5\n";
    for (int b = 0; b < 40; ++b) {
      page += "vllm:time_to_first_token_seconds_bucket{engine=\"" + std::to_string(e) + "\",le=\"" +
              std::to_string(b) + "\",model_name=\"m\"} 12.0\n";
    }
  }
  for (auto _ : state) {
    auto doc = parse_prometheus_text(page);
    benchmark::DoNotOptimize(doc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * page.size()));
}
BENCHMARK(bm_parse_vllm_page);

// The request's prompt bytes and its digests, from one seeded generator (`st` continues it).
struct Fixture {
  uint64_t st = 0xB1A4E;
  std::vector<uint8_t> prompt = std::vector<uint8_t>(kPromptBytes);
  std::vector<Digest> request = std::vector<Digest>(kRequestDigests);
};

Fixture make_fixture() {
  Fixture f;
  for (auto& b : f.prompt) {
    b = static_cast<uint8_t>(splitmix64(f.st));
  }
  for (auto& d : f.request) {
    fill_digest(d, f.st);
  }
  return f;
}

std::vector<NodeIndex> add_nodes(RoutingCore& core) {
  std::vector<NodeIndex> nodes;
  for (int n = 0; n < kNodes; ++n) {
    NodeUpdate u;
    u.models = std::vector<std::string>{"model"};
    u.health = Health::kHealthy;
    u.queue_depth = n % 3;
    u.running = n % 5;
    u.kv_used_ratio = 0.3;
    nodes.push_back(core.upsert_node("node-" + std::to_string(n), u, UpdateSource::kScrape));
  }
  return nodes;
}

// 8 nodes hold the request's digests with staggered runs (8, 16, ..., 64 blocks); the rest of the
// kEntries entries are unrelated prompts of 64 digests each, spread over all nodes.
void fill_index(RoutingCore& core, const std::vector<NodeIndex>& nodes, Fixture& f) {
  size_t filled = 0;
  for (int k = 0; k < 8; ++k) {
    const size_t run = 8 * static_cast<size_t>(k + 1);
    core.confirm_prefixes(nodes[static_cast<size_t>(k) * 8], std::span(f.request).first(run));
    filled += run;
  }
  std::vector<Digest> batch(64);
  const Nanos t0 = SteadyClock::instance().now();
  size_t prompt_no = 0;
  while (filled < kEntries) {
    const size_t n = std::min(batch.size(), kEntries - filled);
    for (size_t i = 0; i < n; ++i) {
      fill_digest(batch[i], f.st);
    }
    core.index().record_optimistic(nodes[prompt_no % kNodes], std::span(batch).first(n), t0);
    filled += n;
    ++prompt_no;
  }
}

struct Timings {
  std::vector<double> hash_ns;
  std::vector<double> decide_ns;
  Decision decision;
  uint64_t sink = 0;
};

// Interleaved timing: baseline BLAKE3 of the 16 KiB prompt, then one routing decision. False (and
// the reason on stderr) when a decision fails.
bool time_decisions(RoutingCore& core, const Fixture& f, Timings& t) {
  RouteRequest req;
  req.model = "model";
  req.digests = f.request;
  req.prompt_tokens = kPromptBytes / 4;
  t.hash_ns.reserve(kIterations);
  t.decide_ns.reserve(kIterations);
  uint8_t out[BLAKE3_OUT_LEN];
  for (int i = -500; i < kIterations; ++i) {  // the first 500 warm caches and are dropped
    double a = now_ns();
    blake3_hasher h;
    blake3_hasher_init(&h);
    blake3_hasher_update(&h, f.prompt.data(), f.prompt.size());
    blake3_hasher_finalize(&h, out, BLAKE3_OUT_LEN);
    double b = now_ns();
    t.sink += out[0];
    auto s = core.decide_into(req, t.decision);
    double c = now_ns();
    if (!s.ok()) {
      std::fprintf(stderr, "decision failed: %s\n", s.error().message.c_str());
      return false;
    }
    t.sink += t.decision.ranked.front().node;
    if (i >= 0) {
      t.hash_ns.push_back(b - a);
      t.decide_ns.push_back(c - b);
    }
  }
  return true;
}

// Prints the report; true when every target is met.
bool report(RoutingCore& core, Timings& t, size_t entries, double bytes_per_entry) {
  const Candidate best = t.decision.ranked.front();
  const double h50 = percentile(t.hash_ns, 0.50);
  const double h99 = percentile(t.hash_ns, 0.99);
  const double d50 = percentile(t.decide_ns, 0.50);
  const double d99 = percentile(t.decide_ns, 0.99);
  const bool ok_p50 = d50 <= 6.0 * h50;
  const bool ok_p99 = d99 <= 20.0 * h99;
  const bool ok_mem = bytes_per_entry <= 150.0;

  std::printf("routing decision benchmark (sink %llu)\n", static_cast<unsigned long long>(t.sink & 1));
  std::printf(
      "  index: %zu entries over %zu digests, %d nodes; best node %u overlap %u blocks, %zu candidates\n",
      entries, core.index().digests(), kNodes, best.node, best.overlap_blocks, t.decision.ranked.size());
  std::printf("  blake3 16 KiB  p50 %8.0f ns  p99 %8.0f ns\n", h50, h99);
  std::printf("  decision       p50 %8.0f ns  p99 %8.0f ns\n", d50, d99);
  std::printf("  ratio          p50 %6.2fx (<= 6x: %s)  p99 %6.2fx (<= 20x: %s)\n", d50 / h50,
              ok_p50 ? "ok" : "MISSED", d99 / h99, ok_p99 ? "ok" : "MISSED");
  std::printf("  index memory   %.1f bytes per (digest, node) entry from RSS (<= 150: %s)\n", bytes_per_entry,
              ok_mem ? "ok" : "MISSED");
  std::printf(
      "{\"blake3_p50_ns\":%.0f,\"blake3_p99_ns\":%.0f,\"decision_p50_ns\":%.0f,\"decision_p99_ns\":%.0f,"
      "\"p50_ratio\":%.3f,\"p99_ratio\":%.3f,\"bytes_per_entry\":%.1f,\"entries\":%zu}\n",
      h50, h99, d50, d99, d50 / h50, d99 / h99, bytes_per_entry, entries);
  return ok_p50 && ok_p99 && ok_mem;
}

void run_gbench(char** argv) {
  int bargc = 1;
  benchmark::Initialize(&bargc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}

}  // namespace

int main(int argc, char** argv) {
  bool check = false;
  bool gbench = false;
  for (int i = 1; i < argc; ++i) {
    check |= std::strcmp(argv[i], "--check") == 0;
    gbench |= std::strcmp(argv[i], "--gbench") == 0;
  }
  Fixture f = make_fixture();
  const size_t rss_before = rss_bytes();
  IndexConfig index_config;
  index_config.default_node_capacity = 1u << 20;  // the memory test fills far past real caps
  RoutingCore core(SteadyClock::instance(), RoutingPolicy{}, index_config, /*seed=*/42);
  fill_index(core, add_nodes(core), f);
  const size_t rss_after = rss_bytes();
  const size_t entries = core.index().entries();
  const double bytes_per_entry =
      static_cast<double>(rss_after - std::min(rss_after, rss_before)) / static_cast<double>(entries);
  Timings t;
  if (!time_decisions(core, f, t)) {
    return 2;
  }
  const bool ok = report(core, t, entries, bytes_per_entry);
  if (gbench) {
    run_gbench(argv);
  }
  return check && !ok ? 1 : 0;
}
