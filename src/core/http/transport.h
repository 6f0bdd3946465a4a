// Internal: one byte stream that is either plain TCP or TLS over TCP, so the
// server connection and the client pool are written once. Satisfies Asio's
// AsyncReadStream/AsyncWriteStream, so Beast and asio::async_write work on it.
// Owned by one connection; used only on that connection's io_context thread.
#pragma once

#include <boost/asio/async_result.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
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

}  // namespace cgn::http::detail
