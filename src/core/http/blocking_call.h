// One blocking HTTP/1.1 exchange on a connection of its own, for command-line tools and tests
// (cgn-ctl's calls to routers and agents, the router's etcd tests): no pool, no TLS, no retries,
// the whole exchange bounded by one timeout. No shared state: any thread may call it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/http/types.h"
#include "core/result.h"

namespace cgn::http {

struct BlockingReply {
  unsigned status = 0;
  std::string body;
  std::string node;  // X-CGN-Node: the engine the router chose
};

enum class BlockingCallError : uint8_t { kTransport };

// `verb` to host:port (a name is resolved) with `target`; a POST carries `body` as
// application/json, a non-empty `bearer` goes in Authorization. The reply's body is read up to
// 64 MiB. Error: why no reply came (resolve, connect, timeout, a malformed reply).
Result<BlockingReply, BlockingCallError> blocking_call(const std::string& host, uint16_t port, Verb verb,
                                                       const std::string& target, const std::string& body,
                                                       const std::string& bearer,
                                                       std::chrono::milliseconds timeout);

}  // namespace cgn::http
