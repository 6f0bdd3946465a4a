#include "kvcache/block_key.h"

#include <fmt/format.h>

#include <string_view>

#include "core/digest.h"
#include "core/tlv.h"

namespace cgn::kvcache {
namespace {

constexpr std::string_view kKeyContext = "cognitora kvcache block key v1";

// TLV tags, written in ascending order; tenant is omitted when empty.
constexpr uint8_t kTagModel = 0x01;
constexpr uint8_t kTagDtype = 0x02;
constexpr uint8_t kTagTpRank = 0x03;
constexpr uint8_t kTagTpSize = 0x04;
constexpr uint8_t kTagBlockTokens = 0x05;
constexpr uint8_t kTagTenant = 0x06;

using tlv::append_field;
using tlv::append_u32_field;

Status<KeyError> check_string(std::string_view name, const std::string& value, bool required) {
  if (required && value.empty()) {
    return make_error(KeyError::kInvalid, fmt::format("namespace field {} is empty", name));
  }
  if (value.size() > kMaxNamespaceField) {
    return make_error(KeyError::kInvalid, fmt::format("namespace field {} is {} bytes (at most {})", name,
                                                      value.size(), kMaxNamespaceField));
  }
  return Ok{};
}

}  // namespace

Status<KeyError> validate(const BlockNamespace& ns) {
  for (auto s : {check_string("model", ns.model, true), check_string("dtype", ns.dtype, true),
                 check_string("tenant", ns.tenant, false)}) {
    if (!s) {
      return s;
    }
  }
  if (ns.tp_size == 0) {
    return make_error(KeyError::kInvalid, "namespace field tp_size is 0 (at least 1)");
  }
  if (ns.tp_rank >= ns.tp_size) {
    return make_error(KeyError::kInvalid, fmt::format("namespace field tp_rank {} is not below tp_size {}",
                                                      ns.tp_rank, ns.tp_size));
  }
  if (ns.block_tokens == 0) {
    return make_error(KeyError::kInvalid, "namespace field block_tokens is 0 (at least 1)");
  }
  return Ok{};
}

std::string namespace_material(const BlockNamespace& ns) {
  std::string out;
  out.reserve(64 + ns.model.size() + ns.dtype.size() + ns.tenant.size());
  append_field(out, kTagModel, ns.model);
  append_field(out, kTagDtype, ns.dtype);
  append_u32_field(out, kTagTpRank, ns.tp_rank);
  append_u32_field(out, kTagTpSize, ns.tp_size);
  append_u32_field(out, kTagBlockTokens, ns.block_tokens);
  if (!ns.tenant.empty()) {
    append_field(out, kTagTenant, ns.tenant);
  }
  return out;
}

Result<KeyDeriver, KeyError> KeyDeriver::create(const BlockNamespace& ns) {
  if (auto s = validate(ns); !s) {
    return s.error();
  }
  return KeyDeriver(blake3_derive_key(kKeyContext, namespace_material(ns)));
}

BlockKey KeyDeriver::key(const Digest& prefix) const {
  return blake3_keyed_hash(seed_,
                           std::string_view(reinterpret_cast<const char*>(prefix.data()), prefix.size()));
}

}  // namespace cgn::kvcache
