#include "kvcache/ssd_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/log.h"
#include "kvcache/crc32c.h"
#include "kvcache/segment.h"

namespace cgn::kvcache {
namespace {

constexpr uint64_t kScratchBytes = 1ull << 20;  // scan buffer and read bounce buffer

class SystemWallClock final : public Clock {
 public:
  Nanos now() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

const SystemWallClock& system_wall_clock() {
  static const SystemWallClock clock;
  return clock;
}

std::string errno_text(int e) {
  return std::error_code(e, std::generic_category()).message();
}

bool is_disk_full(int e) {
  return e == ENOSPC || e == EDQUOT;
}

// A page-aligned heap buffer (O_DIRECT needs aligned memory).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(uint64_t n) { resize(n); }
  void resize(uint64_t n) {
    if (n <= size_) {
      return;
    }
    void* p = std::aligned_alloc(kSegmentPage, round_up_page(n));
    if (p == nullptr) {
      throw std::bad_alloc();
    }
    data_.reset(static_cast<uint8_t*>(p));
    size_ = round_up_page(n);
  }
  std::span<uint8_t> span() { return {data_.get(), size_}; }
  uint8_t* data() { return data_.get(); }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  uint64_t size_ = 0;
};

int64_t pread_some(int fd, uint64_t off, std::span<uint8_t> buf) {
  for (;;) {
    const ssize_t r = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(off));
    if (r >= 0) {
      return r;
    }
    if (errno != EINTR) {
      return -errno;
    }
  }
}

// Reads exactly buf.size() bytes: 0, -errno, or -EIO for a short read (the file is shorter).
int pread_full(int fd, uint64_t off, std::span<uint8_t> buf) {
  uint64_t got = 0;
  while (got < buf.size()) {
    const int64_t r = pread_some(fd, off + got, buf.subspan(got));
    if (r < 0) {
      return static_cast<int>(r);
    }
    if (r == 0) {
      return -EIO;
    }
    got += static_cast<uint64_t>(r);
  }
  return 0;
}

// Writes every byte of `iov` at `off`: 0 or errno.
int pwritev_full(int fd, uint64_t off, std::vector<iovec> iov) {
  size_t first = 0;
  while (first < iov.size()) {
    const ssize_t r =
        ::pwritev(fd, iov.data() + first, static_cast<int>(iov.size() - first), static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno;
    }
    if (r == 0) {
      return EIO;
    }
    off += static_cast<uint64_t>(r);
    auto left = static_cast<size_t>(r);
    while (first < iov.size() && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (left > 0) {
      iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return 0;
}

// Whether files in `dir` accept O_DIRECT: 0, or the errno of the refusal.
int probe_direct_io(const std::string& dir) {
  const std::string path = dir + "/.direct-io-probe";
  const int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_DIRECT | O_CLOEXEC | O_TRUNC, 0600);
  if (fd < 0) {
    return errno;
  }
  AlignedBuffer page(kSegmentPage);
  std::memset(page.data(), 0, kSegmentPage);
  int err = 0;
  if (::pwrite(fd, page.data(), kSegmentPage, 0) != static_cast<ssize_t>(kSegmentPage)) {
    err = errno != 0 ? errno : EIO;
  } else if (::pread(fd, page.data(), kSegmentPage, 0) != static_cast<ssize_t>(kSegmentPage)) {
    err = errno != 0 ? errno : EIO;
  }
  ::close(fd);
  ::unlink(path.c_str());
  return err;
}

struct Segment {
  uint64_t id = 0;
  std::string path;
  int fd = -1;
  uint64_t size = 0;       // file bytes; under the tier's lock
  uint64_t scan_size = 0;  // bytes at open, for scan progress
  uint64_t live_records = 0;
  uint64_t live_bytes = 0;
  std::vector<BlockKey> keys;  // keys indexed here; some may have moved on since
  bool scanned = false;        // every record of the file is known (always true for new ones)
  bool dead = false;           // evicted or deleted; the file is gone

  ~Segment() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
};

struct Entry {
  std::shared_ptr<Segment> seg;
  uint64_t offset = 0;  // of the header page
  uint64_t value_len = 0;
  uint64_t seq = 0;
  Nanos born = 0;  // injected-clock time at which the record's age was 0
  uint32_t crc = 0;
};

}  // namespace

class SsdTier::Impl {
 public:
  Impl(SsdConfig cfg, const Clock& clock, ProtectedFn is_protected, SsdTierHooks hooks, bool direct)
      : cfg_(std::move(cfg)),
        clock_(clock),
        wall_(hooks.wall_clock != nullptr ? *hooks.wall_clock : system_wall_clock()),
        is_protected_(std::move(is_protected)),
        hooks_(std::move(hooks)),
        direct_(direct),
        log_(log::get("kvcache.ssd")) {}

  ~Impl() {
    stop_.store(true);
    if (scan_thread_.joinable()) {
      scan_thread_.join();
    }
    std::lock_guard w(write_mu_);
    if (active_) {
      ::fdatasync(active_->fd);
    }
  }

  Status<StoreError> open_segments();
  void start_scan() {
    scan_thread_ = std::thread([this] { run_scan(); });
  }

  Status<StoreError> write(const BlockKey& key, std::span<const uint8_t> value);
  bool contains(const BlockKey& key) const {
    std::shared_lock l(mu_);
    return index_.contains(key);
  }
  std::optional<uint64_t> length(const BlockKey& key) const {
    std::shared_lock l(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      return std::nullopt;
    }
    return it->second.value_len;
  }
  Result<uint64_t, StoreError> read(const BlockKey& key, std::span<uint8_t> out);
  void erase(const BlockKey& key) {
    std::unique_lock l(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      drop_locked(it);
    }
  }
  void maintain();
  SsdStats stats() const;

 private:
  using Index = std::unordered_map<BlockKey, Entry, DigestHash>;

  int open_flags() const { return O_RDWR | O_CLOEXEC | (direct_ ? O_DIRECT : 0); }

  // Removes an index entry and its bytes from its segment's live counts. mu_ held exclusively.
  void drop_locked(Index::iterator it) {
    Segment& seg = *it->second.seg;
    const uint64_t bytes = record_bytes(it->second.value_len);
    seg.live_records -= 1;
    seg.live_bytes -= bytes;
    live_bytes_ -= bytes;
    index_.erase(it);
  }

  // Indexes `e` under `key` unless a later record of the key is indexed. mu_ held exclusively.
  void index_locked(const BlockKey& key, Entry e) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      const Entry& old = it->second;
      if (old.seg->id > e.seg->id || (old.seg->id == e.seg->id && old.seq > e.seq)) {
        return;
      }
      drop_locked(it);
    }
    const uint64_t bytes = record_bytes(e.value_len);
    e.seg->live_records += 1;
    e.seg->live_bytes += bytes;
    e.seg->keys.push_back(key);
    live_bytes_ += bytes;
    index_.emplace(key, std::move(e));
  }

  // Deletes a segment and drops its records. write_mu_ held; takes mu_.
  void remove_segment(const std::shared_ptr<Segment>& seg, bool count_evictions);
  // Evicts oldest unprotected segments until `need` more bytes fit under max_bytes. write_mu_ held.
  Status<StoreError> make_room(uint64_t need);
  // Opens a new active segment. write_mu_ held.
  Status<StoreError> roll();
  void run_scan();
  void scan_segment(const std::shared_ptr<Segment>& seg, std::span<uint8_t> scratch);
  // Counts a failed write and keeps its message as last_error.
  Error<StoreError> fail_write(const std::string& what, int err);
  void raise_seq(uint64_t seq) {
    uint64_t cur = next_seq_.load();
    while (cur <= seq && !next_seq_.compare_exchange_weak(cur, seq + 1)) {
    }
  }

  const SsdConfig cfg_;
  const Clock& clock_;
  const Clock& wall_;
  const ProtectedFn is_protected_;
  const SsdTierHooks hooks_;
  const bool direct_;
  log::Logger log_;

  // The index, the segment table and the counters below it.
  mutable std::shared_mutex mu_;
  Index index_;
  std::map<uint64_t, std::shared_ptr<Segment>> segments_;
  uint64_t disk_bytes_ = 0;  // sum of segment file sizes
  uint64_t live_bytes_ = 0;  // record bytes indexed
  uint64_t evictions_ = 0;
  uint64_t ttl_expiries_ = 0;
  uint64_t checksum_failures_ = 0;
  uint64_t torn_tails_ = 0;
  uint64_t write_errors_ = 0;
  std::string last_error_;

  // The writer: the active segment and the write buffer; also serialises evictions.
  std::mutex write_mu_;
  std::shared_ptr<Segment> active_;
  uint64_t next_segment_id_ = 1;
  AlignedBuffer wbuf_;

  std::atomic<uint64_t> next_seq_{1};
  std::atomic<uint64_t> scan_done_{0};
  std::atomic<uint64_t> scan_total_{0};
  std::atomic<bool> scan_complete_{false};
  std::atomic<bool> stop_{false};
  std::vector<std::shared_ptr<Segment>> to_scan_;
  std::thread scan_thread_;
};

Status<StoreError> SsdTier::Impl::open_segments() {
  std::error_code ec;
  std::vector<std::pair<uint64_t, std::string>> found;
  for (const auto& de : std::filesystem::directory_iterator(cfg_.dir, ec)) {
    const std::string name = de.path().filename().string();
    if (auto id = parse_segment_name(name)) {
      found.emplace_back(*id, de.path().string());
    }
  }
  if (ec) {
    return make_error(StoreError::kIo, "ssd.dir " + cfg_.dir + ": cannot list: " + ec.message());
  }
  std::sort(found.begin(), found.end());
  AlignedBuffer page(kSegmentPage);
  for (auto& [id, path] : found) {
    auto seg = std::make_shared<Segment>();
    seg->id = id;
    seg->path = path;
    seg->fd = ::open(path.c_str(), open_flags());
    if (seg->fd < 0) {
      return make_error(StoreError::kIo, "ssd tier: cannot open " + path + ": " + errno_text(errno));
    }
    struct stat st {};
    if (::fstat(seg->fd, &st) != 0) {
      return make_error(StoreError::kIo, "ssd tier: cannot stat " + path + ": " + errno_text(errno));
    }
    seg->size = static_cast<uint64_t>(st.st_size);
    seg->scan_size = seg->size;
    // seq seed: records in a segment carry consecutive seqs from its first one, one per page at most.
    if (seg->size >= kSegmentPage && pread_full(seg->fd, 0, page.span().first(kSegmentPage)) == 0) {
      if (auto h = decode_header(page.span().first(kSegmentPage))) {
        raise_seq(h->seq + seg->size / kSegmentPage);
      }
    }
    disk_bytes_ += seg->size;
    scan_total_ += seg->size;
    next_segment_id_ = std::max(next_segment_id_, id + 1);
    segments_.emplace(id, seg);
    to_scan_.push_back(std::move(seg));
  }
  return Ok{};
}

void SsdTier::Impl::run_scan() {
  AlignedBuffer scratch(kScratchBytes);
  uint64_t base = 0;
  for (const auto& seg : to_scan_) {
    if (stop_.load()) {
      break;
    }
    if (hooks_.before_segment_scan) {
      hooks_.before_segment_scan(seg->id);
    }
    if (stop_.load()) {
      break;
    }
    scan_segment(seg, scratch.span());
    base += seg->scan_size;
    scan_done_.store(base);
    std::unique_lock l(mu_);
    seg->scanned = true;
  }
  if (!stop_.load()) {
    scan_complete_.store(true);
    const SsdStats s = stats();
    CGN_LOG_INFO(log_, "ssd tier scanned", log::kv("dir", cfg_.dir), log::kv("records", s.blocks),
                 log::kv("segments", s.segments), log::kv("torn_tails", s.torn_tails),
                 log::kv("checksum_failures", s.checksum_failures), log::kv("ttl_expiries", s.ttl_expiries));
  }
}

void SsdTier::Impl::scan_segment(const std::shared_ptr<Segment>& seg, std::span<uint8_t> scratch) {
  {
    std::shared_lock l(mu_);
    if (seg->dead) {
      return;
    }
  }
  const uint64_t base = scan_done_.load();
  const int fd = seg->fd;
  SegmentScanner scan(
      seg->scan_size, [fd](uint64_t off, std::span<uint8_t> buf) { return pread_some(fd, off, buf); },
      scratch);
  scan.set_stop(&stop_);
  for (ScanItem item = scan.next(); item.kind != ScanItem::kEnd; item = scan.next()) {
    scan_done_.store(base + scan.position());
    switch (item.kind) {
      case ScanItem::kRecord: {
        raise_seq(item.header.seq);
        const Nanos age = std::max<Nanos>(0, wall_.now() - item.header.write_time_ns);
        std::unique_lock l(mu_);
        if (seg->dead) {
          return;
        }
        if (cfg_.ttl > 0 && age > cfg_.ttl) {
          ++ttl_expiries_;
          break;
        }
        index_locked(item.header.key, Entry{.seg = seg,
                                            .offset = item.offset,
                                            .value_len = item.header.value_len,
                                            .seq = item.header.seq,
                                            .born = clock_.now() - age,
                                            .crc = item.header.value_crc});
        break;
      }
      case ScanItem::kBadValue:
      case ScanItem::kBadHeader: {
        CGN_LOG_WARN(log_, "ssd record failed its checksum; dropped", log::kv("file", seg->path),
                     log::kv("offset", item.offset),
                     log::kv("what", item.kind == ScanItem::kBadValue ? "value" : "header"));
        std::unique_lock l(mu_);
        ++checksum_failures_;
        break;
      }
      case ScanItem::kTorn: {
        const int rc = ::ftruncate(seg->fd, static_cast<off_t>(item.offset));
        CGN_LOG_WARN(log_, "ssd segment has a torn tail; truncated", log::kv("file", seg->path),
                     log::kv("offset", item.offset), log::kv("bytes", item.bytes),
                     log::kv("truncate", rc == 0 ? std::string("ok") : errno_text(errno)));
        std::unique_lock l(mu_);
        ++torn_tails_;
        if (rc == 0 && !seg->dead) {
          disk_bytes_ -= seg->size - item.offset;
          seg->size = item.offset;
        }
        break;
      }
      case ScanItem::kIoError:
        CGN_LOG_WARN(log_, "ssd segment could not be read to its end", log::kv("file", seg->path),
                     log::kv("offset", item.offset), log::kv("error", errno_text(item.error)));
        break;
      case ScanItem::kEnd:
        break;
    }
  }
}

Status<StoreError> SsdTier::Impl::roll() {
  if (active_) {
    ::fdatasync(active_->fd);
    active_.reset();
  }
  auto seg = std::make_shared<Segment>();
  seg->id = next_segment_id_++;
  seg->path = cfg_.dir + "/" + segment_file_name(seg->id);
  seg->fd = ::open(seg->path.c_str(), open_flags() | O_CREAT | O_EXCL, 0644);
  if (seg->fd < 0) {
    const int e = errno;
    return make_error(is_disk_full(e) ? StoreError::kDiskFull : StoreError::kIo,
                      "ssd tier: cannot create " + seg->path + ": " + errno_text(e));
  }
  seg->scanned = true;
  {
    std::unique_lock l(mu_);
    segments_.emplace(seg->id, seg);
  }
  active_ = std::move(seg);
  return Ok{};
}

void SsdTier::Impl::remove_segment(const std::shared_ptr<Segment>& seg, bool count_evictions) {
  {
    std::unique_lock l(mu_);
    if (seg->dead) {
      return;
    }
    for (const BlockKey& k : seg->keys) {
      auto it = index_.find(k);
      if (it != index_.end() && it->second.seg == seg) {
        drop_locked(it);
        if (count_evictions) {
          ++evictions_;
        }
      }
    }
    seg->keys.clear();
    seg->keys.shrink_to_fit();
    disk_bytes_ -= seg->size;
    seg->dead = true;
    segments_.erase(seg->id);
  }
  if (active_ == seg) {
    active_.reset();
  }
  ::unlink(seg->path.c_str());
}

Status<StoreError> SsdTier::Impl::make_room(uint64_t need) {
  for (;;) {
    std::vector<std::shared_ptr<Segment>> order;
    {
      std::shared_lock l(mu_);
      if (disk_bytes_ + need <= cfg_.max_bytes) {
        return Ok{};
      }
      order.reserve(segments_.size());
      for (const auto& [id, seg] : segments_) {
        order.push_back(seg);
      }
    }
    bool evicted = false;
    for (const auto& seg : order) {
      std::vector<BlockKey> live;
      {
        std::shared_lock l(mu_);
        if (seg->dead) {
          continue;
        }
        for (const BlockKey& k : seg->keys) {
          auto it = index_.find(k);
          if (it != index_.end() && it->second.seg == seg) {
            live.push_back(k);
          }
        }
      }
      const bool guarded = is_protected_ && std::any_of(live.begin(), live.end(),
                                                        [&](const BlockKey& k) { return is_protected_(k); });
      if (guarded) {
        continue;
      }
      remove_segment(seg, true);
      evicted = true;
      break;
    }
    if (!evicted) {
      std::shared_lock l(mu_);
      return make_error(StoreError::kDiskFull,
                        "ssd tier " + cfg_.dir + ": ssd.max_bytes (" + std::to_string(cfg_.max_bytes) +
                            ") reached: " + std::to_string(disk_bytes_) + " bytes in use, " +
                            std::to_string(need) + " more needed, and every segment holds a protected block");
    }
  }
}

Error<StoreError> SsdTier::Impl::fail_write(const std::string& what, int err) {
  std::unique_lock l(mu_);
  ++write_errors_;
  last_error_ = what;
  return make_error(is_disk_full(err) ? StoreError::kDiskFull : StoreError::kIo, what);
}

Status<StoreError> SsdTier::Impl::write(const BlockKey& key, std::span<const uint8_t> value) {
  if (value.size() > kMaxValueBytes) {
    return make_error(StoreError::kTooLarge, "ssd tier: a value of " + std::to_string(value.size()) +
                                                 " bytes is over the record limit of " +
                                                 std::to_string(kMaxValueBytes));
  }
  const uint64_t bytes = record_bytes(value.size());
  std::lock_guard w(write_mu_);
  if (cfg_.max_bytes > 0) {
    if (bytes > cfg_.max_bytes) {
      return fail_write("ssd tier " + cfg_.dir + ": a record of " + std::to_string(bytes) +
                            " bytes is larger than ssd.max_bytes (" + std::to_string(cfg_.max_bytes) + ")",
                        ENOSPC);
    }
    if (auto room = make_room(bytes); !room) {
      return fail_write(room.error().message, ENOSPC);
    }
  }
  if (!active_ || (active_->size > 0 && active_->size + bytes > cfg_.segment_bytes)) {
    if (auto r = roll(); !r) {
      return fail_write(r.error().message, r.error().code == StoreError::kDiskFull ? ENOSPC : EIO);
    }
  }
  RecordHeader h;
  h.key = key;
  h.value_len = value.size();
  h.seq = next_seq_.load();
  h.write_time_ns = wall_.now();
  h.value_crc = crc32c(value);

  // The record goes out in one pwritev: header page, value, zero padding. With O_DIRECT every
  // span must be page-aligned: a page-aligned value (an arena block) is written in place with its
  // last partial page copied; any other value is copied whole into the aligned write buffer.
  const uint64_t full = value.size() / kSegmentPage * kSegmentPage;
  const uint64_t tail = value.size() - full;
  const bool in_place = !direct_ || reinterpret_cast<uintptr_t>(value.data()) % kSegmentPage == 0;
  std::vector<iovec> iov;
  if (in_place) {
    wbuf_.resize(2 * kSegmentPage);
    encode_header(h, wbuf_.span().first(kSegmentPage));
    iov.push_back({wbuf_.data(), kSegmentPage});
    if (full > 0) {
      iov.push_back({const_cast<uint8_t*>(value.data()), full});
    }
    if (tail > 0) {
      uint8_t* t = wbuf_.data() + kSegmentPage;
      std::memcpy(t, value.data() + full, tail);
      std::memset(t + tail, 0, kSegmentPage - tail);
      iov.push_back({t, kSegmentPage});
    }
  } else {
    wbuf_.resize(bytes);
    encode_header(h, wbuf_.span().first(kSegmentPage));
    uint8_t* v = wbuf_.data() + kSegmentPage;
    std::memcpy(v, value.data(), value.size());
    std::memset(v + value.size(), 0, bytes - kSegmentPage - value.size());
    iov.push_back({wbuf_.data(), bytes});
  }
  const std::shared_ptr<Segment> seg = active_;
  const uint64_t off = seg->size;
  if (const int err = pwritev_full(seg->fd, off, std::move(iov)); err != 0) {
    // Cut the partial record away so the segment stays scannable; if that fails too, the scan
    // at the next start treats it as a torn tail.
    if (::ftruncate(seg->fd, static_cast<off_t>(off)) != 0) {
      CGN_LOG_WARN(log_, "ssd segment could not be truncated after a failed write",
                   log::kv("file", seg->path), log::kv("error", errno_text(errno)));
    }
    const std::string what = "ssd tier: writing " + std::to_string(bytes) + " bytes to " + seg->path +
                             " failed: " + (is_disk_full(err) ? "no space left on device" : errno_text(err));
    {
      std::shared_lock l(mu_);
      if (last_error_ != what) {
        CGN_LOG_WARN(log_, "ssd write failed", log::kv("error", what));
      }
    }
    return fail_write(what, err);
  }
  next_seq_.fetch_add(1);
  std::unique_lock l(mu_);
  seg->size += bytes;
  disk_bytes_ += bytes;
  last_error_.clear();
  index_locked(key, Entry{.seg = seg,
                          .offset = off,
                          .value_len = value.size(),
                          .seq = h.seq,
                          .born = clock_.now(),
                          .crc = h.value_crc});
  return Ok{};
}

Result<uint64_t, StoreError> SsdTier::Impl::read(const BlockKey& key, std::span<uint8_t> out) {
  Entry e;
  {
    std::shared_lock l(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      return make_error(StoreError::kNotFound, "ssd tier: no record of key " + to_hex(key));
    }
    e = it->second;
  }
  if (out.size() < e.value_len) {
    return make_error(StoreError::kTooLarge, "ssd tier: a buffer of " + std::to_string(out.size()) +
                                                 " bytes for a value of " + std::to_string(e.value_len));
  }
  const int fd = e.seg->fd;
  const uint64_t voff = e.offset + kSegmentPage;
  const uint64_t len = e.value_len;
  int rc = 0;
  if (!direct_) {
    rc = pread_full(fd, voff, out.first(len));
  } else if (reinterpret_cast<uintptr_t>(out.data()) % kSegmentPage == 0) {
    const uint64_t full = len / kSegmentPage * kSegmentPage;
    if (full > 0) {
      rc = pread_full(fd, voff, out.first(full));
    }
    if (rc == 0 && len > full) {
      alignas(kSegmentPage) uint8_t page[kSegmentPage];
      rc = pread_full(fd, voff + full, std::span<uint8_t>(page, kSegmentPage));
      std::memcpy(out.data() + full, page, len - full);
    }
  } else {
    thread_local AlignedBuffer bounce;
    bounce.resize(kScratchBytes);
    for (uint64_t done = 0; rc == 0 && done < len;) {
      const uint64_t n = std::min<uint64_t>(kScratchBytes, len - done);
      rc = pread_full(fd, voff + done, bounce.span().first(round_up_page(n)));
      std::memcpy(out.data() + done, bounce.data(), n);
      done += n;
    }
  }
  if (rc != 0 && rc != -EIO) {
    return make_error(StoreError::kIo, "ssd tier: reading " + e.seg->path + ": " + errno_text(-rc));
  }
  if (rc == 0 && crc32c(out.first(len)) == e.crc) {
    return len;
  }
  // A checksum mismatch, or a record cut short under us: drop it, never serve it.
  std::unique_lock l(mu_);
  ++checksum_failures_;
  auto it = index_.find(key);
  if (it != index_.end() && it->second.seg == e.seg && it->second.offset == e.offset) {
    drop_locked(it);
  }
  CGN_LOG_WARN(log_, "ssd record failed its checksum at read; dropped", log::kv("file", e.seg->path),
               log::kv("offset", e.offset));
  return make_error(StoreError::kCorrupt, "ssd tier: the record of key " + to_hex(key) + " in " +
                                              e.seg->path + " at offset " + std::to_string(e.offset) +
                                              " failed its checksum; dropped");
}

void SsdTier::Impl::maintain() {
  std::lock_guard w(write_mu_);
  if (cfg_.ttl > 0) {
    const Nanos now = clock_.now();
    std::unique_lock l(mu_);
    for (auto it = index_.begin(); it != index_.end();) {
      auto next = std::next(it);
      if (now - it->second.born > cfg_.ttl) {
        drop_locked(it);
        ++ttl_expiries_;
      }
      it = next;
    }
  }
  if (cfg_.max_bytes > 0) {
    (void)make_room(0);  // over max_bytes with every segment protected: the next write says so
  }
  std::vector<std::shared_ptr<Segment>> empty;
  {
    std::shared_lock l(mu_);
    for (const auto& [id, seg] : segments_) {
      if (seg->scanned && seg->live_records == 0 && seg != active_) {
        empty.push_back(seg);
      }
    }
  }
  for (const auto& seg : empty) {
    remove_segment(seg, false);
  }
}

SsdStats SsdTier::Impl::stats() const {
  SsdStats s;
  std::shared_lock l(mu_);
  s.bytes = live_bytes_;
  s.blocks = index_.size();
  s.segments = segments_.size();
  s.evictions = evictions_;
  s.ttl_expiries = ttl_expiries_;
  s.checksum_failures = checksum_failures_;
  s.torn_tails = torn_tails_;
  s.write_errors = write_errors_;
  s.scan_bytes_done = scan_done_.load();
  s.scan_bytes_total = scan_total_.load();
  s.scan_complete = scan_complete_.load();
  s.direct_io = direct_;
  s.last_error = last_error_;
  return s;
}

Result<std::unique_ptr<SsdTier>, StoreError> SsdTier::open(const SsdConfig& cfg, const Clock& clock,
                                                           ProtectedFn is_protected, SsdTierHooks hooks) {
  if (cfg.dir.empty()) {
    return make_error(StoreError::kConfig, "ssd.dir is empty");
  }
  if (cfg.segment_bytes < kSegmentPage) {
    return make_error(StoreError::kConfig,
                      "ssd.segment_bytes must be at least 4096, got " + std::to_string(cfg.segment_bytes));
  }
  std::error_code ec;
  std::filesystem::create_directories(cfg.dir, ec);
  if (ec || !std::filesystem::is_directory(cfg.dir, ec)) {
    return make_error(StoreError::kConfig, "ssd.dir " + cfg.dir + " is not a directory that can be created" +
                                               (ec ? ": " + ec.message() : std::string()));
  }
  if (::access(cfg.dir.c_str(), W_OK | X_OK) != 0) {
    return make_error(StoreError::kConfig, "ssd.dir " + cfg.dir + " is not writable: " + errno_text(errno));
  }
  bool direct = false;
  if (cfg.direct_io != DirectIo::kOff) {
    const int err = probe_direct_io(cfg.dir);
    direct = err == 0;
    if (!direct && cfg.direct_io == DirectIo::kOn) {
      return make_error(StoreError::kConfig, "ssd.direct_io = on, but files in " + cfg.dir +
                                                 " refuse O_DIRECT: " + errno_text(err));
    }
    if (!direct && err != EINVAL && err != EOPNOTSUPP) {
      return make_error(StoreError::kConfig,
                        "ssd.dir " + cfg.dir + ": cannot create a file: " + errno_text(err));
    }
  }
  auto impl = std::make_unique<Impl>(cfg, clock, std::move(is_protected), std::move(hooks), direct);
  if (auto r = impl->open_segments(); !r) {
    return r.error();
  }
  impl->start_scan();
  return std::unique_ptr<SsdTier>(new SsdTier(std::move(impl)));
}

SsdTier::SsdTier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SsdTier::~SsdTier() = default;

Status<StoreError> SsdTier::write(const BlockKey& key, std::span<const uint8_t> value) {
  return impl_->write(key, value);
}
bool SsdTier::contains(const BlockKey& key) const {
  return impl_->contains(key);
}
std::optional<uint64_t> SsdTier::length(const BlockKey& key) const {
  return impl_->length(key);
}
Result<uint64_t, StoreError> SsdTier::read(const BlockKey& key, std::span<uint8_t> out) {
  return impl_->read(key, out);
}
void SsdTier::erase(const BlockKey& key) {
  impl_->erase(key);
}
void SsdTier::maintain() {
  impl_->maintain();
}
SsdStats SsdTier::stats() const {
  return impl_->stats();
}

}  // namespace cgn::kvcache
