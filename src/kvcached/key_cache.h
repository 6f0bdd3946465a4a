// KeyDerivers by namespace, so a request does not re-derive its namespace's seed. Bounded: past
// kMaxNamespaces distinct namespaces the cache starts over (a client cannot grow it without end).
// Thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kvcache/block_key.h"

namespace cgn::kvcached {

class KeyCache {
 public:
  static constexpr size_t kMaxNamespaces = 256;

  // The deriver of a valid namespace (decode_namespace validated it); a copy (32 bytes).
  kvcache::KeyDeriver get(const kvcache::BlockNamespace& ns);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, kvcache::KeyDeriver> by_material_;
};

}  // namespace cgn::kvcached
