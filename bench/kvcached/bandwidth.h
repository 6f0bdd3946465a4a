// Block put/get bandwidth through the ways an engine can hold KV blocks (bench/kvcached/README.md):
// memcpy into memory of its own (the baseline), cgn-kvcached's local fast path and its gRPC
// service, and redis-server over TCP and a Unix socket (libhiredis). Each of `threads` threads
// has its own connection and its own blocks; a measurement puts every thread's blocks (fresh
// names: a daemon refreshes an already-resident block without writing it), then reads them all
// back `get_rounds` times into a caller buffer, checking the block's stamp (its id in the first
// 8 bytes) on every read. Bandwidth = bytes moved by all threads / wall time from the start
// barrier to the last thread's end.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "replay.h"

namespace cgn::kvbench {

// One thread's connection to a block store.
class BlockConn {
 public:
  virtual ~BlockConn() = default;
  virtual Status<BenchError> put(uint64_t id, std::span<const uint8_t> value) = 0;
  // The block's bytes into `out` (out.size() >= its length): its length.
  virtual Result<uint64_t, BenchError> get(uint64_t id, std::span<uint8_t> out) = 0;
  // Many blocks in one call (ids[i] = values[i]; outs[i] gets block ids[i], lengths returned).
  // By default one put or get each; a store with batch requests overrides them.
  virtual Status<BenchError> put_many(std::span<const uint64_t> ids,
                                      std::span<const std::span<const uint8_t>> values);
  virtual Result<std::vector<uint64_t>, BenchError> get_many(std::span<const uint64_t> ids,
                                                             std::span<const std::span<uint8_t>> outs);
};

// Opens thread `t`'s connection (not timed).
using ConnFactory = std::function<Result<std::unique_ptr<BlockConn>, BenchError>(uint32_t t)>;

struct BandwidthSpec {
  uint64_t block_bytes = 1 << 20;
  uint32_t threads = 1;
  uint64_t blocks_per_thread = 16;
  uint32_t get_rounds = 4;
  uint64_t first_id = 0;  // thread t's blocks are first_id + t * blocks_per_thread + [0, blocks_per_thread)
  uint32_t batch = 1;     // > 1: blocks go through put_many/get_many, this many a call (at most
                          // kMaxBatchBufferBytes of blocks a call)
};

inline constexpr uint64_t kMaxBatchBufferBytes = 4ull << 20;

struct Rate {
  uint64_t bytes = 0;
  double seconds = 0;
  double gib_s() const {
    return seconds > 0 ? static_cast<double>(bytes) / seconds / (1024.0 * 1024.0 * 1024.0) : 0;
  }
};

struct BandwidthResult {
  Rate put;
  Rate get;
};

Result<BandwidthResult, BenchError> measure_bandwidth(const ConnFactory& open, const BandwidthSpec& spec);

// Reads every block of `ids` once, split over `threads` threads (contiguous slices): the rate.
// For the SSD tier's blocks (no puts, no stamp check beyond the length).
Result<Rate, BenchError> measure_reads(const ConnFactory& open, std::span<const uint64_t> ids,
                                       uint64_t block_bytes, uint32_t threads);

// Connections kept open across measurements, as a long-running engine keeps its own: factory()
// hands out thread t's connection (opened by `open` on first use) without giving it up. A fresh
// fast-path connection maps the arena anew, and a fresh gRPC channel connects on its first call;
// neither belongs in a bandwidth number. Not thread-safe: measure_*() open connections up front.
class ConnPool {
 public:
  explicit ConnPool(ConnFactory open) : open_(std::move(open)) {}
  ConnFactory factory();

 private:
  ConnFactory open_;
  std::vector<std::unique_ptr<BlockConn>> conns_;
};

// memcpy into and out of a pre-faulted region of `blocks` blocks (id modulo blocks).
ConnFactory memcpy_conns(uint64_t block_bytes, uint64_t blocks);
// libhiredis SET/GET of "cgn:<id>"; `unix_path` non-empty: over that socket, else host:port.
ConnFactory redis_conns(const std::string& host, int port, const std::string& unix_path);
// A fresh connection (FLUSHALL) to empty the Redis database between measurements.
Status<BenchError> redis_flushall(const std::string& host, int port, const std::string& unix_path);
// cgn-kvcached over gRPC (a KvClient per thread) and over the fast path (a LocalClient per thread).
ConnFactory grpc_conns(const std::string& target);
// `prefault`: LocalConnectOptions::prefault (the arena mapped with MAP_POPULATE).
ConnFactory local_conns(const std::string& socket_path, bool prefault = true);

// Sequential read(2) of every regular file under `dir` into a buffer of `buffer_bytes`, after
// posix_fadvise(DONTNEED) on each (drops its clean cached pages; no root needed).
// With `direct`: O_DIRECT into a page-aligned buffer (buffer_bytes a multiple of 4096); an error
// when the filesystem refuses O_DIRECT.
Result<Rate, BenchError> sequential_read(const std::string& dir, uint64_t buffer_bytes, bool direct);
// posix_fadvise(DONTNEED) on every regular file under `dir`: the files read afterwards.
uint64_t drop_file_cache(const std::string& dir);

}  // namespace cgn::kvbench
