#include "core/tls/grpc_status.h"

#include <array>

namespace cgn::tls {

std::string_view grpc_status_name(grpc::StatusCode code) {
  // Indexed by the code's value, 0..16 (grpc/impl/codegen/status_code_enum.h).
  static constexpr std::array<std::string_view, 17> kNames = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  const auto i = static_cast<int>(code);
  return i >= 0 && i < static_cast<int>(kNames.size()) ? kNames[static_cast<size_t>(i)] : "UNKNOWN";
}

}  // namespace cgn::tls
