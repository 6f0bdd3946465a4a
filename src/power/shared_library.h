// A library loaded at run time (dlopen), for the sources whose vendor library may be absent
// (NVML, ROCm SMI): opened with RTLD_NOW | RTLD_LOCAL, closed when its one owner goes, symbols
// looked up by name into typed function pointers. Movable, not copyable.
#pragma once

#include <dlfcn.h>

#include <string>
#include <utility>

#include "core/result.h"
#include "power/source.h"

namespace cgn::power {

class SharedLibrary {
 public:
  // The library at `path` (a name for the loader's search, or a path); a library that cannot be
  // loaded is kUnsupported: "cannot load <path>: <dlerror>".
  static Result<SharedLibrary, SourceError> open(const std::string& path);

  SharedLibrary(SharedLibrary&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  SharedLibrary& operator=(SharedLibrary&& o) noexcept {
    if (this != &o) {
      close();
      handle_ = std::exchange(o.handle_, nullptr);
    }
    return *this;
  }
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary() { close(); }

  // Sets `out` to the symbol's address, or nullptr when the library does not export it.
  template <class F>
  void bind(const char* symbol, F& out) const {
    out = reinterpret_cast<F>(::dlsym(handle_, symbol));
  }

 private:
  explicit SharedLibrary(void* handle) : handle_(handle) {}
  void close();
  void* handle_ = nullptr;
};

}  // namespace cgn::power
