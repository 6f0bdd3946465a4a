#include "cluster/backend_registry.h"

#include <fmt/format.h>

namespace cgn::cluster {

Status<StateError> BackendRegistry::add(Backend backend) {
  if (backend.name.empty() || !backend.make_store || !backend.make_publisher) {
    return make_error(StateError::kConfig, "a state backend needs a name, make_store and make_publisher");
  }
  for (const auto& b : backends_) {
    if (b.name == backend.name) {
      return make_error(StateError::kConfig,
                        fmt::format("state backend \"{}\" is registered twice", backend.name));
    }
  }
  backends_.push_back(std::move(backend));
  return Ok{};
}

Result<const Backend*, StateError> BackendRegistry::find(std::string_view name) const {
  for (const auto& b : backends_) {
    if (b.name == name) {
      return &b;
    }
  }
  return make_error(StateError::kConfig,
                    fmt::format("state_backend \"{}\" is not available here; registered: {}", name,
                                fmt::join(names(), ", ")));
}

std::vector<std::string> BackendRegistry::names() const {
  std::vector<std::string> out;
  out.reserve(backends_.size());
  for (const auto& b : backends_) {
    out.push_back(b.name);
  }
  return out;
}

}  // namespace cgn::cluster
