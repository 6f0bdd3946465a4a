// "HOST:PORT" addresses as written in flags and cognitora.toml (listen addresses, agents, seeds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace cgn {

// Splits at the last ':'; an IPv6 host may be in brackets ("[::1]:8080" → "::1", 8080).
// nullopt when the host is empty or the port is not a decimal number in 0..65535.
std::optional<std::pair<std::string, uint16_t>> split_host_port(std::string_view s);

}  // namespace cgn
