// Files other processes poll (port files, status files): written to PATH.tmp and renamed over
// PATH, so a reader sees the old content or the whole new one, never a part.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace cgn {

// The error's code is the errno (or std::error_code value); its message names the file and why.
Status<int> write_file_atomic(const std::string& path, std::string_view content);

// "PORT\n": how every daemon reports the port it bound (`--port-file`, tests read it back).
Status<int> write_port_file(const std::string& path, uint16_t port);

}  // namespace cgn
