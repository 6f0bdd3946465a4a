#include "agent/loopback_get.h"

#include <gtest/gtest.h>

#include "testing/refusing_port.h"

namespace cgn::agent {
namespace {

TEST(HttpResponse, parses_content_length_chunked_and_close_delimited_bodies) {
  auto cl =
      parse_http_response("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\n\r\nhello extra", 100);
  ASSERT_TRUE(cl.ok()) << cl.error().message;
  EXPECT_EQ(cl->status, 503u);
  EXPECT_EQ(cl->body, "hello");
  auto chunked = parse_http_response(
      "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n", 100);
  ASSERT_TRUE(chunked.ok()) << chunked.error().message;
  EXPECT_EQ(chunked->body, "hello world");
  auto closed = parse_http_response("HTTP/1.0 200 OK\r\nServer: x\r\n\r\nuntil close", 100);
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(closed->body, "until close");
}

TEST(HttpResponse, rejects_malformed_and_oversized_responses) {
  const std::pair<std::string, GetError> cases[] = {
      {"", GetError::kBadResponse},
      {"HTTP/1.1 200 OK\r\n", GetError::kBadResponse},
      {"SPDY/3 200 OK\r\n\r\n", GetError::kBadResponse},
      {"HTTP/1.1 2x0 OK\r\n\r\n", GetError::kBadResponse},
      {"HTTP/1.1 999 OK\r\n\r\n", GetError::kBadResponse},
      {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", GetError::kBadResponse},
      {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", GetError::kBadResponse},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", GetError::kTooLarge},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", GetError::kBadResponse},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhi", GetError::kBadResponse},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffff\r\n", GetError::kTooLarge},
      {"HTTP/1.1 200 OK\r\n\r\n" + std::string(200, 'x'), GetError::kTooLarge},
  };
  for (const auto& [raw, code] : cases) {
    SCOPED_TRACE(raw.substr(0, 80));
    auto r = parse_http_response(raw, 100);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, code);
  }
}

TEST(LoopbackGet, refused_port_is_a_connect_error_and_bad_host_is_rejected) {
  const cgn::testing::RefusingPort refusing;
  auto r = loopback_get("127.0.0.1", refusing.port(), "/health", std::chrono::milliseconds(500));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, GetError::kConnect);
  EXPECT_EQ(loopback_get("localhost", 80, "/", std::chrono::milliseconds(100)).error().code,
            GetError::kConnect);
}

}  // namespace
}  // namespace cgn::agent
