// Replay of a Mooncake trace's blocks through one cgn-kvcached (bench/kvcached/README.md).
//
// Every hash_id of the trace is one synthetic block: its digest and its bytes are derived from
// the hash_id alone (hash_ids are already prefix-chained: a hash_id names its whole prefix), so
// a read can be checked. Per request, in trace order: one lookup without a lease (a lease would
// keep blocks from the LRU's eviction and distort it) gives the unbroken resident run, which
// counts as hits, with the tier of each; optionally the run's last block is read back and
// checked; then every block of the request is put in order (a resident block is refreshed).
// reference_replay.py does the same against a plain LRU; the two hit rates must agree.
//
// The daemon is reached through a ReplayTarget: gRPC (KvClient) or the local fast path
// (LocalClient, with gRPC for Stats). Single-threaded.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bench_harness/workload.h"
#include "core/digest_types.h"
#include "core/result.h"
#include "kvcache/store_types.h"

namespace cgn::kvbench {

enum class BenchError : uint8_t { kTarget, kVerify, kInput };

// The digest of hash_id's block: BLAKE3 of a fixed label and the id (8 bytes, little endian).
Digest block_digest(uint64_t hash_id);
// The bytes of hash_id's block: a splitmix64 stream seeded by the id; any length.
void fill_block(uint64_t hash_id, std::span<uint8_t> out);
// True when `data` is hash_id's block of data.size() bytes.
bool check_block(uint64_t hash_id, std::span<const uint8_t> data);

// The daemon under test, one block per hash_id.
class ReplayTarget {
 public:
  virtual ~ReplayTarget() = default;
  // The tiers of the unbroken resident run from ids[0], without a lease.
  virtual Result<std::vector<kvcache::Tier>, BenchError> lookup(std::span<const uint64_t> ids) = 0;
  virtual Status<BenchError> put(uint64_t id, std::span<const uint8_t> value) = 0;
  // The block's bytes into `out` (its length).
  virtual Result<uint64_t, BenchError> get(uint64_t id, std::span<uint8_t> out) = 0;
  virtual Result<kvcache::StoreStats, BenchError> stats() = 0;
};

struct ReplayOptions {
  uint32_t block_bytes = 4096;
  size_t limit = 0;    // the first `limit` requests; 0: all
  bool verify = true;  // read back the last block of every non-empty hit run and check it
};

struct ReplayReport {
  uint64_t requests = 0;
  uint64_t blocks = 0;  // all blocks of all requests
  uint64_t hits = 0;    // blocks in the leading resident runs
  uint64_t hits_ram = 0;
  uint64_t hits_ssd = 0;
  uint64_t verified = 0;  // blocks read back and checked
  double wall_s = 0;
  kvcache::StoreStats before;  // the daemon's Stats at the start and the end
  kvcache::StoreStats after;
  double hit_rate_pct() const {
    return blocks != 0 ? 100.0 * static_cast<double>(hits) / static_cast<double>(blocks) : 0.0;
  }
};

// Replays `w` through `target`. A failed call or a block that reads back wrong is an error
// naming the request and the hash_id.
Result<ReplayReport, BenchError> run_replay(const bench::Workload& w, ReplayTarget& target,
                                            const ReplayOptions& opt);

// One JSON object: the counts, hit rates (overall and per tier, in percent of all blocks), wall
// time, and the spill traffic and evictions between the two Stats.
std::string to_json(const ReplayReport& r, const ReplayOptions& opt, const std::string& path_name);

}  // namespace cgn::kvbench
