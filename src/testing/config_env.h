// An environment for config tests: the variables given and nothing else, so a load does not
// depend on the process environment (core/config_reader.h's EnvLookup).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/config_reader.h"

namespace cgn::testing {

inline config::EnvLookup map_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) {
      return std::nullopt;
    }
    return it->second;
  };
}

}  // namespace cgn::testing
