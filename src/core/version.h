#pragma once

namespace cgn {

// The project version, e.g. "0.1.0" (from CMake's project()).
const char* version();

}  // namespace cgn
