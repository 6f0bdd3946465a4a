// The name of a gRPC status code as the gRPC specification spells it ("RESOURCE_EXHAUSTED"), for
// metric labels and logs of every gRPC service here (cgn-kvcached's KvCache, the router's Generate).
#pragma once

#include <grpcpp/support/status_code_enum.h>

#include <string_view>

namespace cgn::tls {

// Every code of the specification; a value outside it is "UNKNOWN".
std::string_view grpc_status_name(grpc::StatusCode code);

}  // namespace cgn::tls
