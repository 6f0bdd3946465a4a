// cgn-kvcached-bench's run (bandwidth.h's measurements in the order bench/kvcached/README.md
// gives): one JSON object per row on `out`: {"block_bytes", "path", "op", "threads", "bytes",
// "seconds", "gib_s"}: the median of `repeats` rounds, whose GiB/s are in "rounds"; SSD rows are
// one pass, with "blocks". A path whose address is empty is left out.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/result.h"
#include "replay.h"

namespace cgn::kvbench {

struct BenchOptions {
  std::vector<uint64_t> sizes{64ull << 10, 1ull << 20, 4ull << 20, 16ull << 20};
  std::vector<uint32_t> threads{1, 4};
  uint64_t working_set_mib = 64;  // per thread and measurement
  uint32_t get_rounds = 4;
  uint32_t warm_mib = 0;  // fast path: each connection first writes this many MiB, unmeasured
  uint32_t batch = 64;    // the "local-batch" row: blocks per put_many/get_many (0: no such row)
  bool prefault = true;   // fast-path connections map the arena with MAP_POPULATE
  uint32_t repeats = 3;   // rounds over every path per block size and concurrency; the median is reported
  std::string grpc, socket, redis_tcp, redis_unix;
  std::string ssd_grpc, ssd_socket, ssd_dir;
  uint64_t ssd_block_bytes = 1ull << 20;
  uint64_t ssd_mib = 256;
};

// kInput for options that cannot work (a block below 8 bytes, no threads, --ssd-grpc without
// --ssd-dir); else the first failed measurement.
Status<BenchError> run_bandwidth_bench(const BenchOptions& o, std::ostream& out);

}  // namespace cgn::kvbench
