// Config tests' helpers: an environment with the variables given and nothing else, so a load does
// not depend on the process environment (core/config_reader.h's EnvLookup), and a TOML text
// loaded as cognitora.toml with it.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/config.h"
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

// `text` loaded as cognitora.toml, with only the variables of `env`.
inline Result<config::CognitoraConfig, config::ConfigError> load_toml(
    std::string_view text, const config::EnvLookup& env = map_env({})) {
  return config::load_config_from_string(text, "cognitora.toml", env);
}

// The message of the error loading `text` gives; a test failure when it loads.
inline std::string load_error(std::string_view text, const config::EnvLookup& env = map_env({})) {
  auto r = load_toml(text, env);
  EXPECT_FALSE(r.ok()) << "expected an error for:\n" << text;
  return r.ok() ? std::string() : r.error().message;
}

}  // namespace cgn::testing
