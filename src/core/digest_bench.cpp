// Prefix digesting against raw BLAKE3 bulk hashing of the same bytes, in the
// same run (docs/design/principles.md, prefix digests: one SIMD many-inputs pass plus one compression per
// link). Targets, from 16 KiB up: >= 0.25x raw BLAKE3 at 256-byte blocks and
// >= 0.5x at 1024-byte blocks. Each BM_PrefixDigests row also carries
// `vs_raw`, its speed over raw BLAKE3 measured in the same process just
// before it (both in thread CPU time), and the run's context names the BLAKE3 SIMD level.
#include <benchmark/benchmark.h>
#include <time.h>

#include <string>
#include <vector>

#include "blake3.h"
#include "core/canonical.h"
#include "core/digest.h"

namespace {

// Deterministic prompt-like text (the bytes do not change BLAKE3's speed).
std::string make_prompt(size_t n) {
  static constexpr std::string_view kWords[] = {"the ",    "model ",   "routes ", "prefix ",
                                                "cache ",  "token ",   "block ",  "digest ",
                                                "engine ", "replica ", "\n"};
  std::string s;
  s.reserve(n + 16);
  for (size_t i = 0; s.size() < n; ++i) {
    s.append(kWords[(i * 7 + i / 3) % std::size(kWords)]);
  }
  s.resize(n);
  return s;
}

void raw_blake3(const std::string& data, cgn::Digest& out) {
  blake3_hasher h;
  blake3_hasher_init(&h);
  blake3_hasher_update(&h, data.data(), data.size());
  blake3_hasher_finalize(&h, out.data(), out.size());
}

// CPU time of this thread, so that the in-process ratio is not skewed by
// other load on a shared machine.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Bytes per CPU second of raw BLAKE3 over `data`, timed for about 50 ms.
double raw_blake3_bytes_per_second(const std::string& data) {
  cgn::Digest d;
  size_t iterations = 0;
  const double start = thread_cpu_seconds();
  double now = start;
  while (now - start < 0.05) {
    for (int i = 0; i < 16; ++i) {
      raw_blake3(data, d);
      benchmark::DoNotOptimize(d);
    }
    iterations += 16;
    now = thread_cpu_seconds();
  }
  return static_cast<double>(iterations * data.size()) / (now - start);
}

void BM_Blake3Raw(benchmark::State& state) {
  const std::string data = make_prompt(static_cast<size_t>(state.range(0)));
  cgn::Digest d;
  for (auto _ : state) {
    raw_blake3(data, d);
    benchmark::DoNotOptimize(d);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  state.SetLabel(cgn::blake3_simd_level());
}
BENCHMARK(BM_Blake3Raw)->Arg(1 << 10)->Arg(16 << 10)->Arg(128 << 10);

void BM_PrefixDigests(benchmark::State& state) {
  const std::string data = make_prompt(static_cast<size_t>(state.range(0)));
  const auto block = static_cast<uint32_t>(state.range(1));
  const cgn::Digest seed = cgn::make_digest_seed({.model = "bench-model"});
  std::vector<cgn::Digest> out;
  out.reserve(data.size() / block + 1);
  const double raw_bps = raw_blake3_bytes_per_second(data);

  const double start = thread_cpu_seconds();
  for (auto _ : state) {
    out.clear();
    cgn::compute_prefix_digests(seed, data, block, out);
    benchmark::DoNotOptimize(out.data());
  }
  const double secs = thread_cpu_seconds() - start;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  const double bps = static_cast<double>(state.iterations()) * static_cast<double>(data.size()) / secs;
  state.counters["vs_raw"] = bps / raw_bps;
  state.SetLabel(cgn::blake3_simd_level());
}
BENCHMARK(BM_PrefixDigests)->ArgsProduct({{1 << 10, 16 << 10, 128 << 10}, {256, 1024}});

// The naive construction (one full BLAKE3 call per block and per link), for
// scale: what the SIMD many-inputs path buys.
void BM_PrefixDigestsReference(benchmark::State& state) {
  const std::string data = make_prompt(static_cast<size_t>(state.range(0)));
  const auto block = static_cast<uint32_t>(state.range(1));
  const cgn::Digest seed = cgn::make_digest_seed({.model = "bench-model"});
  std::vector<cgn::Digest> out;
  for (auto _ : state) {
    out.clear();
    cgn::compute_prefix_digests_reference(seed, data, block, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_PrefixDigestsReference)->ArgsProduct({{16 << 10}, {256, 1024}});

// The router's whole per-request cost: parse a chat body once and digest it.
void BM_ParseAndDigestChat(benchmark::State& state) {
  const std::string text = make_prompt(static_cast<size_t>(state.range(0)));
  const std::string body =
      R"({"model":"bench-model","stream":true,"messages":[{"role":"system","content":")" +
      text.substr(0, text.size() / 4) + R"("},{"role":"user","content":")" + text.substr(text.size() / 4) +
      R"("}]})";
  std::vector<cgn::Digest> out;
  for (auto _ : state) {
    auto parsed = cgn::parse_openai_request(cgn::Endpoint::kChat, body);
    if (!parsed) {
      state.SkipWithError(parsed.error().message.c_str());
      break;
    }
    out.clear();
    cgn::compute_prefix_digests(cgn::make_digest_seed(cgn::digest_seed_fields(*parsed)),
                                parsed->canonical_prompt, cgn::kDefaultBlockBytes, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(body.size()));
}
BENCHMARK(BM_ParseAndDigestChat)->Arg(1 << 10)->Arg(16 << 10)->Arg(128 << 10);

// Many short messages: the per-message overhead of the parser.
void BM_ParseChatManyMessages(benchmark::State& state) {
  std::string body = R"({"model":"bench-model","messages":[)";
  for (int64_t i = 0; i < state.range(0); ++i) {
    body += i == 0 ? "" : ",";
    body += R"({"role":")";
    body += i % 2 == 0 ? "user" : "assistant";
    body += R"(","content":"message number )" + std::to_string(i) + R"( with a few words of text"})";
  }
  body += "]}";
  for (auto _ : state) {
    auto parsed = cgn::parse_openai_request(cgn::Endpoint::kChat, body);
    if (!parsed) {
      state.SkipWithError(parsed.error().message.c_str());
      break;
    }
    benchmark::DoNotOptimize(parsed->canonical_prompt.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(body.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_ParseChatManyMessages)->Arg(16)->Arg(256);

// Names the BLAKE3 SIMD level in the run's context header.
const bool kSimdContext = [] {
  benchmark::AddCustomContext("blake3_simd", cgn::blake3_simd_level());
  return true;
}();

}  // namespace
