// Small text helpers shared by the parsers of outside bytes. Header-only, no allocation.
#pragma once

#include <string_view>

namespace cgn::text {

// `s` without leading and trailing characters from `chars` (by default the HTTP header's
// optional whitespace: space and tab).
constexpr std::string_view trim(std::string_view s, std::string_view chars = " \t") {
  const size_t first = s.find_first_not_of(chars);
  if (first == std::string_view::npos) {
    return {};
  }
  return s.substr(first, s.find_last_not_of(chars) - first + 1);
}

}  // namespace cgn::text
