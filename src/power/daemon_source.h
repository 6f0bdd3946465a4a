// kind = "cgn_power": a running cgn-power daemon as a source (its gRPC Read at `target`, with the
// config file's [tls]). Every device the daemon reports becomes one sample, device "<daemon's
// source>/<device>"; its counter is the daemon's own energy total for the device, so the reader's
// energy follows the daemon's exactly (a restarted daemon counts as a reset counter). A daemon that
// does not answer is unavailable: the reader leaves its devices out (unknown, never 0 W).
#pragma once

#include <memory>

#include "core/config.h"
#include "power/source.h"

namespace cgn::power {

Result<std::unique_ptr<Source>, SourceError> make_daemon_source(const config::PowerSourceConfig& cfg,
                                                                const config::TlsConfig& tls);

}  // namespace cgn::power
