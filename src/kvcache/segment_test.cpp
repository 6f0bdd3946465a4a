#include "kvcache/segment.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/digest.h"
#include "kvcache/crc32c.h"
#include "testing/process.h"

namespace cgn::kvcache {
namespace {

BlockKey key_of(int i) {
  return blake3_hash("segment test key " + std::to_string(i));
}

std::vector<uint8_t> bytes_of(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 8));
  }
  return v;
}

RecordHeader header_of(int i) {
  return RecordHeader{.key = key_of(i),
                      .seq = static_cast<uint64_t>(100 + i),
                      .write_time_ns = 1'800'000'000'000'000'000 + i};
}

// A segment of records with these value sizes; offsets[i] is where record i starts.
struct Built {
  std::vector<uint8_t> file;
  std::vector<uint64_t> offsets;
};

Built build(const std::vector<size_t>& sizes) {
  Built b;
  for (size_t i = 0; i < sizes.size(); ++i) {
    b.offsets.push_back(b.file.size());
    append_record(b.file, header_of(static_cast<int>(i)), bytes_of(sizes[i], static_cast<uint8_t>(i)));
  }
  return b;
}

std::vector<ScanItem> scan_all(const std::vector<uint8_t>& file, size_t scratch_pages = 4) {
  std::vector<uint8_t> scratch(scratch_pages * kSegmentPage);
  SegmentScanner scan(
      file.size(),
      [&](uint64_t off, std::span<uint8_t> buf) -> int64_t {
        if (off >= file.size()) {
          return 0;
        }
        const uint64_t n = std::min<uint64_t>(buf.size(), file.size() - off);
        std::memcpy(buf.data(), file.data() + off, n);
        return static_cast<int64_t>(n);
      },
      scratch);
  std::vector<ScanItem> items;
  for (ScanItem it = scan.next(); it.kind != ScanItem::kEnd; it = scan.next()) {
    items.push_back(it);
    if (items.size() > file.size() / kSegmentPage + 2) {
      ADD_FAILURE() << "the scan does not end";
      break;
    }
  }
  EXPECT_EQ(scan.position(), file.size());
  return items;
}

std::vector<ScanItem::Kind> kinds(const std::vector<ScanItem>& items) {
  std::vector<ScanItem::Kind> k;
  for (const auto& it : items) {
    k.push_back(it.kind);
  }
  return k;
}

TEST(SegmentHeader, EncodesAndDecodesEveryField) {
  RecordHeader h = header_of(7);
  h.value_len = 123456;
  h.value_crc = 0xdeadbeef;
  std::vector<uint8_t> page(kSegmentPage, 0xaa);
  encode_header(h, page);
  EXPECT_EQ(std::string(page.begin(), page.begin() + 8), "CGNKVREC");
  EXPECT_TRUE(std::all_of(page.begin() + kHeaderCrcOffset + 4, page.end(), [](uint8_t b) { return b == 0; }));
  auto back = decode_header(page);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, h);
}

TEST(SegmentHeader, AnyFlippedByteMakesTheHeaderInvalid) {
  RecordHeader h = header_of(1);
  h.value_len = 5000;
  std::vector<uint8_t> page(kSegmentPage);
  encode_header(h, page);
  for (size_t i = 0; i < kHeaderCrcOffset + 4; ++i) {
    auto bad = page;
    bad[i] ^= 0x01;
    EXPECT_FALSE(decode_header(bad)) << "byte " << i;
  }
}

TEST(SegmentHeader, RejectsALengthOverTheBoundEvenWithAGoodCrc) {
  RecordHeader h = header_of(1);
  h.value_len = kMaxValueBytes + 1;
  std::vector<uint8_t> page(kSegmentPage);
  encode_header(h, page);
  EXPECT_FALSE(decode_header(page));
  h.value_len = kMaxValueBytes;
  encode_header(h, page);
  EXPECT_TRUE(decode_header(page));
}

TEST(SegmentHeader, RejectsUnknownVersionAndFlags) {
  RecordHeader h = header_of(1);
  h.flags = 1;
  std::vector<uint8_t> page(kSegmentPage);
  encode_header(h, page);
  EXPECT_FALSE(decode_header(page));
}

TEST(SegmentName, RoundTripsAndRejectsEverythingElse) {
  EXPECT_EQ(segment_file_name(255), "seg-00000000000000ff.cgnkv");
  EXPECT_EQ(parse_segment_name(segment_file_name(0x0123456789abcdefull)), 0x0123456789abcdefull);
  for (const char* bad :
       {"seg-00000000000000FF.cgnkv", "seg-0000000000000ff.cgnkv", "seg-00000000000000ff.cgnk",
        "xeg-00000000000000ff.cgnkv", "seg-00000000000000fg.cgnkv", "", ".direct-io-probe"}) {
    EXPECT_FALSE(parse_segment_name(bad)) << bad;
  }
}

TEST(SegmentScanner, FindsEveryRecordOfAnIntactSegment) {
  const Built b = build({1, 4095, 4096, 4097, 70000});
  const auto items = scan_all(b.file, 1);  // a one-page scratch buffer: values are checksummed in pieces
  ASSERT_EQ(items.size(), 5u);
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(items[i].kind, ScanItem::kRecord);
    EXPECT_EQ(items[i].offset, b.offsets[i]);
    EXPECT_EQ(items[i].header.key, key_of(static_cast<int>(i)));
    EXPECT_EQ(items[i].header.seq, 100 + i);
  }
  EXPECT_EQ(items[1].bytes, 2 * kSegmentPage);
  EXPECT_EQ(items[3].bytes, 3 * kSegmentPage);
}

TEST(SegmentScanner, EmptySegmentEndsAtOnce) {
  EXPECT_TRUE(scan_all({}).empty());
}

TEST(SegmentScanner, ValueCutByTheEndOfFileIsATornTail) {
  Built b = build({5000, 5000, 9000});
  b.file.resize(b.offsets[2] + kSegmentPage + 100);
  const auto items = scan_all(b.file);
  EXPECT_EQ(kinds(items), (std::vector{ScanItem::kRecord, ScanItem::kRecord, ScanItem::kTorn}));
  EXPECT_EQ(items[2].offset, b.offsets[2]);
}

TEST(SegmentScanner, HeaderCutByTheEndOfFileIsATornTail) {
  Built b = build({5000, 5000, 9000});
  b.file.resize(b.offsets[2] + 100);
  const auto items = scan_all(b.file);
  EXPECT_EQ(kinds(items), (std::vector{ScanItem::kRecord, ScanItem::kRecord, ScanItem::kTorn}));
  EXPECT_EQ(items[2].offset, b.offsets[2]);
}

TEST(SegmentScanner, MissingPaddingIsATornTail) {
  Built b = build({5000});
  b.file.resize(kSegmentPage + 5000);
  EXPECT_EQ(kinds(scan_all(b.file)), (std::vector{ScanItem::kTorn}));
}

TEST(SegmentScanner, GarbageAfterTheLastRecordIsATornTail) {
  Built b = build({100, 100});
  b.file.resize(b.file.size() + 3 * kSegmentPage, 0x5a);
  const auto items = scan_all(b.file);
  EXPECT_EQ(kinds(items), (std::vector{ScanItem::kRecord, ScanItem::kRecord, ScanItem::kTorn}));
  EXPECT_EQ(items[2].offset, 4 * kSegmentPage);
}

TEST(SegmentScanner, BadValueIsDroppedAndTheScanGoesOn) {
  Built b = build({5000, 5000, 9000});
  b.file[b.offsets[1] + kSegmentPage + 4999] ^= 0x80;
  const auto items = scan_all(b.file);
  EXPECT_EQ(kinds(items), (std::vector{ScanItem::kRecord, ScanItem::kBadValue, ScanItem::kRecord}));
  EXPECT_EQ(items[1].header.key, key_of(1));
  EXPECT_EQ(items[2].offset, b.offsets[2]);
}

TEST(SegmentScanner, BadHeaderIsSkippedPageByPageToTheNextRecord) {
  Built b = build({5000, 20000, 9000});
  b.file[b.offsets[1] + 50] ^= 0x01;  // inside the value_len field
  const auto items = scan_all(b.file, 2);
  EXPECT_EQ(kinds(items), (std::vector{ScanItem::kRecord, ScanItem::kBadHeader, ScanItem::kRecord}));
  EXPECT_EQ(items[1].offset, b.offsets[1]);
  EXPECT_EQ(items[1].bytes, b.offsets[2] - b.offsets[1]);
  EXPECT_EQ(items[2].header.key, key_of(2));
}

TEST(SegmentScanner, AValidHeaderClaimingMoreThanTheFileIsATornTail) {
  std::vector<uint8_t> file(2 * kSegmentPage);
  RecordHeader h = header_of(0);
  h.value_len = kMaxValueBytes;  // 1 GiB in an 8 KiB file: nothing of that size is allocated
  encode_header(h, std::span<uint8_t>(file).first(kSegmentPage));
  EXPECT_EQ(kinds(scan_all(file)), (std::vector{ScanItem::kTorn}));
}

TEST(SegmentScanner, ReadErrorEndsTheScan) {
  const Built b = build({100, 100});
  std::vector<uint8_t> scratch(kSegmentPage);
  SegmentScanner scan(
      b.file.size(),
      [&](uint64_t off, std::span<uint8_t> buf) -> int64_t {
        if (off >= b.offsets[1]) {
          return -EIO;
        }
        std::memcpy(buf.data(), b.file.data() + off, buf.size());
        return static_cast<int64_t>(buf.size());
      },
      scratch);
  EXPECT_EQ(scan.next().kind, ScanItem::kRecord);
  const ScanItem it = scan.next();
  EXPECT_EQ(it.kind, ScanItem::kIoError);
  EXPECT_EQ(it.error, EIO);
  EXPECT_EQ(scan.next().kind, ScanItem::kEnd);
}

TEST(SegmentScanner, StopFlagEndsTheScan) {
  const Built b = build({100, 100});
  std::vector<uint8_t> scratch(kSegmentPage);
  std::atomic<bool> stop{false};
  SegmentScanner scan(
      b.file.size(),
      [&](uint64_t off, std::span<uint8_t> buf) -> int64_t {
        std::memcpy(buf.data(), b.file.data() + off, buf.size());
        return static_cast<int64_t>(buf.size());
      },
      scratch);
  scan.set_stop(&stop);
  EXPECT_EQ(scan.next().kind, ScanItem::kRecord);
  stop = true;
  EXPECT_EQ(scan.next().kind, ScanItem::kEnd);
}

// The fuzz target's seed corpus (tests/fuzz/corpus/segment/), built here from the encoder. The
// committed files must equal what the encoder writes today: a format change shows up as a failure
// here. CGN_WRITE_SEGMENT_CORPUS=1 rewrites them.
std::map<std::string, std::vector<uint8_t>> seed_corpus() {
  std::map<std::string, std::vector<uint8_t>> out;
  out["empty"] = {};
  out["one_small_record"] = build({1}).file;
  out["four_records"] = build({0, 4095, 4096, 4097}).file;
  Built torn_value = build({100, 6000});
  torn_value.file.resize(torn_value.offsets[1] + kSegmentPage + 3000);
  out["torn_value"] = torn_value.file;
  Built torn_header = build({100, 6000});
  torn_header.file.resize(torn_header.offsets[1] + 77);
  out["torn_header"] = torn_header.file;
  Built bad_value = build({100, 6000, 100});
  bad_value.file[bad_value.offsets[1] + kSegmentPage + 1] ^= 0xff;
  out["bad_value_crc"] = bad_value.file;
  Built bad_header = build({100, 9000, 100});
  bad_header.file[bad_header.offsets[1] + kHeaderCrcOffset] ^= 0xff;
  out["bad_header_crc"] = bad_header.file;
  std::vector<uint8_t> huge(kSegmentPage);
  RecordHeader h = header_of(9);
  h.value_len = kMaxValueBytes;
  encode_header(h, huge);
  out["huge_length"] = huge;
  return out;
}

TEST(SegmentCorpus, CommittedSeedsAreWhatTheEncoderWrites) {
  const std::string dir = testing::source_path("tests/fuzz/corpus/segment");
  const char* write = std::getenv("CGN_WRITE_SEGMENT_CORPUS");
  for (const auto& [name, bytes] : seed_corpus()) {
    const std::string path = dir + "/" + name;
    if (write != nullptr && std::string(write) == "1") {
      std::filesystem::create_directories(dir);
      testing::write_file(path, std::string(bytes.begin(), bytes.end()));
    }
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    const std::string got = testing::read_file(path);
    EXPECT_TRUE(got == std::string(bytes.begin(), bytes.end()))
        << path << " differs from the encoder's output";
  }
}

TEST(SegmentCorpus, SeedsScanAsTheirNamesSay) {
  const auto corpus = seed_corpus();
  EXPECT_TRUE(scan_all(corpus.at("empty")).empty());
  EXPECT_EQ(kinds(scan_all(corpus.at("four_records"))), std::vector<ScanItem::Kind>(4, ScanItem::kRecord));
  EXPECT_EQ(kinds(scan_all(corpus.at("torn_value"))), (std::vector{ScanItem::kRecord, ScanItem::kTorn}));
  EXPECT_EQ(kinds(scan_all(corpus.at("torn_header"))), (std::vector{ScanItem::kRecord, ScanItem::kTorn}));
  EXPECT_EQ(kinds(scan_all(corpus.at("bad_value_crc"))),
            (std::vector{ScanItem::kRecord, ScanItem::kBadValue, ScanItem::kRecord}));
  EXPECT_EQ(kinds(scan_all(corpus.at("bad_header_crc"))),
            (std::vector{ScanItem::kRecord, ScanItem::kBadHeader, ScanItem::kRecord}));
  EXPECT_EQ(kinds(scan_all(corpus.at("huge_length"))), (std::vector{ScanItem::kTorn}));
}

}  // namespace
}  // namespace cgn::kvcache
