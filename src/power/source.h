// The seam for every power sensor: a Source reads its devices once per call. Sources are plugins,
// registered by the kind used in config (`[[power.sources]] kind`); see registry.h.
//
// Threads: a Source is owned by one Reader and read() is called from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/result.h"
#include "power/sample.h"

namespace cgn::power {

enum class SourceError : uint8_t {
  kUnsupported,  // the sensor is not there or not readable here (no library, no zone, EACCES)
  kUnavailable,  // it is there but did not answer this time (timeout, connection refused, 5xx)
  kBadData,      // it answered with something that does not parse
  kConfig,       // the source's configuration cannot work
};

std::string_view to_string(SourceError e);

using SourceResult = Result<std::vector<PowerSample>, SourceError>;

class Source {
 public:
  virtual ~Source() = default;
  // One reading of every device the source sees. Samples carry source name and kind. A device the
  // source cannot read this time is left out; a failure of the whole source is an error.
  virtual SourceResult read() = 0;
  const std::string& name() const { return name_; }
  const std::string& kind() const { return kind_; }

 protected:
  Source(std::string name, std::string kind) : name_(std::move(name)), kind_(std::move(kind)) {}
  // A sample pre-filled with this source's name and kind.
  PowerSample sample(std::string device) const {
    PowerSample s;
    s.source = name_;
    s.kind = kind_;
    s.device = std::move(device);
    return s;
  }

 private:
  std::string name_;
  std::string kind_;
};

}  // namespace cgn::power
