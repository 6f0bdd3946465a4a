#include "power/shared_library.h"

#include <fmt/format.h>

namespace cgn::power {

Result<SharedLibrary, SourceError> SharedLibrary::open(const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return make_error(SourceError::kUnsupported, fmt::format("cannot load {}: {}", path, why ? why : "?"));
  }
  return SharedLibrary(handle);
}

void SharedLibrary::close() {
  if (handle_ != nullptr) {
    ::dlclose(handle_);
    handle_ = nullptr;
  }
}

}  // namespace cgn::power
