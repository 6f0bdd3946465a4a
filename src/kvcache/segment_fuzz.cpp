// Fuzz target for the SSD tier's segment scanner: any bytes, read as a segment file's content
// through the same SegmentScanner the tier runs at start, give a bounded walk of records, bad
// records and at most one torn tail, never a crash, a hang or an allocation by a length read from
// the bytes. Corpus: tests/fuzz/corpus/segment/ (segment_test.cpp writes and checks the seeds).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "kvcache/segment.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using cgn::kvcache::kSegmentPage;
  using cgn::kvcache::ScanItem;
  (void)cgn::kvcache::decode_header(std::span<const uint8_t>(data, size));
  (void)cgn::kvcache::parse_segment_name(std::string_view(reinterpret_cast<const char*>(data), size));

  // Two pages of scratch, so that values are checksummed in several pieces.
  std::vector<uint8_t> scratch(2 * kSegmentPage);
  cgn::kvcache::SegmentScanner scan(
      size,
      [&](uint64_t off, std::span<uint8_t> buf) -> int64_t {
        if (off >= size) {
          return 0;
        }
        const size_t n = buf.size() < size - off ? buf.size() : size - off;
        std::memcpy(buf.data(), data + off, n);
        return static_cast<int64_t>(n);
      },
      scratch);
  const uint64_t max_items = size / kSegmentPage + 2;
  uint64_t items = 0;
  uint64_t expect = 0;  // items tile the file: each starts where the last ended
  for (ScanItem it = scan.next(); it.kind != ScanItem::kEnd; it = scan.next()) {
    if (++items > max_items || it.offset != expect || it.offset + it.bytes > size) {
      __builtin_trap();
    }
    if (it.kind == ScanItem::kRecord || it.kind == ScanItem::kBadValue) {
      if (it.bytes != cgn::kvcache::record_bytes(it.header.value_len) ||
          it.header.value_len > cgn::kvcache::kMaxValueBytes) {
        __builtin_trap();
      }
    }
    expect = it.offset + it.bytes;
  }
  if (scan.position() != size) {
    __builtin_trap();
  }
  return 0;
}
