// SSD tier bandwidth for 4 MiB records, against a plain sequential pread of the same segment
// files' bytes in the same run (same I/O mode, same 4 MiB requests). The official comparison is
// bench/kvcached; this one isolates the tier (index, checksum, bounce buffer) from the daemon.
//   BM_SsdWrite/direct:1/aligned:1   write() from a page-aligned buffer (an arena block)
//   BM_SsdRead/direct:1/aligned:0    read() into an unaligned buffer (the 1 MiB bounce path)
//   BM_PlainRead/direct:1            pread of the segment files, 4 MiB at a time
// Segments live under $TMPDIR (the filesystem decides whether O_DIRECT is used: see direct_io
// in each row's label).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/digest.h"
#include "core/log.h"
#include "kvcache/segment.h"
#include "kvcache/ssd_tier.h"
#include "testing/process.h"

namespace {

using cgn::kvcache::SsdTier;

constexpr size_t kRecord = 4u << 20;
constexpr int kRecords = 32;  // 128 MiB of records

struct Aligned {
  explicit Aligned(size_t n) : p(static_cast<uint8_t*>(std::aligned_alloc(4096, n + 4096)), &std::free) {
    std::memset(p.get(), 0x5a, n + 4096);
  }
  std::unique_ptr<uint8_t, decltype(&std::free)> p;
};

cgn::kvcache::BlockKey key_of(int i) {
  return cgn::blake3_hash("bench key " + std::to_string(i));
}

std::unique_ptr<SsdTier> open_tier(const std::string& dir, bool direct) {
  cgn::kvcache::SsdConfig c;
  c.dir = dir;
  c.segment_bytes = 64ull << 20;
  c.max_bytes = 512ull << 20;
  c.direct_io = direct ? cgn::kvcache::DirectIo::kAuto : cgn::kvcache::DirectIo::kOff;
  auto t = SsdTier::open(c, cgn::SteadyClock::instance(), {});
  if (!t) {
    return nullptr;
  }
  return std::move(t.value());
}

void BM_SsdWrite(benchmark::State& state) {
  cgn::testing::TempDir dir;
  auto t = open_tier(dir.path(), state.range(0) != 0);
  if (!t) {
    state.SkipWithError("open failed");
    return;
  }
  Aligned buf(kRecord);
  const uint8_t* src = buf.p.get() + (state.range(1) != 0 ? 0 : 8);
  int i = 0;
  for (auto _ : state) {
    if (!t->write(key_of(i++ % 256), std::span<const uint8_t>(src, kRecord))) {
      state.SkipWithError("write failed");
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kRecord));
  state.SetLabel(t->stats().direct_io ? "direct_io" : "buffered");
}
BENCHMARK(BM_SsdWrite)
    ->ArgNames({"direct", "aligned"})
    ->Args({1, 1})
    ->Args({1, 0})
    ->Args({0, 1})
    ->UseRealTime();

void BM_SsdRead(benchmark::State& state) {
  cgn::testing::TempDir dir;
  auto t = open_tier(dir.path(), state.range(0) != 0);
  if (!t) {
    state.SkipWithError("open failed");
    return;
  }
  Aligned buf(kRecord);
  for (int i = 0; i < kRecords; ++i) {
    if (!t->write(key_of(i), std::span<const uint8_t>(buf.p.get(), kRecord))) {
      state.SkipWithError("write failed");
      return;
    }
  }
  uint8_t* dst = buf.p.get() + (state.range(1) != 0 ? 0 : 8);
  int i = 0;
  for (auto _ : state) {
    if (!t->read(key_of(i++ % kRecords), std::span<uint8_t>(dst, kRecord))) {
      state.SkipWithError("read failed");
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kRecord));
  state.SetLabel(t->stats().direct_io ? "direct_io" : "buffered");
}
BENCHMARK(BM_SsdRead)
    ->ArgNames({"direct", "aligned"})
    ->Args({1, 1})
    ->Args({1, 0})
    ->Args({0, 1})
    ->UseRealTime();

// The baseline: the same segment bytes read sequentially with pread, 4 MiB per call.
void BM_PlainRead(benchmark::State& state) {
  const bool direct = state.range(0) != 0;
  cgn::testing::TempDir dir;
  std::vector<std::string> files;
  {
    auto t = open_tier(dir.path(), direct);
    if (!t) {
      state.SkipWithError("open failed");
      return;
    }
    Aligned buf(kRecord);
    for (int i = 0; i < kRecords; ++i) {
      (void)t->write(key_of(i), std::span<const uint8_t>(buf.p.get(), kRecord));
    }
    state.SetLabel(t->stats().direct_io ? "direct_io" : "buffered");
  }
  for (const auto& de : std::filesystem::directory_iterator(dir.path())) {
    if (cgn::kvcache::parse_segment_name(de.path().filename().string())) {
      files.push_back(de.path().string());
    }
  }
  std::vector<int> fds;
  fds.reserve(files.size());
  for (const auto& f : files) {
    fds.push_back(::open(f.c_str(), O_RDONLY | (direct ? O_DIRECT : 0)));
  }
  Aligned buf(kRecord);
  size_t fi = 0;
  uint64_t off = 0;
  for (auto _ : state) {
    ssize_t n = ::pread(fds[fi], buf.p.get(), kRecord, static_cast<off_t>(off));
    if (n <= 0) {
      fi = (fi + 1) % fds.size();
      off = 0;
      n = ::pread(fds[fi], buf.p.get(), kRecord, 0);
    }
    if (n <= 0) {
      state.SkipWithError("read failed");
      break;
    }
    off += static_cast<uint64_t>(n);
    benchmark::DoNotOptimize(buf.p.get());
  }
  for (int fd : fds) {
    ::close(fd);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kRecord));
}
BENCHMARK(BM_PlainRead)->ArgNames({"direct"})->Arg(1)->Arg(0)->UseRealTime();

}  // namespace

// Weak, so that another *_bench.cpp of this module (bench_kvcache) may bring its own main.
__attribute__((weak)) int main(int argc, char** argv) {
  cgn::log::set_level("warn");  // one "scanned" line per tier opened would drown the table
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
