// Fuzz target: raw bytes as a client would send them on one connection, fed to
// the server's request reader in pieces, with small limits. It must end in
// need_more, done or error, never crash, hang or grow past its limits.
#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/http/request_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cgn::http;
  RequestReader r({512, 2048});
  boost::beast::flat_buffer buf;
  const size_t piece = size == 0 ? 1 : 1 + data[0] % 64;
  int requests = 0;
  for (size_t i = 0; i < size; i += piece) {
    const size_t n = std::min(piece, size - i);
    auto dst = buf.prepare(n);
    boost::asio::buffer_copy(dst, boost::asio::buffer(data + i, n));
    buf.commit(n);
    for (;;) {
      const auto st = r.parse(buf);
      if (st == RequestReader::State::error) {
        if (r.error().status < 400 || r.error().body().empty()) {
          std::abort();
        }
        return 0;
      }
      if (st != RequestReader::State::done) {
        break;
      }
      const Request req = r.take();
      if (req.body().size() > 2048) {
        std::abort();
      }
      // Accepted requests are framed as this server reads them: no transfer coding but one
      // "chunked" (else the body would be misread), and HTTP/1.1 with exactly one Host.
      for (auto it = req.find(Field::transfer_encoding);
           it != req.end() && it->name() == Field::transfer_encoding; ++it) {
        std::string rest;
        for (char c : it->value()) {
          rest.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
        }
        for (size_t at; (at = rest.find("chunked")) != std::string::npos;) {
          rest.erase(at, 7);
        }
        if (rest.find_first_not_of(" \t,") != std::string::npos) {
          std::abort();
        }
      }
      if (req.version() >= 11 && req.count(Field::host) != 1) {
        std::abort();
      }
      ++requests;
    }
    if (buf.size() > 512 + 64 + 64) {
      std::abort();  // unparsed bytes must stay bounded by the header limit
    }
  }
  return requests >= 0 ? 0 : 1;
}
