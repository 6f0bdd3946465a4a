// cgn-canned-upstream: the upstream of the proxy benchmarks (bench/proxy/README.md). One thread,
// minimal HTTP/1.1 parsing, answers from canned bytes, so that it is not what a proxy benchmark
// measures. Answers:
//   GET /health -> 200; GET /v1/models -> the model; GET /metrics -> vLLM-style gauges (idle);
//   POST anything whose body has "stream":true -> an SSE stream of --events chat chunks, one
//     write per event, --interval-us apart (0: back to back), each carrying its CLOCK_MONOTONIC
//     send time as "cgn_bench_ns", then [DONE]; with --hold, after the first event it sends one
//     every --interval-us (or nothing) until the client goes away;
//   POST otherwise -> a fixed chat.completion JSON.
// Pipelined requests are answered in order; a read is always pending, so a client that leaves
// mid-stream is noticed at once.
#include <strings.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct Options {
  std::string model = "bench-model";
  uint64_t events = 1000;
  uint64_t interval_us = 0;
  bool hold = false;
};

uint64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

std::string http_response(std::string_view content_type, std::string_view body) {
  std::string r = "HTTP/1.1 200 OK\r\nContent-Type: ";
  r += content_type;
  r += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  r += body;
  return r;
}

struct Canned {
  std::string health;
  std::string models;
  std::string metrics;
  std::string completion;
  std::string not_found;
  std::string stream_head;
};

Canned make_canned(const Options& o) {
  Canned c;
  c.health = http_response("text/plain", "ok");
  c.models = http_response("application/json", R"({"object":"list","data":[{"id":")" + o.model +
                                                   R"(","object":"model","created":0,"owned_by":"bench"}]})");
  c.metrics = http_response(
      "text/plain; version=0.0.4",
      "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"" + o.model +
          "\"} 0\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{"
          "model_name=\"" +
          o.model +
          "\"} 0\n# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{"
          "model_name=\"" +
          o.model + "\"} 0.1\n");
  c.completion = http_response(
      "application/json",
      R"({"id":"chatcmpl-bench","object":"chat.completion","created":0,"model":")" + o.model +
          R"(","choices":[{"index":0,"message":{"role":"assistant","content":"The routing notes say that )"
          R"(requests sharing a prefix should land on the node that holds it."},"finish_reason":"stop"}],)"
          R"("usage":{"prompt_tokens":240,"completion_tokens":16,"total_tokens":256}})");
  c.not_found = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
  c.stream_head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  return c;
}

std::string chunk(std::string_view payload) {
  char hex[20];
  auto [p, ec] = std::to_chars(hex, hex + sizeof(hex), payload.size(), 16);
  std::string out(hex, p);
  out += "\r\n";
  out += payload;
  out += "\r\n";
  return out;
}

class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(tcp::socket s, const Options& o, const Canned& c)
      : sock_(std::move(s)), opt_(o), canned_(c), timer_(sock_.get_executor()) {}

  void start() { read(); }

 private:
  // One read is always pending, so a client that goes away mid-stream is seen at once.
  void read() {
    auto self = shared_from_this();
    sock_.async_read_some(asio::buffer(buf_), [this, self](boost::system::error_code ec, size_t n) {
      if (ec) {
        close();
        return;
      }
      in_.append(buf_.data(), n);
      if (!streaming_ && !writing_) {
        serve();
      }
      read();
    });
  }

  void close() {
    closed_ = true;
    boost::system::error_code ec;
    timer_.cancel();
    sock_.close(ec);
  }

  // Answers the complete requests in in_ (up to a stream, which must end first), then writes.
  void serve() {
    size_t parsed = 0;
    while (!streaming_) {
      const size_t end = in_.find("\r\n\r\n", parsed);
      if (end == std::string::npos) {
        break;
      }
      size_t body_len = 0;
      const std::string head = in_.substr(parsed, end - parsed);
      if (const char* cl = ::strcasestr(head.c_str(), "\r\ncontent-length:"); cl != nullptr) {
        body_len = std::strtoull(cl + 17, nullptr, 10);
      }
      if (in_.size() < end + 4 + body_len) {
        break;
      }
      answer(head, std::string_view(in_.data() + end + 4, body_len));
      parsed = end + 4 + body_len;
    }
    in_.erase(0, parsed);
    flush();
  }

  void answer(std::string_view head, std::string_view body) {
    if (head.starts_with("GET /health")) {
      out_ += canned_.health;
    } else if (head.starts_with("GET /v1/models")) {
      out_ += canned_.models;
    } else if (head.starts_with("GET /metrics")) {
      out_ += canned_.metrics;
    } else if (head.starts_with("POST ")) {
      if (body.find("\"stream\":true") != std::string_view::npos) {
        out_ += canned_.stream_head;
        streaming_ = true;
        sent_events_ = 0;
        stream_start_ = now_ns();
        out_ += next_event();
      } else {
        out_ += canned_.completion;
      }
    } else {
      out_ += canned_.not_found;
    }
  }

  std::string next_event() {
    ++sent_events_;
    if (!opt_.hold && sent_events_ > opt_.events) {
      streaming_ = false;
      return chunk("data: [DONE]\n\n") + "0\r\n\r\n";
    }
    std::string data =
        R"(data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":")" +
        opt_.model + R"(","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}],)" +
        R"("cgn_bench_ns":)" + std::to_string(now_ns()) + "}\n\n";
    return chunk(data);
  }

  void flush() {
    if (writing_ || closed_ || out_.empty()) {
      return;
    }
    writing_ = true;
    wbuf_.swap(out_);
    out_.clear();
    auto self = shared_from_this();
    asio::async_write(sock_, asio::buffer(wbuf_), [this, self](boost::system::error_code ec, size_t) {
      writing_ = false;
      if (ec) {
        close();
        return;
      }
      wbuf_.clear();
      if (!out_.empty()) {
        flush();
      } else if (streaming_) {
        schedule_event();
      } else {
        serve();
      }
    });
  }

  void schedule_event() {
    if (closed_) {
      return;
    }
    if (opt_.interval_us == 0) {
      if (opt_.hold) {
        return;  // hold silently until the client goes away
      }
      out_ += next_event();
      flush();
      return;
    }
    timer_.expires_at(std::chrono::steady_clock::time_point(
        std::chrono::nanoseconds(stream_start_ + sent_events_ * opt_.interval_us * 1000)));
    auto self = shared_from_this();
    timer_.async_wait([this, self](boost::system::error_code ec) {
      if (ec || closed_) {
        return;
      }
      out_ += next_event();
      flush();
    });
  }

  tcp::socket sock_;
  const Options& opt_;
  const Canned& canned_;
  asio::steady_timer timer_;
  std::array<char, 16384> buf_{};
  std::string in_;
  std::string out_;
  std::string wbuf_;
  bool writing_ = false;
  bool streaming_ = false;
  bool closed_ = false;
  uint64_t sent_events_ = 0;
  uint64_t stream_start_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cgn-canned-upstream: a canned OpenAI-shaped responder for proxy benchmarks"};
  Options opt;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string port_file;
  app.add_option("--host", host, "listen address");
  app.add_option("--port", port, "listen port (0: any)");
  app.add_option("--port-file", port_file, "write the bound port here once listening");
  app.add_option("--model", opt.model, "the model served");
  app.add_option("--events", opt.events, "events per streamed answer");
  app.add_option("--interval-us", opt.interval_us, "microseconds between streamed events (0: back to back)");
  app.add_flag("--hold", opt.hold, "streams never end (one event per interval, or only the first)");
  CLI11_PARSE(app, argc, argv);
  const Canned canned = make_canned(opt);
  asio::io_context io{1};
  boost::system::error_code ec;
  tcp::acceptor acceptor(io);
  const tcp::endpoint ep(asio::ip::make_address(host, ec), port);
  if (ec) {
    std::cerr << "cgn-canned-upstream: bad host " << host << "\n";
    return 1;
  }
  acceptor.open(ep.protocol(), ec);
  acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  acceptor.bind(ep, ec);
  if (!ec) {
    acceptor.listen(4096, ec);
  }
  if (ec) {
    std::cerr << "cgn-canned-upstream: cannot listen: " << ec.message() << "\n";
    return 1;
  }
  if (!port_file.empty()) {
    std::ofstream(port_file + ".tmp") << acceptor.local_endpoint().port() << "\n";
    std::filesystem::rename(port_file + ".tmp", port_file);
  }
  std::function<void()> accept = [&] {
    acceptor.async_accept([&](boost::system::error_code aec, tcp::socket s) {
      if (aec == asio::error::operation_aborted) {
        return;
      }
      if (!aec) {
        boost::system::error_code e;
        s.set_option(tcp::no_delay(true), e);
        std::make_shared<Conn>(std::move(s), opt, canned)->start();
      }
      accept();
    });
  };
  accept();
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code, int) { io.stop(); });
  io.run();
  return 0;
}
