// Logging: spdlog, one named logger per module ("router", "agent.driver",
// "sim", ...). Lines carry key=value fields after a short sentence, e.g.
//   CGN_LOG_INFO(log, "node left routing", kv("node", id), kv("reason", why));
// Secrets and prompts are never logged.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>

namespace cgn::log {

using Logger = std::shared_ptr<spdlog::logger>;

// The logger for a module, created on first use with the process-wide level and sink.
// Thread-safe.
Logger get(const std::string& module);

// Sets the level for every logger, existing and future: trace, debug, info, warn, error, off.
// Returns false (and changes nothing) for an unknown level name.
bool set_level(std::string_view level);

// Sends every logger to stderr (default) or to a file.
void set_file_sink(const std::string& path);

}  // namespace cgn::log
