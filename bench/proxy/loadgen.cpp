#include "bench/proxy/loadgen.h"

#include <strings.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

namespace cgn::bench {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr std::string_view kStampKey = "\"cgn_bench_ns\":";

uint64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

std::chrono::steady_clock::time_point at_ns(uint64_t ns) {
  // libstdc++'s steady_clock is CLOCK_MONOTONIC, the clock now_ns() reads.
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

// Incremental HTTP/1.1 response parser: Content-Length or chunked bodies (keep-alive only).
// Captures the de-chunked body when asked (SSE), otherwise only counts it.
class ResponseParser {
 public:
  void reset(bool capture) {
    state_ = State::kHeaders;
    hdr_.clear();
    line_.clear();
    status_ = 0;
    remaining_ = 0;
    capture_ = capture;
  }
  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kFailed; }
  int status() const { return status_; }
  std::string& body() { return body_; }

  // Consumes bytes up to the end of the current response; returns how many it used.
  size_t feed(const char* p, size_t n) {
    size_t i = 0;
    while (i < n && state_ != State::kDone && state_ != State::kFailed) {
      switch (state_) {
        case State::kHeaders: {
          const size_t old = hdr_.size();
          hdr_.append(p + i, n - i);
          const size_t end = hdr_.find("\r\n\r\n", old >= 3 ? old - 3 : 0);
          if (end == std::string::npos) {
            i = n;
            if (hdr_.size() > kMaxHeaderBytes) {
              state_ = State::kFailed;
            }
            break;
          }
          i += end + 4 - old;
          hdr_.resize(end + 4);
          parse_headers();
          break;
        }
        case State::kLength:
        case State::kChunkData: {
          const size_t take = std::min<size_t>(remaining_, n - i);
          if (capture_) {
            body_.append(p + i, take);
          }
          remaining_ -= take;
          i += take;
          if (remaining_ == 0) {
            if (state_ == State::kLength) {
              state_ = State::kDone;
            } else {
              state_ = State::kChunkEnd;
              remaining_ = 2;
            }
          }
          break;
        }
        case State::kChunkEnd: {
          const size_t take = std::min<size_t>(remaining_, n - i);
          remaining_ -= take;
          i += take;
          if (remaining_ == 0) {
            state_ = State::kChunkSize;
          }
          break;
        }
        case State::kChunkSize:
        case State::kTrailer: {
          const void* nl = std::memchr(p + i, '\n', n - i);
          if (nl == nullptr) {
            line_.append(p + i, n - i);
            i = n;
            if (line_.size() > 1024) {
              state_ = State::kFailed;
            }
            break;
          }
          const size_t len = static_cast<const char*>(nl) - (p + i);
          line_.append(p + i, len);
          i += len + 1;
          if (!line_.empty() && line_.back() == '\r') {
            line_.pop_back();
          }
          if (state_ == State::kTrailer) {
            if (line_.empty()) {
              state_ = State::kDone;
            }
          } else {
            uint64_t size = 0;
            auto [q, ec] = std::from_chars(line_.data(), line_.data() + line_.size(), size, 16);
            if (ec != std::errc{} || q == line_.data()) {
              state_ = State::kFailed;
            } else if (size == 0) {
              state_ = State::kTrailer;
            } else {
              remaining_ = size;
              state_ = State::kChunkData;
            }
          }
          line_.clear();
          break;
        }
        case State::kDone:
        case State::kFailed:
          break;
      }
    }
    return i;
  }

 private:
  enum class State { kHeaders, kLength, kChunkSize, kChunkData, kChunkEnd, kTrailer, kDone, kFailed };

  void parse_headers() {
    // "HTTP/1.1 200 OK"
    if (hdr_.size() < 12 || hdr_.compare(0, 5, "HTTP/") != 0) {
      state_ = State::kFailed;
      return;
    }
    auto [q, ec] = std::from_chars(hdr_.data() + 9, hdr_.data() + 12, status_);
    if (ec != std::errc{} || q != hdr_.data() + 12) {
      state_ = State::kFailed;
      return;
    }
    const char* h = hdr_.c_str();
    if (const char* te = ::strcasestr(h, "\r\ntransfer-encoding:"); te != nullptr) {
      const char* eol = std::strstr(te + 2, "\r\n");
      if (eol != nullptr && ::strcasestr(std::string(te, eol).c_str(), "chunked") != nullptr) {
        state_ = State::kChunkSize;
        return;
      }
    }
    if (const char* cl = ::strcasestr(h, "\r\ncontent-length:"); cl != nullptr) {
      const char* v = cl + 17;
      while (*v == ' ' || *v == '\t') {
        ++v;
      }
      uint64_t len = 0;
      auto [e, ec2] = std::from_chars(v, h + hdr_.size(), len);
      if (ec2 != std::errc{} || e == v) {
        state_ = State::kFailed;
        return;
      }
      remaining_ = len;
      state_ = len == 0 ? State::kDone : State::kLength;
      return;
    }
    if (status_ == 204 || status_ == 304) {
      state_ = State::kDone;
      return;
    }
    state_ = State::kFailed;  // a body delimited by close: not a keep-alive answer
  }

  State state_ = State::kHeaders;
  std::string hdr_;
  std::string line_;
  std::string body_;
  int status_ = 0;
  uint64_t remaining_ = 0;
  bool capture_ = false;
};

struct Conn {
  explicit Conn(asio::io_context& io) : sock(io) {}
  tcp::socket sock;
  ResponseParser parser;
  std::array<char, 16384> buf{};
  uint64_t sent_at = 0;  // closed/stream: send time; open: scheduled time
  uint64_t events = 0;
  bool alive = false;
  bool held = false;
};

class Runner {
 public:
  explicit Runner(const LoadSpec& spec) : spec_(spec), sched_(io_), guard_(io_), hold_timer_(io_) {
    std::string r =
        "POST " + spec.path + " HTTP/1.1\r\nHost: " + spec.host + ":" + std::to_string(spec.port) +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(spec.body.size()) + "\r\n";
    for (const auto& [k, v] : spec.headers) {
      r += k + ": " + v + "\r\n";
    }
    r += "\r\n";
    r += spec.body;
    request_ = std::move(r);
  }

  Result<LoadResult, LoadError> run() {
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(spec_.host, ec);
    if (ec) {
      return make_error(LoadError::kSpec, "host must be an IP address: " + spec_.host);
    }
    endpoint_ = tcp::endpoint(addr, spec_.port);
    if (spec_.mode == LoadMode::kOpen && spec_.rate <= 0) {
      return make_error(LoadError::kSpec, "open loop needs a rate > 0");
    }
    if (spec_.connections == 0) {
      return make_error(LoadError::kSpec, "connections must be > 0");
    }
    capture_ = spec_.mode == LoadMode::kStream || spec_.mode == LoadMode::kHold;
    for (size_t i = 0; i < spec_.connections; ++i) {
      conns_.push_back(std::make_unique<Conn>(io_));
    }
    guard_.expires_after(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(spec_.timeout_s)));
    guard_.async_wait([this](boost::system::error_code e) {
      if (!e) {
        timed_out_ = true;
        io_.stop();
      }
    });
    if (spec_.mode == LoadMode::kHold) {
      res_.rss_before_kb = rss_kb(spec_.rss_pid);
      while (next_connect_ < conns_.size() && next_connect_ < spec_.connect_batch) {
        connect(*conns_[next_connect_++]);
      }
    } else {
      for (auto& c : conns_) {
        connect(*c);
      }
    }
    io_.run();
    if (timed_out_) {
      return make_error(LoadError::kTimeout, "the load did not finish within " +
                                                 std::to_string(spec_.timeout_s) + " s; " + res_.first_error);
    }
    if (connected_ == 0) {
      return make_error(LoadError::kConnect, "no connection could be opened: " + res_.first_error);
    }
    if (spec_.max_requests > 0) {
      res_.window_s = static_cast<double>(last_done_ - start_) / 1e9;
    } else {
      res_.window_s = spec_.duration_s;
    }
    res_.rps = res_.window_s > 0 ? static_cast<double>(res_.requests) / res_.window_s : 0;
    return std::move(res_);
  }

 private:
  void note_error(const std::string& what) {
    ++res_.errors;
    if (res_.first_error.empty()) {
      res_.first_error = what;
    }
  }

  void connect(Conn& c) {
    c.sock.async_connect(endpoint_, [this, &c](boost::system::error_code ec) {
      if (ec) {
        note_error("connect: " + ec.message());
        settle_connect(c, false);
        return;
      }
      c.sock.set_option(tcp::no_delay(true), ec);
      c.alive = true;
      ++connected_;
      settle_connect(c, true);
    });
  }

  // A connection attempt finished (ok or not).
  void settle_connect(Conn& c, bool ok) {
    if (spec_.mode == LoadMode::kHold) {
      if (ok) {
        issue(c, now_ns());
      } else {
        held_or_failed();
      }
      return;
    }
    if (++connects_done_ < conns_.size()) {
      return;
    }
    // Every connection is up (or failed): the clock starts.
    start_ = now_ns();
    rec_start_ = start_ + static_cast<uint64_t>(spec_.warmup_s * 1e9);
    rec_end_ = rec_start_ + static_cast<uint64_t>(spec_.duration_s * 1e9);
    if (spec_.max_requests > 0) {
      rec_start_ = start_;
      rec_end_ = UINT64_MAX;
    }
    for (auto& cp : conns_) {
      if (cp->alive) {
        ++active_;
      }
    }
    if (active_ == 0) {
      io_.stop();
      return;
    }
    if (spec_.mode == LoadMode::kOpen) {
      for (auto& cp : conns_) {
        if (cp->alive) {
          idle_.push_back(cp.get());
        }
      }
      next_due_ = start_;
      interval_ns_ = 1e9 / spec_.rate;
      due_count_ = 0;
      tick();
      return;
    }
    for (auto& cp : conns_) {
      if (cp->alive) {
        next_closed(*cp);
      }
    }
  }

  bool may_issue() {
    if (now_ns() >= rec_end_) {
      return false;
    }
    return spec_.max_requests == 0 || issued_ < spec_.max_requests;
  }

  // Closed loop and stream: the next request on this connection, or retire it.
  void next_closed(Conn& c) {
    if (c.alive && may_issue()) {
      issue(c, now_ns());
      return;
    }
    retire(c);
  }

  void retire(Conn& c) {
    if (c.alive) {
      boost::system::error_code ec;
      c.sock.close(ec);
      c.alive = false;
    }
    if (active_ > 0 && --active_ == 0) {
      finish();
    }
  }

  void finish() {
    sched_.cancel();
    guard_.cancel();
    hold_timer_.cancel();
    for (auto& c : conns_) {
      boost::system::error_code ec;
      c->sock.close(ec);
    }
  }

  void issue(Conn& c, uint64_t t0) {
    ++issued_;
    c.sent_at = t0;
    c.events = 0;
    c.parser.reset(capture_);
    c.parser.body().clear();
    asio::async_write(c.sock, asio::buffer(request_), [this, &c](boost::system::error_code ec, size_t) {
      if (ec) {
        dead(c, "write: " + ec.message());
        return;
      }
      read(c);
    });
  }

  void read(Conn& c) {
    c.sock.async_read_some(asio::buffer(c.buf), [this, &c](boost::system::error_code ec, size_t n) {
      if (ec) {
        dead(c, ec == asio::error::eof ? std::string("closed by peer") : "read: " + ec.message());
        return;
      }
      const size_t used = c.parser.feed(c.buf.data(), n);
      if (c.parser.failed()) {
        dead(c, "malformed response");
        return;
      }
      if (capture_) {
        on_body(c);
      }
      if (!c.parser.done()) {
        read(c);
        return;
      }
      if (used != n) {
        dead(c, "bytes after the response (unexpected pipelining)");
        return;
      }
      on_response(c);
    });
  }

  // A connection failed: count it and take it out of the load.
  void dead(Conn& c, const std::string& what) {
    if (finishing_) {
      return;
    }
    note_error(what);
    if (spec_.mode == LoadMode::kHold) {
      boost::system::error_code ec;
      c.sock.close(ec);
      if (c.alive && !c.held) {
        c.alive = false;
        held_or_failed();
      }
      c.alive = false;
      return;
    }
    retire(c);
  }

  // SSE events in the captured body; each carries its send time.
  void on_body(Conn& c) {
    std::string& b = c.parser.body();
    const uint64_t now = now_ns();
    size_t pos = 0;
    for (;;) {
      const size_t end = b.find("\n\n", pos);
      if (end == std::string::npos) {
        break;
      }
      const std::string_view ev(b.data() + pos, end - pos);
      pos = end + 2;
      if (ev.find("[DONE]") != std::string_view::npos) {
        continue;
      }
      ++c.events;
      if (spec_.mode == LoadMode::kHold) {
        if (!c.held) {
          c.held = true;
          ++res_.held;
          held_or_failed();
        }
        continue;
      }
      const size_t k = ev.find(kStampKey);
      if (k == std::string_view::npos || now < rec_start_ || now >= rec_end_) {
        continue;
      }
      uint64_t t = 0;
      const char* v = ev.data() + k + kStampKey.size();
      auto [q, e] = std::from_chars(v, ev.data() + ev.size(), t);
      if (e == std::errc{} && t <= now) {
        res_.latency_ns.push_back(now - t);
        ++res_.events;
      }
    }
    b.erase(0, pos);
  }

  void on_response(Conn& c) {
    const uint64_t now = now_ns();
    last_done_ = now;
    ++res_.total_responses;
    const int st = c.parser.status();
    const bool in_window = spec_.mode == LoadMode::kOpen ? (c.sent_at >= rec_start_ && c.sent_at < rec_end_)
                                                         : (now >= rec_start_ && now < rec_end_);
    if (in_window) {
      ++res_.requests;
      if (st >= 200 && st < 300) {
        ++res_.ok;
      } else {
        ++res_.non2xx;
      }
      if (spec_.mode == LoadMode::kStream) {
        res_.stream_ns.push_back(now - c.sent_at);
        if (spec_.expect_events > 0 && c.events != spec_.expect_events) {
          note_error("stream with " + std::to_string(c.events) + " events, expected " +
                     std::to_string(spec_.expect_events));
        }
      } else {
        res_.latency_ns.push_back(now - c.sent_at);
      }
    }
    if (spec_.mode == LoadMode::kHold) {
      note_error("a stream ended while held (status " + std::to_string(st) + ")");
      if (!c.held) {
        c.held = true;  // settled, as a failure
        held_or_failed();
      }
      return;
    }
    if (spec_.mode == LoadMode::kOpen) {
      if (!pending_.empty()) {
        const uint64_t t = pending_.front();
        pending_.pop_front();
        issue(c, t);
      } else {
        idle_.push_back(&c);
        maybe_finish_open();
      }
      return;
    }
    next_closed(c);
  }

  // Open loop: every request due by now goes to an idle connection or waits in order.
  void tick() {
    const uint64_t now = now_ns();
    while (!scheduling_done_) {
      const uint64_t due = start_ + static_cast<uint64_t>(static_cast<double>(due_count_) * interval_ns_);
      if (due >= rec_end_) {
        scheduling_done_ = true;
        break;
      }
      if (due > now) {
        next_due_ = due;
        break;
      }
      pending_.push_back(due);
      ++due_count_;
    }
    while (!pending_.empty() && !idle_.empty()) {
      Conn* c = idle_.back();
      idle_.pop_back();
      const uint64_t t = pending_.front();
      pending_.pop_front();
      issue(*c, t);
    }
    if (scheduling_done_) {
      maybe_finish_open();
      return;
    }
    sched_.expires_at(at_ns(next_due_));
    sched_.async_wait([this](boost::system::error_code ec) {
      if (!ec) {
        tick();
      }
    });
  }

  void maybe_finish_open() {
    size_t alive = 0;
    for (auto& c : conns_) {
      alive += c->alive ? 1 : 0;
    }
    if (scheduling_done_ && pending_.empty() && idle_.size() == alive) {
      finish();
    }
  }

  // Hold: one more stream is established (or failed); open the next, or hold them all.
  void held_or_failed() {
    ++settled_;
    if (next_connect_ < conns_.size()) {
      connect(*conns_[next_connect_++]);
    }
    if (settled_ < conns_.size()) {
      return;
    }
    res_.rss_held_kb = rss_kb(spec_.rss_pid);
    hold_timer_.expires_after(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(spec_.hold_s)));
    hold_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) {
        finishing_ = true;
        finish();
      }
    });
  }

  const LoadSpec& spec_;
  asio::io_context io_{1};
  asio::steady_timer sched_;
  asio::steady_timer guard_;
  asio::steady_timer hold_timer_;
  tcp::endpoint endpoint_;
  std::string request_;
  std::vector<std::unique_ptr<Conn>> conns_;
  LoadResult res_;
  bool capture_ = false;
  bool timed_out_ = false;
  bool finishing_ = false;
  size_t connected_ = 0;
  size_t connects_done_ = 0;
  size_t active_ = 0;
  size_t next_connect_ = 0;
  size_t settled_ = 0;
  uint64_t issued_ = 0;
  uint64_t start_ = 0;
  uint64_t rec_start_ = 0;
  uint64_t rec_end_ = UINT64_MAX;
  uint64_t last_done_ = 0;
  // open loop
  std::vector<Conn*> idle_;
  std::deque<uint64_t> pending_;
  uint64_t next_due_ = 0;
  double interval_ns_ = 0;
  uint64_t due_count_ = 0;
  bool scheduling_done_ = false;
};

}  // namespace

std::string chat_body(size_t bytes, bool stream, const std::string& model) {
  const std::string head = R"({"model":")" + model +
                           R"(","messages":[{"role":"system","content":"You are a helpful assistant."},)"
                           R"({"role":"user","content":")";
  const std::string tail =
      std::string(R"("}],"max_tokens":16,"stream":)") + (stream ? "true" : "false") + "}";
  static constexpr std::string_view kText =
      "Summarise the following notes on cache-aware request routing for a cluster of inference "
      "engines, keeping the numbers. ";
  std::string pad;
  const size_t fixed = head.size() + tail.size();
  const size_t want = bytes > fixed ? bytes - fixed : 0;
  while (pad.size() < want) {
    pad += kText.substr(0, std::min(kText.size(), want - pad.size()));
  }
  return head + pad + tail;
}

uint64_t percentile(std::vector<uint64_t> values, double pct) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(pct / 100.0 * static_cast<double>(values.size()) + 0.999999);
  rank = std::clamp<size_t>(rank, 1, values.size());
  return values[rank - 1];
}

std::string to_json(const LoadSpec& spec, const LoadResult& r) {
  static constexpr const char* kModes[] = {"closed", "open", "stream", "hold"};
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
  nlohmann::json j;
  j["mode"] = kModes[static_cast<int>(spec.mode)];
  j["connections"] = spec.connections;
  j["requests"] = r.requests;
  j["ok"] = r.ok;
  j["non2xx"] = r.non2xx;
  j["errors"] = r.errors;
  j["total_responses"] = r.total_responses;
  j["window_s"] = r.window_s;
  j["rps"] = r.rps;
  if (spec.mode == LoadMode::kOpen) {
    j["rate"] = spec.rate;
  }
  j["p50_us"] = us(percentile(r.latency_ns, 50));
  j["p90_us"] = us(percentile(r.latency_ns, 90));
  j["p99_us"] = us(percentile(r.latency_ns, 99));
  j["p999_us"] = us(percentile(r.latency_ns, 99.9));
  if (spec.mode == LoadMode::kStream) {
    j["events"] = r.events;
    j["stream_p50_ms"] = static_cast<double>(percentile(r.stream_ns, 50)) / 1e6;
    j["stream_p99_ms"] = static_cast<double>(percentile(r.stream_ns, 99)) / 1e6;
  }
  if (spec.mode == LoadMode::kHold) {
    j["held"] = r.held;
    j["rss_before_kb"] = r.rss_before_kb;
    j["rss_held_kb"] = r.rss_held_kb;
  }
  if (!r.first_error.empty()) {
    j["first_error"] = r.first_error;
  }
  return j.dump();
}

uint64_t rss_kb(int pid) {
  if (pid <= 0) {
    return 0;
  }
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::strtoull(line.c_str() + 6, nullptr, 10);
    }
  }
  return 0;
}

Result<LoadResult, LoadError> run_load(const LoadSpec& spec) {
  Runner r(spec);
  return r.run();
}

}  // namespace cgn::bench
