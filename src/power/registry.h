// Power sources by kind. Each source file registers a factory under the `kind` config names
// (registry.cpp assembles the built-in registry); the Reader and cgn-power build sources through it
// and never name a source type. An unknown kind is an error listing the registered ones.
//
// Thread-safety: a registry is filled once at start-up and read-only afterwards.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/result.h"
#include "power/source.h"

namespace cgn::power {

using SourceFactory =
    std::function<Result<std::unique_ptr<Source>, SourceError>(const config::PowerSourceConfig&)>;

class SourceRegistry {
 public:
  void add(std::string kind, SourceFactory factory);
  Result<std::unique_ptr<Source>, SourceError> create(const config::PowerSourceConfig& cfg) const;
  std::vector<std::string> kinds() const;

 private:
  std::map<std::string, SourceFactory> factories_;
};

// The built-in sources (every kind in config::kPowerSourceKinds); `cgn_power` reaches its daemon
// with `tls` (the config file's [tls]).
SourceRegistry builtin_sources(const config::TlsConfig& tls = {});

}  // namespace cgn::power
