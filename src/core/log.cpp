#include "core/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <mutex>

#include "core/text.h"

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

bool is_level(std::string_view level) {
  return spdlog::level::from_str(std::string(level)) != spdlog::level::off || level == "off";
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

void set_stderr_sink() {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  spdlog::apply_all([&](const Logger& l) {
    l->sinks().clear();
    l->sinks().push_back(s.sink);
  });
}

std::string current_level() {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto sv = spdlog::level::to_string_view(s.level);
  return std::string(sv.data(), sv.size());
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

Status<LogError> configure(std::string_view config_level, std::string_view flag_level,
                           const std::string& file) {
  std::string_view level = flag_level.empty() ? config_level : flag_level;
  if (level.empty()) {
    level = "info";
  }
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    return make_error(LogError::bad_level,
                      fmt::format("unknown log level '{}' (expected trace, debug, info, warn, error or off)",
                                  level.substr(0, 64)));
  }
  if (!file.empty()) {
    spdlog::sink_ptr sink;
    try {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file);
    } catch (const std::exception& e) {
      return make_error(LogError::bad_file, fmt::format("cannot open log file '{}': {}", file, e.what()));
    }
    State& s = state();
    std::lock_guard lock(s.mu);
    s.sink = sink;
    spdlog::apply_all([&](const Logger& l) {
      l->sinks().clear();
      l->sinks().push_back(sink);
    });
  }
  set_level(level);
  return Ok{};
}

std::string quote_value(std::string_view v) {
  bool needs = v.empty();
  for (unsigned char c : v) {
    if (c <= 0x20 || c == '"' || c == '=' || c == 0x7f || c == '\\') {
      needs = true;
      break;
    }
  }
  if (!needs) {
    return std::string(v);
  }
  std::string out = "\"";
  for (unsigned char c : v) {
    if (const std::string_view e = text::short_escape(c); !e.empty()) {
      out += e;
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

std::string redact(std::string_view secret) {
  return secret.empty() ? "<empty>" : "<redacted>";
}

std::string redact_url(std::string_view url) {
  size_t scheme = url.find("://");
  size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
  size_t end = url.find_first_of("/?#", start);
  std::string_view authority =
      url.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  size_t at = authority.rfind('@');
  if (at == std::string_view::npos) {
    return std::string(url);
  }
  std::string_view userinfo = authority.substr(0, at);
  size_t colon = userinfo.find(':');
  std::string out(url.substr(0, start));
  if (colon == std::string_view::npos) {
    out += "<redacted>";  // a bare token as the user part is a credential too
  } else {
    out += userinfo.substr(0, colon);
    out += ":<redacted>";
  }
  out += url.substr(start + at);
  return out;
}

bool StateChangeLogger::changed(std::string_view key, std::string_view state) {
  std::lock_guard lock(mu_);
  auto it = states_.find(key);
  if (it == states_.end()) {
    states_.emplace(std::string(key), std::string(state));
    return true;
  }
  if (it->second == state) {
    return false;
  }
  it->second.assign(state);
  return true;
}

void StateChangeLogger::forget(std::string_view key) {
  std::lock_guard lock(mu_);
  if (auto it = states_.find(key); it != states_.end()) {
    states_.erase(it);
  }
}

size_t StateChangeLogger::size() const {
  std::lock_guard lock(mu_);
  return states_.size();
}

}  // namespace cgn::log
