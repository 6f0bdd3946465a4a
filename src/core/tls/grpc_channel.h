// Channel arguments for the long-lived synchronous gRPC clients of local daemons (the agent's and
// the simulator's link to cgn-kvcached, the agent's to cgn-power).
//
// An idle synchronous channel learns that its server went away only when it next writes: nothing
// polls the socket while no call is open (a client with its own completion-queue thread, like the
// router's health checks, does not have this problem), so after the server restarts the channel
// still reads READY and its next call fails on the dead connection ("Broken pipe", UNAVAILABLE).
// retry_once() gives every method of `service` gRPC's own retry policy: a call that failed
// UNAVAILABLE before any response header is sent once more after at most 10 ms, on a new
// connection, within the call's deadline. Only for methods that are safe to send twice.
#pragma once

#include <string_view>

namespace grpc {
class ChannelArguments;
}

namespace cgn::tls {

// `service`: the full service name, e.g. "cognitora.v1.KvCache".
void retry_once(grpc::ChannelArguments& args, std::string_view service);

}  // namespace cgn::tls
