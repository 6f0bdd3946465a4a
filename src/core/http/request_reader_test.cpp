#include "core/http/request_reader.h"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <string>

namespace cgn::http {
namespace {

void put(boost::beast::flat_buffer& buf, std::string_view s) {
  auto dst = buf.prepare(s.size());
  boost::asio::buffer_copy(dst, boost::asio::buffer(s.data(), s.size()));
  buf.commit(s.size());
}

TEST(RequestReader, parses_request_with_body_and_keeps_pipelined_bytes) {
  RequestReader r({1024, 1024});
  boost::beast::flat_buffer buf;
  put(buf,
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nX-CGN-Role: "
      "decode\r\n\r\nhello");
  put(buf, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(r.parse(buf), RequestReader::State::done);
  EXPECT_TRUE(r.keep_alive());
  Request req = r.take();
  EXPECT_EQ(req.method(), Verb::post);
  EXPECT_EQ(req.target(), "/v1/chat/completions");
  EXPECT_EQ(req.body(), "hello");
  EXPECT_EQ(req["x-cgn-role"], "decode");  // case-insensitive access
  ASSERT_EQ(r.parse(buf), RequestReader::State::done);
  EXPECT_EQ(r.take().target(), "/next");
  EXPECT_EQ(buf.size(), 0u);
}

TEST(RequestReader, needs_more_until_headers_and_body_arrive) {
  RequestReader r({1024, 1024});
  boost::beast::flat_buffer buf;
  put(buf, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n");
  EXPECT_EQ(r.parse(buf), RequestReader::State::need_more);
  EXPECT_FALSE(r.header_done());
  put(buf, "\r\n");
  EXPECT_EQ(r.parse(buf), RequestReader::State::need_more);
  EXPECT_TRUE(r.header_done());
  EXPECT_TRUE(r.wants_continue());
  put(buf, "abc");
  ASSERT_EQ(r.parse(buf), RequestReader::State::done);
  EXPECT_EQ(r.take().body(), "abc");
}

TEST(RequestReader, chunked_body_is_decoded) {
  RequestReader r({1024, 1024});
  boost::beast::flat_buffer buf;
  put(buf,
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  ASSERT_EQ(r.parse(buf), RequestReader::State::done);
  EXPECT_EQ(r.take().body(), "abcde");
}

TEST(RequestReader, content_length_over_limit_is_413_before_the_body) {
  RequestReader r({1024, 100});
  boost::beast::flat_buffer buf;
  put(buf, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n");
  ASSERT_EQ(r.parse(buf), RequestReader::State::error);
  EXPECT_EQ(r.error().status, 413);
}

TEST(RequestReader, chunked_body_over_limit_is_413) {
  RequestReader r({1024, 4});
  boost::beast::flat_buffer buf;
  put(buf,
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n");
  ASSERT_EQ(r.parse(buf), RequestReader::State::error);
  EXPECT_EQ(r.error().status, 413);
}

TEST(RequestReader, oversized_headers_are_431) {
  RequestReader r({256, 1024});
  boost::beast::flat_buffer buf;
  put(buf, "GET / HTTP/1.1\r\nX-Big: " + std::string(400, 'a') + "\r\n");
  ASSERT_EQ(r.parse(buf), RequestReader::State::error);
  EXPECT_EQ(r.error().status, 431);
}

TEST(RequestReader, garbage_is_400) {
  for (std::string bad :
       {"NOT HTTP AT ALL\r\n\r\n", "GET / HTTP/9.9\r\n\r\n", "GET / HTTP/1.1\r\nBad Header\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n"}) {
    RequestReader r({1024, 1024});
    boost::beast::flat_buffer buf;
    put(buf, bad);
    ASSERT_EQ(r.parse(buf), RequestReader::State::error) << bad;
    EXPECT_EQ(r.error().status, 400) << bad;
    EXPECT_NE(r.error().body().find("\"invalid_request_error\""), std::string::npos);
  }
}

RequestReader::State parse_all(RequestReader& r, std::string_view wire) {
  boost::beast::flat_buffer buf;
  put(buf, wire);
  return r.parse(buf);
}

TEST(RequestReader, unknown_transfer_coding_is_501_not_an_empty_body) {
  // Read as an empty body, the bytes after the header would run as a second request.
  for (std::string te : {"gzip", "gzip, chunked", "chunked, gzip", "identity", "x-custom"}) {
    RequestReader r({1024, 1024});
    boost::beast::flat_buffer buf;
    put(buf, "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + te +
                 "\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_EQ(r.parse(buf), RequestReader::State::error) << te;
    EXPECT_EQ(r.error().status, 501) << te;
    EXPECT_NE(r.error().body().find("Transfer-Encoding"), std::string::npos) << te;
  }
}

TEST(RequestReader, transfer_coding_split_over_two_fields_is_checked_whole) {
  RequestReader r({1024, 1024});
  EXPECT_EQ(parse_all(r,
                      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: "
                      "chunked\r\n\r\n0\r\n\r\n"),
            RequestReader::State::error);
  EXPECT_EQ(r.error().status, 501);
  RequestReader twice({1024, 1024});
  EXPECT_EQ(
      parse_all(twice, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"),
      RequestReader::State::error);
  EXPECT_EQ(twice.error().status, 400);
}

TEST(RequestReader, chunked_in_any_case_is_accepted) {
  RequestReader r({1024, 1024});
  boost::beast::flat_buffer buf;
  put(buf, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:  Chunked \r\n\r\n2\r\nok\r\n0\r\n\r\n");
  ASSERT_EQ(r.parse(buf), RequestReader::State::done);
  EXPECT_EQ(r.take().body(), "ok");
}

TEST(RequestReader, http11_request_without_exactly_one_host_is_400) {
  RequestReader none({1024, 1024});
  ASSERT_EQ(parse_all(none, "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"), RequestReader::State::error);
  EXPECT_EQ(none.error().status, 400);
  EXPECT_NE(none.error().message.find("Host"), std::string::npos);
  RequestReader two({1024, 1024});
  ASSERT_EQ(parse_all(two, "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), RequestReader::State::error);
  EXPECT_EQ(two.error().status, 400);
  EXPECT_NE(two.error().message.find("Host"), std::string::npos);
  // HTTP/1.0 predates Host: accepted without one.
  RequestReader old({1024, 1024});
  EXPECT_EQ(parse_all(old, "GET / HTTP/1.0\r\n\r\n"), RequestReader::State::done);
}

}  // namespace
}  // namespace cgn::http
