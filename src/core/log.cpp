#include "core/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <mutex>

namespace cgn::log {
namespace {

struct State {
  std::mutex mu;
  spdlog::level::level_enum level = spdlog::level::info;
  spdlog::sink_ptr sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
};

State& state() {
  static State s;
  return s;
}

constexpr const char* kPattern = "%Y-%m-%dT%H:%M:%S.%e %^%l%$ %n: %v";

}  // namespace

Logger get(const std::string& module) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (auto existing = spdlog::get(module)) {
    return existing;
  }
  auto logger = std::make_shared<spdlog::logger>(module, s.sink);
  logger->set_level(s.level);
  logger->set_pattern(kPattern);
  spdlog::register_logger(logger);
  return logger;
}

bool set_level(std::string_view level) {
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    return false;
  }
  State& s = state();
  std::lock_guard lock(s.mu);
  s.level = lvl;
  spdlog::apply_all([lvl](const Logger& l) { l->set_level(lvl); });
  return true;
}

void set_file_sink(const std::string& path) {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path);
  spdlog::apply_all([&](const Logger& l) {
    l->sinks().clear();
    l->sinks().push_back(s.sink);
  });
}

}  // namespace cgn::log
