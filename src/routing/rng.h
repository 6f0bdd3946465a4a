// A small seedable RNG (xoshiro256**, seeded through splitmix64). The routing core never
// uses std::random_device or a global generator: the benchmark replays traces and must make
// the same decisions for the same seed, on every platform (std:: distributions are not
// portable across standard libraries, so the few we need are written here).
#pragma once

#include <cstdint>
#include <string_view>

namespace cgn::routing {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A 64-bit finaliser, used to mix hashes (session keys, node ids).
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  x ^= x >> 33;
  return x;
}

// FNV-1a, then the finaliser: stable across processes and platforms (session affinity must
// survive a router restart).
inline uint64_t stable_hash(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h = (h ^ c) * 0x100000001B3ull;
  }
  return mix64(h);
}

// Not thread-safe; each owner keeps its own.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }

  void reseed(uint64_t seed) {
    uint64_t sm = seed;
    for (auto& w : s_) {
      w = splitmix64(sm);
    }
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 bits.
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform in [0, n); n > 0. multiply-shift on the top 32 bits (bias below n/2^32).
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace cgn::routing
