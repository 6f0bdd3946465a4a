#include "kvcached/key_cache.h"

#include <cstdlib>

namespace cgn::kvcached {

kvcache::KeyDeriver KeyCache::get(const kvcache::BlockNamespace& ns) {
  std::string material = kvcache::namespace_material(ns);
  {
    const std::lock_guard lock(mu_);
    if (auto it = by_material_.find(material); it != by_material_.end()) {
      return it->second;
    }
  }
  auto d = kvcache::KeyDeriver::create(ns);
  if (!d) {
    std::abort();  // callers pass validated namespaces only
  }
  const std::lock_guard lock(mu_);
  if (by_material_.size() >= kMaxNamespaces) {
    by_material_.clear();
  }
  by_material_.emplace(std::move(material), *d);
  return *d;
}

size_t KeyCache::size() const {
  const std::lock_guard lock(mu_);
  return by_material_.size();
}

}  // namespace cgn::kvcached
