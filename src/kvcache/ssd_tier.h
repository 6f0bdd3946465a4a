// The SSD tier of the block store: append-only segment files of checksummed records, an in-memory
// index rebuilt by scanning the segments at open, TTL and size bounds. docs/kvcached.md describes
// the record format; segment.h encodes and scans it.
//
// Crash safety: a record becomes visible (contains(), read()) only after all its bytes were
// written; at open, a segment's torn tail (a record cut short by a crash) is truncated away and a
// record whose checksum fails is dropped and counted. read() verifies the checksum again, so a
// record damaged after it was written is dropped and never returned.
//
// Eviction is by segment, oldest first: over max_bytes, the oldest segment that holds no
// protected record (leased or being read, per the `is_protected` callback) is deleted. TTL: a
// record older than ttl is dropped from the index; a segment whose records are all dropped is
// deleted.
//
// Threads: open() starts one scan thread that indexes existing segments while the tier already
// serves (a lookup of a not-yet-scanned record misses); the destructor joins it. Every method is
// thread-safe; reads run concurrently with each other and with one writer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>

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

class SsdTier {
 public:
  using ProtectedFn = std::function<bool(const BlockKey&)>;

  // Creates cfg.dir if missing, opens its segments and starts the scan. kConfig for a dir that
  // is not a writable directory, kIo for other failures; the message names the path.
  static Result<std::unique_ptr<SsdTier>, StoreError> open(const SsdConfig& cfg, const Clock& clock,
                                                           ProtectedFn is_protected);
  ~SsdTier();
  SsdTier(const SsdTier&) = delete;
  SsdTier& operator=(const SsdTier&) = delete;

  // Appends a record for `key` (replacing an older one). kDiskFull on ENOSPC or when max_bytes
  // cannot be met by evicting unprotected segments; kIo on other errors. A failed write leaves
  // no visible record.
  Status<StoreError> write(const BlockKey& key, std::span<const uint8_t> value);

  bool contains(const BlockKey& key) const;
  // The value length of the indexed record.
  std::optional<uint64_t> length(const BlockKey& key) const;
  // Reads the value into `out` (out.size() >= length) and verifies it: the value length, or
  // kNotFound, or kCorrupt (the record is dropped and counted), or kIo.
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
