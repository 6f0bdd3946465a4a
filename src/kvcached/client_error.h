// The errors of cgn-kvcached's two clients (local_client.h, kv_client.h). The message of an
// Error<ClientError> is the daemon's own (or the transport's).
#pragma once

#include <cstdint>
#include <string_view>

namespace cgn::kvcached {

enum class ClientError : uint8_t {
  kConnect,      // the socket or target could not be reached, or the handshake failed
  kNotFound,     // no such block
  kTooLarge,     // the block is larger than the daemon accepts
  kNoSpace,      // the daemon's RAM tier is full of pinned, leased or half-written blocks
  kBusy,         // a put of the same key is in progress, or too many open handles
  kInvalid,      // the daemon refused the request as malformed (the message says why)
  kProtocol,     // the daemon's answer was malformed, or the connection broke
  kUnavailable,  // the daemon is stopping, or another failure on its side (the message says which)
};
std::string_view to_string(ClientError e);

}  // namespace cgn::kvcached
