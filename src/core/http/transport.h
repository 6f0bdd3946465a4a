// Internal: one byte stream that is either plain TCP or TLS over TCP, so the
// server connection and the client pool are written once. Satisfies Asio's
// AsyncReadStream/AsyncWriteStream, so Beast and asio::async_write work on it.
// Owned by one connection; used only on that connection's io_context thread.
#pragma once

#include <boost/asio/async_result.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/http/message.hpp>
#include <charconv>
#include <string>
#include <utility>
#include <variant>

namespace cgn::http::detail {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using TlsStream = asio::ssl::stream<tcp::socket>;

class Transport {
 public:
  using executor_type = tcp::socket::executor_type;

  explicit Transport(tcp::socket socket) : v_(std::in_place_type<tcp::socket>, std::move(socket)) {}
  Transport(tcp::socket socket, asio::ssl::context& tls)
      : v_(std::in_place_type<TlsStream>, std::move(socket), tls) {}

  executor_type get_executor() { return socket().get_executor(); }

  tcp::socket& socket() {
    if (auto* s = std::get_if<TlsStream>(&v_)) {
      return s->next_layer();
    }
    return std::get<tcp::socket>(v_);
  }
  TlsStream* tls() { return std::get_if<TlsStream>(&v_); }
  bool is_tls() const { return std::holds_alternative<TlsStream>(v_); }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const MutableBuffers& b) {
          std::visit([&](auto& s) { s.async_read_some(b, std::move(handler)); }, v_);
        },
        token, buffers);
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const ConstBuffers& b) {
          std::visit([&](auto& s) { s.async_write_some(b, std::move(handler)); }, v_);
        },
        token, buffers);
  }

  // Cancels pending reads and writes; the connection is unusable afterwards
  // for TLS, so callers close it next.
  void cancel() {
    boost::system::error_code ignored;
    socket().cancel(ignored);
  }
  void close() {
    boost::system::error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
  }

 private:
  std::variant<tcp::socket, TlsStream> v_;
};

// The start line and fields of a message, as Beast's serializer writes them, appended to `out`;
// so a message with a string body goes out as one gather write (header, body) without Beast's
// generic serializer machinery. Callers pass only messages whose body is sent as-is (not chunked).
inline void append_fields(const boost::beast::http::fields& f, std::string& out) {
  for (const auto& e : f) {
    const auto name = e.name_string();
    const auto value = e.value();
    out.append(name.data(), name.size());
    out.append(": ", 2);
    out.append(value.data(), value.size());
    out.append("\r\n", 2);
  }
  out.append("\r\n", 2);
}

inline void append_version(unsigned version, std::string& out) {
  out.append(version == 10 ? "HTTP/1.0" : "HTTP/1.1", 8);
}

inline void serialize_header(const boost::beast::http::response_header<>& h, std::string& out) {
  out.clear();
  append_version(h.version(), out);
  char code[8];
  code[0] = ' ';
  const auto r = std::to_chars(code + 1, code + sizeof code, h.result_int());
  out.append(code, static_cast<size_t>(r.ptr - code));
  out.push_back(' ');
  const auto reason = h.reason();
  out.append(reason.data(), reason.size());
  out.append("\r\n", 2);
  append_fields(h, out);
}

inline void serialize_header(const boost::beast::http::request_header<>& h, std::string& out) {
  out.clear();
  const auto method = h.method_string();
  out.append(method.data(), method.size());
  out.push_back(' ');
  const auto target = h.target();
  out.append(target.data(), target.size());
  out.push_back(' ');
  append_version(h.version(), out);
  out.append("\r\n", 2);
  append_fields(h, out);
}

}  // namespace cgn::http::detail
