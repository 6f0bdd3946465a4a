#include "core/http/blocking_call.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace cgn::http {

Result<BlockingReply, BlockingCallError> blocking_call(const std::string& host, uint16_t port, Verb verb,
                                                       const std::string& target, const std::string& body,
                                                       const std::string& bearer,
                                                       std::chrono::milliseconds timeout) {
  namespace beast = boost::beast;
  namespace bhttp = beast::http;
  BlockingReply out;
  try {
    boost::asio::io_context io;
    boost::asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(timeout);
    stream.connect(resolver.resolve(host, std::to_string(port)));
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    req.set(bhttp::field::host, host);
    if (!bearer.empty()) {
      req.set(bhttp::field::authorization, "Bearer " + bearer);
    }
    if (verb == Verb::post) {
      req.set(bhttp::field::content_type, "application/json");
      req.body() = body;
      req.prepare_payload();
    }
    bhttp::write(stream, req);
    beast::flat_buffer buf;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 << 20);
    bhttp::read(stream, buf, parser);
    auto res = parser.release();
    out.status = res.result_int();
    out.node = std::string(res["X-CGN-Node"]);
    out.body = std::move(res.body());
    beast::error_code ec;
    stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
  } catch (const boost::system::system_error& e) {
    return make_error(BlockingCallError::kTransport, e.code().message());
  } catch (const std::exception& e) {
    return make_error(BlockingCallError::kTransport, std::string(e.what()));
  }
  return out;
}

}  // namespace cgn::http
