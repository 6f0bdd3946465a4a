// Logging: spdlog, one named logger per module ("router", "agent.driver",
// "sim", ...). Lines carry key=value fields after a short sentence, e.g.
//   CGN_LOG_INFO(log, "node left routing", kv("node", id), kv("reason", why));
// prints
//   2026-11-30T10:00:00.000 info router: node left routing node=gpu-3 reason="health check failed"
// The macros format nothing when the level is off. Secrets and prompts are never logged: wrap
// anything secret in redact() (or keep it a config::Secret, which prints redacted by itself).
#pragma once

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "core/result.h"

namespace cgn::log {

using Logger = std::shared_ptr<spdlog::logger>;

// The logger for a module, created on first use with the process-wide level and sink.
// Thread-safe.
Logger get(const std::string& module);

// Sets the level for every logger, existing and future: trace, debug, info, warn, error, off.
// Returns false (and changes nothing) for an unknown level name.
bool set_level(std::string_view level);
// Whether `level` names a level set_level accepts.
bool is_level(std::string_view level);

// The process-wide level name now in force ("info", ...).
std::string current_level();

// Sends every logger to a file (throws spdlog::spdlog_ex if it cannot be opened; configure()
// returns the error instead), or back to stderr, the default.
void set_file_sink(const std::string& path);
void set_stderr_sink();

enum class LogError { bad_level, bad_file };

// Applies the [log] section, or the command line: `flag_level`, when non-empty, wins over
// `config_level` (a --log-level flag overrides cognitora.toml). An empty `file` means stderr.
// Errors name the bad level or the file that could not be opened; nothing changes on error.
Status<LogError> configure(std::string_view config_level, std::string_view flag_level,
                           const std::string& file);

// One key=value field. The value is quoted (with \" \\ \n \r \t escaped) when it is empty or
// holds a space, quote, '=', or a control byte, so a line always splits back into its fields.
struct Field {
  std::string_view key;
  std::string value;
};

std::string quote_value(std::string_view v);

template <class T>
Field kv(std::string_view key, const T& value) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    return Field{key, quote_value(std::string_view(value))};
  } else {
    return Field{key, quote_value(fmt::format("{}", value))};
  }
}

// "message k=v k2=v2".
template <class... Fields>
std::string line(std::string_view message, const Fields&... fields) {
  std::string out(message);
  ((out += ' ', out += fields.key, out += '=', out += fields.value), ...);
  return out;
}

// A secret as it may appear in a log line: never any of its bytes.
std::string redact(std::string_view secret);
// A URL with any user:password@ credentials replaced ("http://user:<redacted>@host/...").
std::string redact_url(std::string_view url);

// Logs a keyed state only when it changes: "node gpu-3 is down" once, not every poll.
//   StateChangeLogger changes(log::get("router"));
//   changes.update("gpu-3", "down", spdlog::level::warn, "node unreachable", kv("node", "gpu-3"));
// The first state seen for a key is logged too. Thread-safe. Keys are kept until forget(); a caller
// whose keys come and go (nodes) forgets them when they leave, which also makes a returning key's
// first state log again.
class StateChangeLogger {
 public:
  explicit StateChangeLogger(Logger logger) : logger_(std::move(logger)) {}

  // Returns true (and logs, if the level allows) when `state` differs from the key's last state.
  template <class... Fields>
  bool update(std::string_view key, std::string_view state, spdlog::level::level_enum level,
              std::string_view message, const Fields&... fields) {
    if (!changed(key, state)) {
      return false;
    }
    if (logger_ && logger_->should_log(level)) {
      logger_->log(level, "{}", line(message, fields..., kv("state", state)));
    }
    return true;
  }

  // Only records; true when the state changed.
  bool changed(std::string_view key, std::string_view state);
  void forget(std::string_view key);
  size_t size() const;

 private:
  Logger logger_;
  mutable std::mutex mu_;
  std::map<std::string, std::string, std::less<>> states_;
};

}  // namespace cgn::log

// Log macros: the arguments are not evaluated unless the level is enabled.
#define CGN_LOG_AT(logger, lvl, ...)                           \
  do {                                                         \
    if ((logger) && (logger)->should_log(lvl)) {               \
      (logger)->log(lvl, "{}", ::cgn::log::line(__VA_ARGS__)); \
    }                                                          \
  } while (0)
#define CGN_LOG_TRACE(logger, ...) CGN_LOG_AT(logger, ::spdlog::level::trace, __VA_ARGS__)
#define CGN_LOG_DEBUG(logger, ...) CGN_LOG_AT(logger, ::spdlog::level::debug, __VA_ARGS__)
#define CGN_LOG_INFO(logger, ...) CGN_LOG_AT(logger, ::spdlog::level::info, __VA_ARGS__)
#define CGN_LOG_WARN(logger, ...) CGN_LOG_AT(logger, ::spdlog::level::warn, __VA_ARGS__)
#define CGN_LOG_ERROR(logger, ...) CGN_LOG_AT(logger, ::spdlog::level::err, __VA_ARGS__)
