// Helpers shared by the routing unit tests.
#pragma once

#include <cstdint>
#include <vector>

#include "core/digest_types.h"
#include "routing/rng.h"

namespace cgn::routing::testing {

// A chain of `n` distinct pseudo-random digests named by `seed` (prompt id).
inline std::vector<Digest> digests(uint64_t seed, size_t n) {
  std::vector<Digest> out(n);
  // Start from a hashed seed: neighbouring seeds must not give shifted copies of one stream.
  uint64_t state = mix64(seed ^ 0x5DEECE66Dull) ^ (seed << 32);
  for (auto& d : out) {
    for (size_t i = 0; i < d.size(); i += 8) {
      const uint64_t v = splitmix64(state);
      for (size_t b = 0; b < 8; ++b) {
        d[i + b] = static_cast<uint8_t>(v >> (8 * b));
      }
    }
  }
  return out;
}

// `shared` leading digests common to every prompt (a system prompt), then `unique` of its own.
inline std::vector<Digest> shared_prefix_prompt(uint64_t prompt_id, size_t shared, size_t unique) {
  auto out = digests(0xC0FFEE, shared);
  auto tail = digests(prompt_id + 1'000'000, unique);
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

}  // namespace cgn::routing::testing
