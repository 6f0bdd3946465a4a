#include "core/sd_notify.h"

#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

#include "core/log.h"

namespace cgn::sd {
namespace {

void send(std::string_view daemon, const std::string& message) {
  const int r = sd_notify(0, message.c_str());
  if (r < 0) {
    CGN_LOG_WARN(log::get(std::string(daemon)), "cannot notify the service manager",
                 log::kv("message", message.substr(0, message.find('\n'))),
                 log::kv("error", std::strerror(-r)));
  }
}

}  // namespace

void notify_ready(std::string_view daemon, std::string_view status) {
  std::string message = "READY=1";
  if (!status.empty()) {
    message += "\nSTATUS=";
    message += status;
  }
  send(daemon, message);
}

void notify_reloading(std::string_view daemon) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const auto usec = static_cast<unsigned long long>(now.tv_sec) * 1000000ULL +
                    static_cast<unsigned long long>(now.tv_nsec) / 1000ULL;
  send(daemon, "RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec));
}

void notify_stopping(std::string_view daemon) {
  send(daemon, "STOPPING=1");
}

}  // namespace cgn::sd
