// The prefix digest value type, shared by every module that indexes or
// compares digests. Kept tiny and free of BLAKE3 so that it can be included
// anywhere; the construction lives in core/digest.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace cgn {

// A 32-byte sequence-chained BLAKE3 prefix digest (docs/design/principles.md, prefix digests).
using Digest = std::array<uint8_t, 32>;

// Digests are uniformly random: the first 8 bytes are a perfect hash key.
struct DigestHash {
  size_t operator()(const Digest& d) const noexcept {
    uint64_t v;
    std::memcpy(&v, d.data(), sizeof v);
    return static_cast<size_t>(v);
  }
};

inline std::string to_hex(const Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(d.size() * 2, '0');
  for (size_t i = 0; i < d.size(); ++i) {
    out[2 * i] = kHex[d[i] >> 4];
    out[2 * i + 1] = kHex[d[i] & 0xf];
  }
  return out;
}

}  // namespace cgn
