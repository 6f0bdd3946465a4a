// The tag-length-value encoding that key material is derived from (prefix digest seeds,
// core/digest.cpp; kvcache block keys, kvcache/block_key.cpp): one tag byte, the value's length
// as a little-endian uint32, the value's bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cgn::tlv {

inline void append_u32_le(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) {
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
}

inline void append_field(std::string& out, uint8_t tag, std::string_view value) {
  out.push_back(static_cast<char>(tag));
  append_u32_le(out, static_cast<uint32_t>(value.size()));
  out.append(value);
}

// A field holding one little-endian uint32.
inline void append_u32_field(std::string& out, uint8_t tag, uint32_t v) {
  std::string bytes;
  append_u32_le(bytes, v);
  append_field(out, tag, bytes);
}

}  // namespace cgn::tlv
