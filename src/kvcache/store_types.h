// Types shared by the block store's tiers and its users (the cgn-kvcached daemon, benchmarks).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/clock.h"

namespace cgn::kvcache {

// Where a block is resident. The wire (proto/cognitora/v1/kvcached.proto) and metrics use
// to_string's names.
enum class Tier : uint8_t { kNone = 0, kRam = 1, kSsd = 2 };
std::string_view to_string(Tier t);

enum class StoreError : uint8_t {
  kNotFound,  // no complete block under the key (never written, evicted, expired, or corrupt)
  kTooLarge,  // the block is larger than max_block_bytes or than the RAM tier
  kNoSpace,   // the RAM tier is full of pinned/leased/half-written blocks and nothing can be spilled
  kBusy,      // a put of the same key is in progress
  kCorrupt,   // a stored record failed its checksum: dropped and counted, never served
  kIo,        // the SSD tier could not read or write (the message has errno's text)
  kDiskFull,  // the SSD tier's filesystem is full (ENOSPC) or at its configured size
  kConfig,    // a bad StoreConfig (the message names the field)
  kStopped,   // the store is stopping
};
std::string_view to_string(StoreError e);

enum class DirectIo : uint8_t {
  kAuto,  // O_DIRECT where the filesystem accepts it, buffered I/O where it refuses (tmpfs)
  kOn,    // O_DIRECT or an error at open
  kOff,   // buffered I/O
};

struct SsdConfig {
  std::string dir;                        // segment files live here (created if missing)
  uint64_t max_bytes = 0;                 // 0: bounded only by the filesystem
  uint64_t segment_bytes = 256ull << 20;  // a segment file is closed and a new one started past this
  Nanos ttl = 0;                          // a record older than this is expired; 0: no TTL
  DirectIo direct_io = DirectIo::kAuto;
};

struct StoreConfig {
  uint64_t ram_bytes = 1ull << 30;  // the RAM arena, allocated (and locked if possible) at open
  uint32_t page_bytes = 4096;       // arena allocation unit; a power of two >= 4096
  uint64_t max_block_bytes = 64ull << 20;
  double high_watermark = 0.90;            // RAM use above this fraction starts a spill round
  double spill_fraction = 0.05;            // a round moves this fraction of the arena to SSD
  Nanos max_lease = 30 * kNanosPerSecond;  // a longer lease request is cut to this
  bool ssd_enabled = false;                // false: no SSD tier; a full RAM tier evicts LRU blocks
  SsdConfig ssd;
  // Asked while the RAM arena's pages are allocated at open (RamArena::create); true: open stops
  // with kStopped. The daemon passes "a shutdown signal is pending".
  std::function<bool()> stop_requested;
};

// Counters and gauges, all monotonic counters unless noted. Read as one snapshot.
struct TierStats {
  uint64_t hits = 0;       // get() served from this tier
  uint64_t misses = 0;     // RAM: get() not in RAM; SSD: get() in neither tier
  uint64_t bytes = 0;      // gauge: bytes held (SSD: record bytes on disk)
  uint64_t blocks = 0;     // gauge: complete blocks held
  uint64_t evictions = 0;  // blocks dropped from this tier for space (RAM->SSD spills not counted)
  uint64_t capacity = 0;   // gauge: configured bytes (SSD: max_bytes, 0 = unbounded)
};

struct StoreStats {
  TierStats ram;
  TierStats ssd;
  uint64_t puts = 0;            // complete puts (new blocks)
  uint64_t refreshes = 0;       // puts of a block already resident (its recency refreshed)
  uint64_t spilled_blocks = 0;  // RAM -> SSD copies
  uint64_t spilled_bytes = 0;
  uint64_t spill_errors = 0;       // spills that failed (disk full, I/O)
  uint64_t promotions = 0;         // SSD -> RAM copies for pinned reads
  uint64_t ttl_expiries = 0;       // SSD records dropped for age
  uint64_t checksum_failures = 0;  // records dropped because their CRC-32C did not match
  uint64_t torn_tails = 0;         // segment tails cut at scan (a write interrupted by a crash)
  uint64_t leases_granted = 0;     // blocks leased by lookup()
  uint64_t leases_active = 0;      // gauge: blocks whose lease has not expired
  uint64_t pins_active = 0;        // gauge: blocks pinned by open reads
  uint64_t scan_bytes_done = 0;    // gauge: SSD segment bytes scanned at start
  uint64_t scan_bytes_total = 0;   // gauge: SSD segment bytes to scan at start
  bool scan_complete = true;       // gauge: false while the start-up scan runs
  bool ssd_direct_io = false;      // the SSD tier reads and writes with O_DIRECT (else buffered I/O)
  std::string ssd_error;           // the last SSD error (disk full, ...) while it lasts; empty when healthy
};

}  // namespace cgn::kvcache
