// Test helpers shared by the block store's tests: numbered keys and the bytes stored under them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/digest.h"
#include "kvcache/block_key.h"

namespace cgn::kvcache::test_blocks {

inline BlockKey numbered_key(uint64_t i) {
  return blake3_hash("block-" + std::to_string(i));
}

// The bytes stored under key i: a pattern of i and the position, so a mixed-up block shows.
inline std::vector<uint8_t> pattern(uint64_t i, uint64_t length) {
  std::vector<uint8_t> v(length);
  for (uint64_t j = 0; j < length; ++j) {
    v[j] = static_cast<uint8_t>((i * 131 + j * 7 + (j >> 12)) & 0xff);
  }
  return v;
}

inline bool matches(uint64_t i, std::span<const uint8_t> got) {
  const std::vector<uint8_t> want = pattern(i, got.size());
  return std::equal(want.begin(), want.end(), got.begin());
}

}  // namespace cgn::kvcache::test_blocks
