// Fuzz target: arbitrary bytes as cognitora.toml. Any input must give a config or an error, never a
// crash, and a loaded config must survive dump -> load -> dump unchanged (the dump is what
// --print-config shows, so it has to be a faithful, loadable file).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "core/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // Hermetic: every *_env variable is "set", except one name, so both paths are reachable.
  cgn::config::EnvLookup env = [](std::string_view name) -> std::optional<std::string> {
    if (name == "UNSET") {
      return std::nullopt;
    }
    return "secret-value";
  };
  auto first = cgn::config::load_config_from_string(text, "fuzz.toml", env);
  if (!first.ok()) {
    if (first.error().message.empty()) {
      std::fprintf(stderr, "error without a message\n");
      std::abort();
    }
    return 0;
  }
  std::string dump = cgn::config::dump_config(first.value());
  auto second = cgn::config::load_config_from_string(dump, "dump.toml", env);
  if (!second.ok()) {
    std::fprintf(stderr, "dump does not load: %s\n---\n%s\n", second.error().message.c_str(), dump.c_str());
    std::abort();
  }
  if (cgn::config::dump_config(second.value()) != dump) {
    std::fprintf(stderr, "dump is not stable:\n%s\n", dump.c_str());
    std::abort();
  }
  return 0;
}
