// kind = "static": a configured draw (`watts`) for one device (`device`, default "node"), for
// hardware with no sensor. No counter: its energy is watts × time.
#pragma once

#include <memory>

#include "core/config.h"
#include "power/source.h"

namespace cgn::power {

Result<std::unique_ptr<Source>, SourceError> make_static_source(const config::PowerSourceConfig& cfg);

}  // namespace cgn::power
