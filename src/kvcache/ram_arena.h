// The RAM tier's memory: one memfd-backed shared mapping (so the daemon can hand the fd to a
// colocated engine, which maps the same pages) carved into fixed-size pages by a bitmap
// allocator.
//
// PageAllocator: one bit per page (1 = used); allocate(n) is a next-fit search for n contiguous
// free pages, scanning a 64-bit word at a time (full words are skipped with one compare). Worst
// case O(pages / 64 + free runs visited) per call, no heap allocation after construction.
//
// Thread-safety: neither class locks; the block store calls them under its mutex. The bytes of
// the mapping are read and written outside it (by whoever owns the allocated range).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/result.h"
#include "kvcache/store_types.h"

namespace cgn::kvcache {

class PageAllocator {
 public:
  explicit PageAllocator(uint32_t pages);

  // The first page of n contiguous free pages, now marked used; nullopt when no run is long
  // enough (or n is 0 or larger than the arena).
  std::optional<uint32_t> allocate(uint32_t n);
  // Frees pages [first, first + n), which must be in use.
  void release(uint32_t first, uint32_t n);

  uint32_t pages() const { return pages_; }
  uint32_t free_pages() const { return free_; }
  bool used(uint32_t page) const { return (bits_[page >> 6] >> (page & 63)) & 1; }

 private:
  std::optional<uint32_t> find_run(uint32_t begin, uint32_t end, uint32_t n) const;
  uint32_t next_free(uint32_t pos, uint32_t end) const;
  uint32_t next_used(uint32_t pos, uint32_t end) const;
  void set_range(uint32_t first, uint32_t n, bool used);

  uint32_t pages_;
  uint32_t free_;
  uint32_t cursor_ = 0;         // next-fit: the search starts where the last allocation ended
  std::vector<uint64_t> bits_;  // bits past pages_ in the last word are set (never free)
};

class RamArena {
 public:
  // A memfd of `bytes` (a multiple of page_bytes), its pages allocated and mapped MAP_SHARED
  // (locked in memory when the limits allow). kIo with errno's text when the kernel refuses.
  // The pages are allocated kPrefaultChunkBytes at a time; `stop_requested`, when given, is asked
  // before each chunk, and true ends create with kStopped, everything released.
  static Result<std::unique_ptr<RamArena>, StoreError> create(
      uint64_t bytes, uint32_t page_bytes, const std::function<bool()>& stop_requested = {});
  static constexpr uint64_t kPrefaultChunkBytes = 64ull << 20;
  ~RamArena();
  RamArena(const RamArena&) = delete;
  RamArena& operator=(const RamArena&) = delete;

  int fd() const { return fd_; }
  uint64_t bytes() const { return bytes_; }
  uint32_t page_bytes() const { return page_bytes_; }
  PageAllocator& pages() { return pages_; }
  const PageAllocator& pages() const { return pages_; }
  // The bytes of pages starting at `first_page`; `length` may end inside the last page.
  std::span<uint8_t> span(uint32_t first_page, uint64_t length) const {
    return {base_ + static_cast<uint64_t>(first_page) * page_bytes_, length};
  }
  uint64_t offset(uint32_t first_page) const { return static_cast<uint64_t>(first_page) * page_bytes_; }

 private:
  RamArena(int fd, uint8_t* base, uint64_t bytes, uint32_t page_bytes);
  int fd_;
  uint8_t* base_;
  uint64_t bytes_;
  uint32_t page_bytes_;
  PageAllocator pages_;
};

}  // namespace cgn::kvcache
