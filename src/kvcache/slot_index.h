// The block store's key -> slot index: an open-addressing hash table sized once for the store's
// largest possible number of blocks, so inserts and erases never allocate or rehash.
//
// Each entry is 8 bytes: the high 32 bits of the key's hash (its home bucket and a tag compared
// before the key itself) and the slot number + 1 (0 = empty). Linear probing at a load factor
// of at most 1/2; erase shifts the following entries back (no tombstones, so probe lengths stay
// short however many blocks come and go). The keys live in the caller's slot array; `key_of`
// maps a slot number to its key.
//
// Thread-safety: none; the block store calls it under its mutex.
#pragma once

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdint>
#include <vector>

#include "core/digest_types.h"

namespace cgn::kvcache {

class SlotIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  explicit SlotIndex(uint32_t max_entries)
      : table_(std::bit_ceil(std::max<uint64_t>(16, 2 * static_cast<uint64_t>(max_entries))), 0),
        mask_(table_.size() - 1),
        max_entries_(max_entries) {}

  template <class KeyOf>
  uint32_t find(const Digest& key, const KeyOf& key_of) const {
    const uint32_t h = hash(key);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t e = table_[i];
      if (e == 0) {
        return kNone;
      }
      if (static_cast<uint32_t>(e >> 32) == h && key_of(slot_of(e)) == key) {
        return slot_of(e);
      }
    }
  }

  // `key` must be absent, and size() < max_entries.
  void insert(const Digest& key, uint32_t slot) {
    assert(size_ < max_entries_);
    const uint32_t h = hash(key);
    uint64_t i = h & mask_;
    while (table_[i] != 0) {
      i = (i + 1) & mask_;
    }
    table_[i] = (static_cast<uint64_t>(h) << 32) | (static_cast<uint64_t>(slot) + 1);
    ++size_;
  }

  // Removes `key` if present.
  template <class KeyOf>
  void erase(const Digest& key, const KeyOf& key_of) {
    const uint32_t h = hash(key);
    uint64_t i = h & mask_;
    for (;; i = (i + 1) & mask_) {
      const uint64_t e = table_[i];
      if (e == 0) {
        return;
      }
      if (static_cast<uint32_t>(e >> 32) == h && key_of(slot_of(e)) == key) {
        break;
      }
    }
    // Backward shift: move each following entry of the cluster into the hole when the hole lies
    // on its probe path (between its home bucket and where it sits, cyclically).
    for (uint64_t j = (i + 1) & mask_; table_[j] != 0; j = (j + 1) & mask_) {
      const uint64_t home = (table_[j] >> 32) & mask_;
      if (((j - home) & mask_) >= ((j - i) & mask_)) {
        table_[i] = table_[j];
        i = j;
      }
    }
    table_[i] = 0;
    --size_;
  }

  uint32_t size() const { return size_; }
  uint64_t buckets() const { return table_.size(); }

 private:
  static uint32_t hash(const Digest& key) { return static_cast<uint32_t>(DigestHash{}(key) >> 32); }
  static uint32_t slot_of(uint64_t e) { return static_cast<uint32_t>(e & 0xffffffffu) - 1; }

  std::vector<uint64_t> table_;
  uint64_t mask_;
  uint32_t max_entries_;
  uint32_t size_ = 0;
};

}  // namespace cgn::kvcache
