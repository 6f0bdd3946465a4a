#include "core/host_port.h"

#include <charconv>
#include <system_error>

namespace cgn {

std::optional<std::pair<std::string, uint16_t>> split_host_port(std::string_view s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view host = s.substr(0, colon);
  const std::string_view port = s.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  unsigned v = 0;
  const auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
  if (host.empty() || port.empty() || ec != std::errc{} || p != port.data() + port.size() || v > 65535) {
    return std::nullopt;
  }
  return std::pair{std::string(host), static_cast<uint16_t>(v)};
}

}  // namespace cgn
