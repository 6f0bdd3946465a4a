#include "sim/shell/kvcached_link.h"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <mutex>

namespace cgn::sim {
namespace {

std::filesystem::path exe_dir() {
  std::array<char, 4096> buf{};
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) {
    return {};
  }
  return std::filesystem::path(std::string(buf.data(), static_cast<size_t>(n))).parent_path();
}

struct Loaded {
  KvcachedConnectFn connect = nullptr;
  std::string error;
};

// Loads the module once per process, never unloaded.
const Loaded& load_module() {
  static const Loaded loaded = [] {
    Loaded l;
    const std::filesystem::path dir = exe_dir();
    const std::array<std::filesystem::path, 2> candidates = {
        dir / kKvcachedModule, dir / ".." / "lib" / "cognitora" / kKvcachedModule};
    std::string tried;
    for (const auto& p : candidates) {
      std::error_code ec;
      if (!std::filesystem::exists(p, ec)) {
        tried += (tried.empty() ? "" : ", ") + p.lexically_normal().string();
        continue;
      }
      void* h = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr) {
        const char* e = ::dlerror();
        l.error = "cannot load " + p.string() + ": " + (e != nullptr ? e : "unknown error");
        return l;
      }
      l.connect = reinterpret_cast<KvcachedConnectFn>(::dlsym(h, kKvcachedModuleEntry));
      if (l.connect == nullptr) {
        l.error = p.string() + " has no " + kKvcachedModuleEntry;
      }
      return l;
    }
    l.error = std::string("the gRPC client module ") + kKvcachedModule + " is not installed (looked at " +
              tried + ")";
    return l;
  }();
  return loaded;
}

}  // namespace

Result<std::unique_ptr<KvcachedLink>, KvcachedLinkError> connect_kvcached(const std::string& target,
                                                                          uint32_t timeout_ms) {
  const Loaded& m = load_module();
  if (m.connect == nullptr) {
    return make_error(KvcachedLinkError::kModule, m.error);
  }
  std::string error;
  KvcachedLink* link = m.connect(target.c_str(), timeout_ms, &error);
  if (link == nullptr) {
    return make_error(KvcachedLinkError::kConnect, error);
  }
  return std::unique_ptr<KvcachedLink>(link);
}

}  // namespace cgn::sim
