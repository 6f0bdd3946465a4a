#include "kvcache/segment.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kvcache/crc32c.h"

namespace cgn::kvcache {
namespace {

constexpr size_t kOffVersion = 8;
constexpr size_t kOffFlags = 12;
constexpr size_t kOffKey = 16;
constexpr size_t kOffValueLen = 48;
constexpr size_t kOffSeq = 56;
constexpr size_t kOffWriteTime = 64;
constexpr size_t kOffValueCrc = 72;
constexpr size_t kHeaderUsed = kHeaderCrcOffset + 4;

template <class T>
void put_le(uint8_t* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    p[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
  }
}

template <class T>
T get_le(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<uint64_t>(p[i]) << (8 * i);
  }
  return static_cast<T>(v);
}

}  // namespace

void encode_header(const RecordHeader& h, std::span<uint8_t> page) {
  std::fill(page.begin(), page.end(), uint8_t{0});
  uint8_t* p = page.data();
  std::memcpy(p, kRecordMagic.data(), kRecordMagic.size());
  put_le<uint32_t>(p + kOffVersion, kSegmentFormatVersion);
  put_le<uint32_t>(p + kOffFlags, h.flags);
  std::memcpy(p + kOffKey, h.key.data(), h.key.size());
  put_le<uint64_t>(p + kOffValueLen, h.value_len);
  put_le<uint64_t>(p + kOffSeq, h.seq);
  put_le<int64_t>(p + kOffWriteTime, h.write_time_ns);
  put_le<uint32_t>(p + kOffValueCrc, h.value_crc);
  put_le<uint32_t>(p + kHeaderCrcOffset, crc32c(page.first(kHeaderCrcOffset)));
}

std::optional<RecordHeader> decode_header(std::span<const uint8_t> page) {
  if (page.size() < kHeaderUsed) {
    return std::nullopt;
  }
  const uint8_t* p = page.data();
  if (std::memcmp(p, kRecordMagic.data(), kRecordMagic.size()) != 0 ||
      get_le<uint32_t>(p + kOffVersion) != kSegmentFormatVersion ||
      get_le<uint32_t>(p + kHeaderCrcOffset) != crc32c(page.first(kHeaderCrcOffset))) {
    return std::nullopt;
  }
  RecordHeader h;
  h.flags = get_le<uint32_t>(p + kOffFlags);
  std::memcpy(h.key.data(), p + kOffKey, h.key.size());
  h.value_len = get_le<uint64_t>(p + kOffValueLen);
  h.seq = get_le<uint64_t>(p + kOffSeq);
  h.write_time_ns = get_le<int64_t>(p + kOffWriteTime);
  h.value_crc = get_le<uint32_t>(p + kOffValueCrc);
  if (h.flags != 0 || h.value_len > kMaxValueBytes) {
    return std::nullopt;
  }
  return h;
}

void append_record(std::vector<uint8_t>& file, RecordHeader h, std::span<const uint8_t> value) {
  h.value_len = value.size();
  h.value_crc = crc32c(value);
  const size_t at = file.size();
  file.resize(at + record_bytes(value.size()), 0);
  encode_header(h, std::span<uint8_t>(file).subspan(at, kSegmentPage));
  std::copy(value.begin(), value.end(), file.begin() + static_cast<ptrdiff_t>(at + kSegmentPage));
}

std::string segment_file_name(uint64_t id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name = "seg-0000000000000000.cgnkv";
  for (int i = 0; i < 16; ++i) {
    name[4 + 15 - i] = kHex[(id >> (4 * i)) & 0xf];
  }
  return name;
}

std::optional<uint64_t> parse_segment_name(std::string_view name) {
  constexpr std::string_view kPrefix = "seg-";
  constexpr std::string_view kSuffix = ".cgnkv";
  if (name.size() != kPrefix.size() + 16 + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix)) {
    return std::nullopt;
  }
  uint64_t id = 0;
  for (char c : name.substr(kPrefix.size(), 16)) {
    uint64_t d = 0;
    if (c >= '0' && c <= '9') {
      d = static_cast<uint64_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<uint64_t>(c - 'a' + 10);
    } else {
      return std::nullopt;
    }
    id = (id << 4) | d;
  }
  return id;
}

SegmentScanner::SegmentScanner(uint64_t file_size, ReadAtFn read_at, std::span<uint8_t> scratch)
    : size_(file_size), read_at_(std::move(read_at)), scratch_(scratch) {
  // A scratch buffer that is not a whole number of pages is cut down to one (at least one page
  // is a precondition).
  scratch_ = scratch_.first(scratch_.size() - scratch_.size() % kSegmentPage);
}

int64_t SegmentScanner::read_exact(uint64_t off, uint64_t n) {
  uint64_t got = 0;
  while (got < n) {
    const int64_t r = read_at_(off + got, scratch_.subspan(got, n - got));
    if (r < 0) {
      return r;
    }
    if (r == 0) {
      break;
    }
    got += static_cast<uint64_t>(r);
  }
  return static_cast<int64_t>(got);
}

ScanItem SegmentScanner::finish(ScanItem item) {
  if (item.kind == ScanItem::kTorn || item.kind == ScanItem::kIoError || item.kind == ScanItem::kEnd) {
    done_ = true;
  }
  if (item.kind == ScanItem::kTorn) {
    pos_ = size_;
  }
  return item;
}

ScanItem SegmentScanner::next() {
  if (done_ || scratch_.size() < kSegmentPage || (stop_ != nullptr && stop_->load())) {
    done_ = true;
    return ScanItem{.kind = ScanItem::kEnd, .offset = pos_};
  }
  if (pos_ >= size_) {
    return finish(ScanItem{.kind = ScanItem::kEnd, .offset = pos_});
  }
  const ScanItem torn{.kind = ScanItem::kTorn, .offset = pos_, .bytes = size_ - pos_};
  if (size_ - pos_ < kSegmentPage) {
    return finish(torn);
  }
  const int64_t r = read_exact(pos_, kSegmentPage);
  if (r < 0) {
    return finish(ScanItem{.kind = ScanItem::kIoError, .offset = pos_, .error = static_cast<int>(-r)});
  }
  if (static_cast<uint64_t>(r) < kSegmentPage) {
    return finish(torn);  // the file shrank under us
  }
  const auto header = decode_header(scratch_.first(kSegmentPage));
  if (!header) {
    // Look for the next valid header, page by page, a scratch buffer at a time.
    uint64_t p = pos_ + kSegmentPage;
    while (p + kSegmentPage <= size_) {
      if (stop_ != nullptr && stop_->load()) {
        done_ = true;
        return ScanItem{.kind = ScanItem::kEnd, .offset = pos_};
      }
      const uint64_t want = std::min<uint64_t>(scratch_.size(), (size_ - p) / kSegmentPage * kSegmentPage);
      const int64_t n = read_exact(p, want);
      if (n < 0) {
        return finish(ScanItem{.kind = ScanItem::kIoError, .offset = p, .error = static_cast<int>(-n)});
      }
      const uint64_t pages = static_cast<uint64_t>(n) / kSegmentPage;
      for (uint64_t i = 0; i < pages; ++i) {
        if (decode_header(scratch_.subspan(i * kSegmentPage, kSegmentPage))) {
          const uint64_t found = p + i * kSegmentPage;
          ScanItem bad{.kind = ScanItem::kBadHeader, .offset = pos_, .bytes = found - pos_};
          pos_ = found;
          return bad;
        }
      }
      if (pages == 0) {
        break;
      }
      p += pages * kSegmentPage;
    }
    return finish(torn);
  }
  const uint64_t bytes = record_bytes(header->value_len);
  if (bytes > size_ - pos_) {
    return finish(torn);
  }
  uint32_t crc = 0;
  uint64_t off = pos_ + kSegmentPage;
  uint64_t remain = header->value_len;
  while (remain > 0) {
    if (stop_ != nullptr && stop_->load()) {
      done_ = true;
      return ScanItem{.kind = ScanItem::kEnd, .offset = pos_};
    }
    const uint64_t want = std::min<uint64_t>(scratch_.size(), round_up_page(remain));
    const int64_t n = read_exact(off, want);
    if (n < 0) {
      return finish(ScanItem{.kind = ScanItem::kIoError, .offset = off, .error = static_cast<int>(-n)});
    }
    const uint64_t use = std::min<uint64_t>(remain, static_cast<uint64_t>(n));
    if (use == 0 || (static_cast<uint64_t>(n) < want && use < remain)) {
      return finish(torn);  // the file shrank under us
    }
    crc = crc32c(scratch_.first(use), crc);
    remain -= use;
    off += use;
  }
  ScanItem item{.kind = crc == header->value_crc ? ScanItem::kRecord : ScanItem::kBadValue,
                .offset = pos_,
                .bytes = bytes,
                .header = *header};
  pos_ += bytes;
  return item;
}

}  // namespace cgn::kvcache
