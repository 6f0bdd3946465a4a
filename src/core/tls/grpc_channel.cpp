#include "core/tls/grpc_channel.h"

#include <fmt/format.h>
#include <grpcpp/support/channel_arguments.h>

namespace cgn::tls {

void retry_once(grpc::ChannelArguments& args, std::string_view service) {
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
  // The policy below is the channel's; a resolver never replaces it.
  args.SetInt(GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION, 1);
  args.SetServiceConfigJSON(fmt::format(
      R"({{"methodConfig": [{{"name": [{{"service": "{}"}}], "retryPolicy": {{"maxAttempts": 2,
 "initialBackoff": "0.01s", "maxBackoff": "0.01s", "backoffMultiplier": 1,
 "retryableStatusCodes": ["UNAVAILABLE"]}}}}]}})",
      service));
}

}  // namespace cgn::tls
