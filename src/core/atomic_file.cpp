#include "core/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace cgn {

Status<int> write_file_atomic(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.flush();
    if (!out) {
      const int err = errno;
      return make_error(err, "cannot write " + tmp + ": " + std::strerror(err));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    return make_error(ec.value(), "cannot rename " + tmp + " to " + path + ": " + ec.message());
  }
  return Ok{};
}

Status<int> write_port_file(const std::string& path, uint16_t port) {
  return write_file_atomic(path, std::to_string(port) + "\n");
}

}  // namespace cgn
