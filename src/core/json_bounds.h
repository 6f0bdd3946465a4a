// A pre-check for JSON from outside the process: nlohmann's parser recurses per nesting level
// and has no depth limit, so depth and size are checked before it sees the bytes. Pure,
// thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace cgn {

// False when text is longer than max_bytes or nests arrays/objects deeper than max_depth
// (brackets inside strings do not count). Does not validate the JSON otherwise.
bool json_within_bounds(std::string_view text, size_t max_bytes, size_t max_depth);

}  // namespace cgn
