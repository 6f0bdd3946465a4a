// detail::serialize_header (transport.h) writes exactly the bytes Beast's serializer writes for
// the same header: the server's respond() and the client's request writes depend on it.
#include <gtest/gtest.h>

#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/system/error_code.hpp>
#include <string>

#include "core/http/transport.h"
#include "core/http/types.h"

namespace cgn::http {
namespace {

// What Beast puts on the wire for `m`'s header (start line, fields, blank line).
template <bool IsRequest>
std::string beast_header(beast_http::message<IsRequest, beast_http::string_body>& m) {
  beast_http::serializer<IsRequest, beast_http::string_body> sr{m};
  sr.split(true);
  std::string out;
  boost::system::error_code ec;
  while (!sr.is_header_done()) {
    sr.next(ec, [&](boost::system::error_code&, const auto& buffers) {
      out += boost::beast::buffers_to_string(buffers);
      sr.consume(boost::asio::buffer_size(buffers));
    });
    if (ec) {
      ADD_FAILURE() << ec.message();
      break;
    }
  }
  return out;
}

TEST(SerializeHeader, ResponseMatchesBeast) {
  Response r{beast_http::status::ok, 11};
  r.set(Field::content_type, "application/json");
  r.set("X-CGN-Node", "n0");
  r.insert("Set-Cookie", "a=1");
  r.insert("Set-Cookie", "b=2");
  r.body() = R"({"ok":true})";
  r.prepare_payload();
  std::string mine;
  detail::serialize_header(r.base(), mine);
  EXPECT_EQ(mine, beast_header(r));
  EXPECT_EQ(mine.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_EQ(mine.substr(mine.size() - 4), "\r\n\r\n");
}

TEST(SerializeHeader, ResponseStatusesReasonsAndVersions) {
  for (unsigned code : {101u, 204u, 301u, 404u, 429u, 499u, 503u, 599u}) {
    for (unsigned version : {10u, 11u}) {
      Response r{static_cast<beast_http::status>(code), version};
      r.keep_alive(version == 11);
      std::string mine = "left over from the last response";
      detail::serialize_header(r.base(), mine);
      EXPECT_EQ(mine, beast_header(r)) << code << " HTTP/" << version;
    }
  }
  Response custom{beast_http::status::ok, 11};
  custom.reason("Fine Thanks");
  std::string mine;
  detail::serialize_header(custom.base(), mine);
  EXPECT_EQ(mine, beast_header(custom));
  EXPECT_EQ(mine.rfind("HTTP/1.1 200 Fine Thanks\r\n", 0), 0u);
}

TEST(SerializeHeader, RequestMatchesBeast) {
  Request q{Verb::post, "/v1/chat/completions?x=1", 11};
  q.set(Field::host, "127.0.0.1:8000");
  q.set("X-Request-Id", "cgn-0123");
  q.set(Field::content_type, "application/json");
  q.body() = std::string(1024, 'a');
  q.prepare_payload();
  std::string mine;
  detail::serialize_header(q.base(), mine);
  EXPECT_EQ(mine, beast_header(q));
  EXPECT_EQ(mine.rfind("POST /v1/chat/completions?x=1 HTTP/1.1\r\n", 0), 0u);

  Request g{Verb::get, "/health", 10};
  std::string mine_get;
  detail::serialize_header(g.base(), mine_get);
  EXPECT_EQ(mine_get, beast_header(g));
  EXPECT_EQ(mine_get, "GET /health HTTP/1.0\r\n\r\n");
}

}  // namespace
}  // namespace cgn::http
