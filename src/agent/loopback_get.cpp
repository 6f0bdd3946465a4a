#include "agent/loopback_get.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <optional>

#include "core/text.h"

namespace cgn::agent {

std::string_view to_string(GetError e) {
  switch (e) {
    case GetError::kConnect:
      return "connect";
    case GetError::kTimeout:
      return "timeout";
    case GetError::kIo:
      return "io";
    case GetError::kBadResponse:
      return "bad_response";
    case GetError::kTooLarge:
      return "too_large";
  }
  return "unknown";
}

namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

Error<GetError> bad(std::string message) {
  return make_error(GetError::kBadResponse, std::move(message));
}

}  // namespace

Result<GetReply, GetError> parse_http_response(std::string_view raw, size_t max_body) {
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    return bad("response ends before the end of its headers");
  }
  std::string_view head = raw.substr(0, head_end);
  std::string_view rest = raw.substr(head_end + 4);
  size_t eol = head.find("\r\n");
  std::string_view status_line = head.substr(0, eol);
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1.") {
    return bad(fmt::format("bad status line '{}'", status_line.substr(0, 64)));
  }
  unsigned status = 0;
  auto [p, ec] = std::from_chars(status_line.data() + 9, status_line.data() + 12, status);
  if (ec != std::errc() || p != status_line.data() + 12 || status < 100 || status > 599) {
    return bad(fmt::format("bad status line '{}'", status_line.substr(0, 64)));
  }
  std::optional<size_t> content_length;
  bool chunked = false;
  while (eol != std::string_view::npos) {
    size_t start = eol + 2;
    eol = head.find("\r\n", start);
    std::string_view line =
        head.substr(start, eol == std::string_view::npos ? std::string_view::npos : eol - start);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      continue;
    }
    std::string_view name = text::trim(line.substr(0, colon), " \t\r");
    std::string_view value = text::trim(line.substr(colon + 1), " \t\r");
    if (text::iequals(name, "content-length")) {
      size_t n = 0;
      auto [q, e2] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (e2 != std::errc() || q != value.data() + value.size()) {
        return bad("bad Content-Length");
      }
      content_length = n;
    } else if (text::iequals(name, "transfer-encoding") && value.find("chunked") != std::string_view::npos) {
      chunked = true;
    }
  }
  GetReply reply;
  reply.status = status;
  if (chunked) {
    for (;;) {
      size_t line_end = rest.find("\r\n");
      if (line_end == std::string_view::npos) {
        return bad("truncated chunk header");
      }
      size_t n = 0;
      std::string_view size_text = rest.substr(0, line_end);
      if (auto semi = size_text.find(';'); semi != std::string_view::npos) {
        size_text = size_text.substr(0, semi);
      }
      auto [q, e2] = std::from_chars(size_text.data(), size_text.data() + size_text.size(), n, 16);
      if (e2 != std::errc() || q == size_text.data()) {
        return bad("bad chunk size");
      }
      rest.remove_prefix(line_end + 2);
      if (n == 0) {
        break;
      }
      if (n > max_body - reply.body.size() || n + 2 > rest.size()) {
        return n > max_body - reply.body.size()
                   ? Result<GetReply, GetError>(make_error(GetError::kTooLarge, "body over the cap"))
                   : Result<GetReply, GetError>(bad("truncated chunk"));
      }
      reply.body.append(rest.substr(0, n));
      rest.remove_prefix(n + 2);
    }
    return reply;
  }
  if (content_length) {
    if (*content_length > max_body) {
      return make_error(GetError::kTooLarge, "body over the cap");
    }
    if (rest.size() < *content_length) {
      return bad("body shorter than Content-Length");
    }
    reply.body = std::string(rest.substr(0, *content_length));
    return reply;
  }
  if (rest.size() > max_body) {
    return make_error(GetError::kTooLarge, "body over the cap");
  }
  reply.body = std::string(rest);  // delimited by the connection closing
  return reply;
}

Result<GetReply, GetError> loopback_get(const std::string& host, uint16_t port, std::string_view path,
                                        std::chrono::milliseconds timeout, size_t max_body) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return make_error(GetError::kConnect, fmt::format("'{}' is not an IPv4 address", host));
  }
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) {
    return make_error(GetError::kIo, fmt::format("socket: errno {}", errno));
  }
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) {
      return make_error(GetError::kConnect, fmt::format("connect {}:{}: errno {}", host, port, errno));
    }
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) <= 0) {
      return make_error(GetError::kTimeout, "connect timed out");
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      return make_error(GetError::kConnect, fmt::format("connect {}:{}: errno {}", host, port, err));
    }
  }
  const std::string request = fmt::format(
      "GET {} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\nAccept: */*\r\n\r\n", path, host, port);
  size_t sent = 0;
  while (sent < request.size()) {
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) <= 0) {
      return make_error(GetError::kTimeout, "send timed out");
    }
    ssize_t n = ::send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) {
        continue;
      }
      return make_error(GetError::kIo, fmt::format("send: errno {}", errno));
    }
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    pollfd p{fd.get(), POLLIN, 0};
    int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      return make_error(GetError::kTimeout, "response timed out");
    }
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) {
        continue;
      }
      if (errno == ECONNRESET && !raw.empty()) {
        break;
      }
      return make_error(GetError::kIo, fmt::format("recv: errno {}", errno));
    }
    if (n == 0) {
      break;
    }
    raw.append(buf, static_cast<size_t>(n));
    if (raw.size() > max_body + kMaxHeaderBytes) {
      return make_error(GetError::kTooLarge, "response over the cap");
    }
  }
  return parse_http_response(raw, max_body);
}

}  // namespace cgn::agent
