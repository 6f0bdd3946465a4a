// The SSD tier's on-disk record format and the scanner that reads it back.
//
// A segment file (seg-<16 hex digits>.cgnkv, the id in lower-case hex) is a sequence of records,
// each starting on a 4096-byte boundary:
//
//   header page (4096 bytes)   value (value_len bytes)   zero padding up to the next 4096 boundary
//
// Header page, little-endian, the bytes past offset 80 zero:
//   off  size  field
//     0     8  magic "CGNKVREC"
//     8     4  format version (1)
//    12     4  flags (0; reserved)
//    16    32  key (the BlockKey)
//    48     8  value_len, at most kMaxValueBytes
//    56     8  seq: a later record of the same key wins (see ssd_tier.h for the order)
//    64     8  write time, unix nanoseconds (wall clock), for TTL across restarts
//    72     4  CRC-32C of the value bytes (padding excluded)
//    76     4  CRC-32C of header bytes [0, 76)
//
// A header page is valid when its magic, version, flags, value_len bound and header CRC check.
// The scanner never trusts a length it has not CRC-checked and never allocates by a length it
// reads: values are checksummed through the caller's fixed scratch buffer.
//
// Thread-safety: everything here is a pure function of its arguments, or (SegmentScanner) owned
// by one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvcache/block_key.h"

namespace cgn::kvcache {

inline constexpr uint64_t kSegmentPage = 4096;
inline constexpr uint64_t kMaxValueBytes = 1ull << 30;  // a larger value_len is a bad header
inline constexpr uint32_t kSegmentFormatVersion = 1;
inline constexpr std::string_view kRecordMagic = "CGNKVREC";
inline constexpr size_t kHeaderCrcOffset = 76;  // the header CRC covers the bytes before it

struct RecordHeader {
  BlockKey key{};
  uint64_t value_len = 0;
  uint64_t seq = 0;
  int64_t write_time_ns = 0;  // unix nanoseconds
  uint32_t flags = 0;
  uint32_t value_crc = 0;
  bool operator==(const RecordHeader&) const = default;
};

inline constexpr uint64_t round_up_page(uint64_t n) {
  return (n + kSegmentPage - 1) & ~(kSegmentPage - 1);
}

// Bytes a record takes in its segment: the header page plus the value padded to a page.
inline constexpr uint64_t record_bytes(uint64_t value_len) {
  return kSegmentPage + round_up_page(value_len);
}

// Writes the header page (exactly kSegmentPage bytes; `page` must be that long).
void encode_header(const RecordHeader& h, std::span<uint8_t> page);

// The header in `page` (at least kHeaderCrcOffset + 4 bytes), or nothing when it is not a valid
// header page.
std::optional<RecordHeader> decode_header(std::span<const uint8_t> page);

// Appends one whole record (header page, value, padding) to `file`, with h.value_len and
// h.value_crc set from `value`. The tier writes records with pwritev instead; this builds segment
// files for tests and the fuzz corpus.
void append_record(std::vector<uint8_t>& file, RecordHeader h, std::span<const uint8_t> value);

// "seg-00000000000000ff.cgnkv" for 255; parse_segment_name inverts it and rejects anything else.
std::string segment_file_name(uint64_t id);
std::optional<uint64_t> parse_segment_name(std::string_view name);

// Reads up to buf.size() bytes at `offset`: the count read (short only at end of data), or
// -errno. The tier passes pread on the segment's fd; the fuzz target passes a memory copy.
using ReadAtFn = std::function<int64_t(uint64_t offset, std::span<uint8_t> buf)>;

// Walks one segment's records in file order.
//
//   SegmentScanner scan(file_size, read_at, scratch);
//   for (auto item = scan.next(); item.kind != ScanItem::kEnd; item = scan.next()) { ... }
//
// - kRecord: a valid header and a value whose CRC matches.
// - kBadValue: a valid header whose value CRC fails; the scan continues after the record.
// - kBadHeader: a page run [offset, offset + bytes) with no valid header, followed by a valid
//   header; the scan continues there. A bad run that reaches the end of the file is a torn tail.
// - kTorn: the data from `offset` to the end of the file is not a complete record (a header or
//   value cut short, or no valid header to the end): the caller truncates the file at `offset`.
//   Always the last item.
// - kIoError: a read failed (`error` is errno); always the last item.
// - kEnd: the segment ended at a record boundary.
//
// `scratch` must be at least kSegmentPage bytes and a multiple of it (aligned to it when
// read_at uses O_DIRECT); every step advances by at least one page, so a scan ends after at most
// file_size / kSegmentPage + 1 items.
struct ScanItem {
  enum Kind : uint8_t { kRecord, kBadValue, kBadHeader, kTorn, kIoError, kEnd };
  Kind kind = kEnd;
  uint64_t offset = 0;  // where the record (or bad run, or torn tail) starts
  uint64_t bytes = 0;   // its length in the file (kRecord, kBadValue: record_bytes(value_len))
  RecordHeader header;  // kRecord, kBadValue
  int error = 0;        // kIoError
};

class SegmentScanner {
 public:
  SegmentScanner(uint64_t file_size, ReadAtFn read_at, std::span<uint8_t> scratch);

  ScanItem next();
  // Bytes of the file accounted for so far (the end of the last item).
  uint64_t position() const { return pos_; }
  // Stops checksumming early (next() then returns kEnd): the tier's stop flag.
  void set_stop(const std::atomic<bool>* stop) { stop_ = stop; }

 private:
  // Reads exactly `n` bytes at `off` into scratch_ (n <= scratch_.size()): n, a short count at end
  // of file, or -errno.
  int64_t read_exact(uint64_t off, uint64_t n);
  ScanItem finish(ScanItem item);

  uint64_t size_;
  ReadAtFn read_at_;
  std::span<uint8_t> scratch_;
  uint64_t pos_ = 0;
  bool done_ = false;
  const std::atomic<bool>* stop_ = nullptr;
};

}  // namespace cgn::kvcache
