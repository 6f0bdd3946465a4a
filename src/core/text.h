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

// The two-character escape JSON and logfmt share for `c` (quote, backslash, newline, carriage
// return, tab), or an empty view when `c` has none; the callers differ in how they write the
// other control characters.
constexpr std::string_view short_escape(unsigned char c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      return {};
  }
}

}  // namespace cgn::text
