#include "power/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "power/daemon_source.h"
#include "power/dcgm_exporter_source.h"
#include "power/ipmi_source.h"
#include "power/nvml_source.h"
#include "power/rapl_source.h"
#include "power/redfish_source.h"
#include "power/rocm_smi_source.h"
#include "power/static_source.h"

namespace cgn::power {

void SourceRegistry::add(std::string kind, SourceFactory factory) {
  factories_[std::move(kind)] = std::move(factory);
}

Result<std::unique_ptr<Source>, SourceError> SourceRegistry::create(
    const config::PowerSourceConfig& cfg) const {
  auto it = factories_.find(cfg.kind);
  if (it == factories_.end()) {
    return make_error(SourceError::kConfig, fmt::format("unknown power source kind \"{}\" (known: {})",
                                                        cfg.kind, fmt::join(kinds(), ", ")));
  }
  return it->second(cfg);
}

std::vector<std::string> SourceRegistry::kinds() const {
  std::vector<std::string> out;
  for (const auto& [k, _] : factories_) {
    out.push_back(k);
  }
  return out;
}

SourceRegistry builtin_sources(const config::TlsConfig& tls) {
  SourceRegistry reg;
  reg.add("static", make_static_source);
  reg.add("dcgm_exporter", make_dcgm_exporter_source);
  reg.add("rapl", [](const config::PowerSourceConfig& cfg) { return make_rapl_source(cfg); });
  reg.add("ipmi", make_ipmi_source);
  reg.add("nvml", make_nvml_source);
  reg.add("redfish", make_redfish_source);
  reg.add("rocm_smi", make_rocm_smi_source);
  reg.add("cgn_power", [tls](const config::PowerSourceConfig& cfg) { return make_daemon_source(cfg, tls); });
  return reg;
}

}  // namespace cgn::power
