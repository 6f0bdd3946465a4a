// What the agent's integration tests share: a PATH with the test's directory first (fake engines
// and GPU tools), the simulator on a loopback address, and the agent's data path as a client sees
// it (/health, one buffered chat).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "agent/loopback_get.h"
#include "testing/engine_sim.h"
#include "testing/process.h"

namespace cgn::agent::itest {

using cgn::testing::Process;
using cgn::testing::TempDir;
using cgn::testing::wait_until;

// PATH=<dir>:$PATH, for a Process that should find the test's fake tools first.
inline std::map<std::string, std::string> path_env(const cgn::testing::TempDir& dir) {
  const char* p = std::getenv("PATH");
  return {{"PATH", dir.path() + ":" + (p ? p : "/usr/bin:/bin")}};
}

// cgn-engine-sim listening on `host`, port picked by the kernel, a thousand times faster than real.
inline cgn::testing::EngineSimOptions sim_on(const std::string& host) {
  cgn::testing::EngineSimOptions o;
  o.host = host;
  o.args = {"--time-scale", "0.001"};
  return o;
}

// GET /health on the agent's data path answers 200 (the engine is ready).
inline bool agent_healthy(uint16_t port) {
  auto r = loopback_get("127.0.0.1", port, "/health", std::chrono::milliseconds(500));
  return r.ok() && r->status == 200;
}

// A TCP connection to 127.0.0.1:`port` whose reads time out after 10 s; -1 when it failed.
inline int connect_loopback(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One buffered chat through the agent's data path (blocking, Connection: close): (status, body);
// status 0 when the exchange itself failed.
inline std::pair<unsigned, std::string> chat_via(uint16_t port, const std::string& content) {
  const std::string body =
      nlohmann::json{
          {"model", "m"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", content}}}}}
          .dump();
  const std::string req =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  const int fd = connect_loopback(port);
  std::string raw;
  if (fd >= 0 && ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
      raw.append(buf, static_cast<size_t>(n));
    }
  }
  if (fd >= 0) {
    ::close(fd);
  }
  auto r = parse_http_response(raw, 1 << 20);
  if (!r) {
    return {0, "bad response: " + raw};
  }
  return {r->status, r->body};
}

}  // namespace cgn::agent::itest
