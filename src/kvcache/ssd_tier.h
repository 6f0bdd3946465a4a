// The SSD tier of the block store: append-only segment files of checksummed records, an in-memory
// index rebuilt by scanning the segments at open, TTL and size bounds. segment.h states the record
// format and scans it; src/kvcache/README.md (SSD tier) describes the design.
//
// Crash safety: a record becomes visible (contains(), read()) only after all its bytes were
// written; at open, a segment's torn tail (a record cut short by a crash) is truncated away and a
// record whose checksum fails is dropped and counted. read() verifies the checksum again, so a
// record damaged after it was written is dropped and never returned. Records are not fsynced one
// by one (a segment is fdatasynced when it is closed): a power loss may lose the last records,
// never serve a damaged one.
//
// Order: of two records of the same key, the one in the later segment wins, and within a segment
// the one with the higher seq. Writes after open go to a new segment (ids grow), so they win over
// anything the scan finds. seq grows across the tier (seeded at open from the segments' first
// headers and raised by the scan).
//
// Eviction is by segment, oldest first: over max_bytes (counted as the segment files' sizes), the
// oldest segment that holds no protected record (leased or being read, per the `is_protected`
// callback) is deleted with its records. TTL: a record older than ttl is dropped from the index;
// a scanned segment whose records are all dropped is deleted. There is no compaction: a segment's
// space comes back when it is evicted or when all its records are dropped.
//
// Time: each record stores its wall-clock write time (unix ns). A record's age is measured with
// the injected `clock` while the tier runs (a ManualClock drives TTL in tests) and is carried
// across a restart by the stored wall time: at scan, age = wall now - write time (never negative).
//
// erase() drops the record from the index only; after a restart the record may be found again.
// Keys name immutable bytes (block_key.h), so such a record is still correct.
//
// Threads: open() starts one scan thread that indexes existing segments (oldest first) while the
// tier already serves (a lookup of a not-yet-scanned record misses); the destructor stops and
// joins it. Every method is thread-safe: reads run concurrently with each other and with one
// writer (writes, evictions and maintain() are serialised among themselves). `is_protected` is
// called from write() and maintain() with no lock of the tier held; it must not call back into
// the tier. A record protected after that check may still be evicted with its segment (a read
// then answers kNotFound; a read already under way completes).
//
// Files: one file descriptor per segment. With O_DIRECT, read() reads straight into an `out`
// that is 4096-aligned and goes through a 1 MiB bounce buffer per call otherwise.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/clock.h"
#include "core/result.h"
#include "kvcache/block_key.h"
#include "kvcache/store_types.h"

namespace cgn::kvcache {

struct SsdStats {
  uint64_t bytes = 0;   // record bytes indexed (headers and padding included)
  uint64_t blocks = 0;  // records indexed
  uint64_t segments = 0;
  uint64_t evictions = 0;  // records dropped with an evicted segment
  uint64_t ttl_expiries = 0;
  uint64_t checksum_failures = 0;  // at scan and at read
  uint64_t torn_tails = 0;
  uint64_t write_errors = 0;
  uint64_t scan_bytes_done = 0;
  uint64_t scan_bytes_total = 0;
  bool scan_complete = false;
  bool direct_io = false;  // whether O_DIRECT is in use
  std::string last_error;  // the last write error while the tier stays unable to write; else empty
};

// Test seams; the defaults are what the daemon uses.
struct SsdTierHooks {
  // The wall clock whose now() is unix nanoseconds (stored write times); nullptr: the system clock.
  const Clock* wall_clock = nullptr;
  // Called on the scan thread before each segment is scanned (a test pauses the scan here).
  std::function<void(uint64_t segment_id)> before_segment_scan;
};

class SsdTier {
 public:
  using ProtectedFn = std::function<bool(const BlockKey&)>;

  // Creates cfg.dir if missing, opens its segments and starts the scan. kConfig for a dir that
  // is not a writable directory, for segment_bytes < 4096, and for direct_io = kOn where the
  // filesystem refuses O_DIRECT; kIo for other failures; the message names the path. `clock`
  // must outlive the tier.
  static Result<std::unique_ptr<SsdTier>, StoreError> open(const SsdConfig& cfg, const Clock& clock,
                                                           ProtectedFn is_protected, SsdTierHooks hooks = {});
  ~SsdTier();
  SsdTier(const SsdTier&) = delete;
  SsdTier& operator=(const SsdTier&) = delete;

  // Appends a record for `key` (replacing an older one). kDiskFull on ENOSPC or when max_bytes
  // cannot be met by evicting unprotected segments (stats().last_error keeps the message until a
  // write succeeds); kTooLarge over kMaxValueBytes (1 GiB); kIo on other errors. A failed write
  // leaves no visible record and no bytes in the segment.
  Status<StoreError> write(const BlockKey& key, std::span<const uint8_t> value);

  bool contains(const BlockKey& key) const;
  // The value length of the indexed record.
  std::optional<uint64_t> length(const BlockKey& key) const;
  // Reads the value into `out` (out.size() >= length, else kTooLarge) and verifies it: the value
  // length, or kNotFound, or kCorrupt (the record is dropped and counted), or kIo.
  Result<uint64_t, StoreError> read(const BlockKey& key, std::span<uint8_t> out);
  void erase(const BlockKey& key);

  // Drops TTL-expired records, enforces max_bytes and deletes dead segments. The store's
  // maintenance thread calls it about once a second; tests call it directly.
  void maintain();

  SsdStats stats() const;

  class Impl;

 private:
  explicit SsdTier(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgn::kvcache
