#include "kvcache/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#endif

namespace cgn::kvcache {
namespace {

constexpr uint32_t kPoly = 0x82F63B78;  // CRC-32C, reflected

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) {
      c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    }
    t[i] = c;
  }
  return t;
}

constexpr std::array<uint32_t, 256> kTable = make_table();

uint32_t crc_table(const uint8_t* p, size_t n, uint32_t c) {
  for (size_t i = 0; i < n; ++i) {
    c = kTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  }
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc_hw(const uint8_t* p, size_t n, uint32_t c) {
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c64);
  while (n > 0) {
    c32 = _mm_crc32_u8(c32, *p++);
    --n;
  }
  return c32;
}

bool detect_sse42() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) {
    return false;
  }
  return (c & bit_SSE4_2) != 0;
}
#endif

}  // namespace

bool crc32c_hardware() {
#if defined(__x86_64__)
  static const bool hw = detect_sse42();
  return hw;
#else
  return false;
#endif
}

uint32_t crc32c(std::span<const uint8_t> data, uint32_t crc) {
  uint32_t c = ~crc;
#if defined(__x86_64__)
  if (crc32c_hardware()) {
    return ~crc_hw(data.data(), data.size(), c);
  }
#endif
  return ~crc_table(data.data(), data.size(), c);
}

}  // namespace cgn::kvcache
