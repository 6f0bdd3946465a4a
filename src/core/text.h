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

// ASCII case-insensitive comparison (HTTP header names and tokens).
constexpr char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

constexpr bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) {
      return false;
    }
  }
  return true;
}

constexpr bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

}  // namespace cgn::text
