// The "router" logger, shared by the gateway's files (one spdlog logger per module, core/log.h).
#pragma once

#include "core/log.h"

namespace cgn::router {

inline log::Logger router_log() {
  static log::Logger l = log::get("router");
  return l;
}

}  // namespace cgn::router
