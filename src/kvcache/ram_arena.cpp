#include "kvcache/ram_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL and pages are touched
#endif

namespace cgn::kvcache {

PageAllocator::PageAllocator(uint32_t pages)
    : pages_(pages), free_(pages), bits_((static_cast<uint64_t>(pages) + 63) / 64, 0) {
  if (const uint32_t tail = pages & 63; tail != 0) {
    bits_.back() = ~0ull << tail;
  }
}

uint32_t PageAllocator::next_free(uint32_t pos, uint32_t end) const {
  if (pos >= end) {
    return end;
  }
  size_t w = pos >> 6;
  uint64_t word = ~bits_[w] & (~0ull << (pos & 63));
  while (word == 0) {
    ++w;
    if (w * 64 >= end) {
      return end;
    }
    word = ~bits_[w];
  }
  return std::min<uint32_t>(static_cast<uint32_t>(w * 64 + std::countr_zero(word)), end);
}

uint32_t PageAllocator::next_used(uint32_t pos, uint32_t end) const {
  if (pos >= end) {
    return end;
  }
  size_t w = pos >> 6;
  uint64_t word = bits_[w] & (~0ull << (pos & 63));
  while (word == 0) {
    ++w;
    if (w * 64 >= end) {
      return end;
    }
    word = bits_[w];
  }
  return std::min<uint32_t>(static_cast<uint32_t>(w * 64 + std::countr_zero(word)), end);
}

// The first run of n free pages that starts in [begin, end); it may extend past `end`.
std::optional<uint32_t> PageAllocator::find_run(uint32_t begin, uint32_t end, uint32_t n) const {
  uint32_t pos = begin;
  while (pos < end) {
    pos = next_free(pos, end);
    if (pos >= end || pages_ - pos < n) {
      return std::nullopt;
    }
    const uint32_t stop = next_used(pos, pos + n);
    if (stop - pos >= n) {
      return pos;
    }
    pos = stop;
  }
  return std::nullopt;
}

void PageAllocator::set_range(uint32_t first, uint32_t n, bool used) {
  uint64_t pos = first;
  const uint64_t end = static_cast<uint64_t>(first) + n;
  while (pos < end) {
    const uint64_t w = pos >> 6;
    const uint64_t lo = pos & 63;
    const uint64_t len = std::min<uint64_t>(64 - lo, end - pos);
    const uint64_t mask = (len == 64 ? ~0ull : ((1ull << len) - 1)) << lo;
    if (used) {
      assert((bits_[w] & mask) == 0);
      bits_[w] |= mask;
    } else {
      assert((bits_[w] & mask) == mask);
      bits_[w] &= ~mask;
    }
    pos += len;
  }
}

std::optional<uint32_t> PageAllocator::allocate(uint32_t n) {
  if (n == 0 || n > free_) {
    return std::nullopt;
  }
  std::optional<uint32_t> first = find_run(cursor_, pages_, n);
  if (!first && cursor_ > 0) {
    first = find_run(0, cursor_, n);
  }
  if (!first) {
    return std::nullopt;
  }
  set_range(*first, n, true);
  free_ -= n;
  cursor_ = *first + n == pages_ ? 0 : *first + n;
  return first;
}

void PageAllocator::release(uint32_t first, uint32_t n) {
  assert(static_cast<uint64_t>(first) + n <= pages_);
  set_range(first, n, false);
  free_ += n;
}

namespace {

Error<StoreError> sys_error(const char* what) {
  return make_error(StoreError::kIo,
                    std::string("RAM arena: ") + what + ": " + std::system_category().message(errno));
}

// Allocates [off, off + len) of the memfd and maps it into `base`: fallocate (where the kernel
// supports it for memfds; else pages come on first touch), then MADV_POPULATE_WRITE, or a write
// to each page on kernels without it. false with errno set on failure.
bool prefault_range(int fd, uint8_t* base, uint64_t off, uint64_t len, bool& fallocate_ok) {
  if (fallocate_ok && ::fallocate(fd, 0, static_cast<off_t>(off), static_cast<off_t>(len)) != 0) {
    if (errno != EOPNOTSUPP && errno != ENOSYS) {
      return false;
    }
    fallocate_ok = false;
  }
  if (::madvise(base + off, len, MADV_POPULATE_WRITE) == 0) {
    return true;
  }
  if (errno != EINVAL) {
    return false;
  }
  volatile uint8_t* p = base + off;  // the pages are new and zero: writing zero keeps them so
  for (uint64_t i = 0; i < len; i += 4096) {
    p[i] = 0;
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<RamArena>, StoreError> RamArena::create(uint64_t bytes, uint32_t page_bytes,
                                                               const std::function<bool()>& stop_requested) {
  assert(page_bytes > 0 && bytes % page_bytes == 0 && bytes / page_bytes <= UINT32_MAX);
  const int fd = ::memfd_create("cgn-kvcache-arena", MFD_CLOEXEC);
  if (fd < 0) {
    return sys_error("memfd_create");
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    auto err = sys_error("ftruncate");
    ::close(fd);
    return err;
  }
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) {
    auto err = sys_error("mmap");
    ::close(fd);
    return err;
  }
  auto* base = static_cast<uint8_t*>(mapped);
  // Allocate and map every page now, so that a too-large arena fails at open, not at the first
  // put, and no copy into the arena takes a page fault; in chunks, between which a stop request
  // (SIGTERM during a start that takes tens of seconds for a large arena) ends it.
  bool fallocate_ok = true;
  for (uint64_t off = 0; off < bytes; off += kPrefaultChunkBytes) {
    if (stop_requested && stop_requested()) {
      ::munmap(base, bytes);
      ::close(fd);
      return make_error(StoreError::kStopped, "RAM arena: stopped while allocating it (" +
                                                  std::to_string(off) + " of " + std::to_string(bytes) +
                                                  " bytes)");
    }
    if (!prefault_range(fd, base, off, std::min(kPrefaultChunkBytes, bytes - off), fallocate_ok)) {
      auto err = sys_error("allocating its pages");
      ::munmap(base, bytes);
      ::close(fd);
      return err;
    }
  }
  (void)::mlock(base, bytes);  // best effort: RLIMIT_MEMLOCK usually refuses large arenas
  return std::unique_ptr<RamArena>(new RamArena(fd, base, bytes, page_bytes));
}

RamArena::RamArena(int fd, uint8_t* base, uint64_t bytes, uint32_t page_bytes)
    : fd_(fd),
      base_(base),
      bytes_(bytes),
      page_bytes_(page_bytes),
      pages_(static_cast<uint32_t>(bytes / page_bytes)) {}

RamArena::~RamArena() {
  ::munmap(base_, bytes_);
  ::close(fd_);
}

}  // namespace cgn::kvcache
