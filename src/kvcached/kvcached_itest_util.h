// Helpers for cgn-kvcached's integration tests: a real cgn-kvcached process on loopback with its
// own config, SSD directory and socket in a temp dir (ports learned from its port files), a
// /metrics scrape over real HTTP, and test blocks. Header only, test code.
#pragma once

#include <gtest/gtest.h>

#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/digest_types.h"
#include "core/http/client.h"
#include "kvcache/block_key.h"
#include "testing/process.h"
#include "testing/run_on.h"

namespace cgn::kvcached::itest {

using namespace std::chrono_literals;

inline kvcache::BlockNamespace test_ns() {
  kvcache::BlockNamespace ns;
  ns.model = "llama-3-8b";
  ns.dtype = "bf16";
  ns.tp_rank = 0;
  ns.tp_size = 1;
  ns.block_tokens = 16;
  return ns;
}

// A digest that names block `i` of test `seed`.
inline Digest digest_of(uint64_t seed, uint64_t i) {
  Digest d{};
  for (size_t b = 0; b < 8; ++b) {
    d[b] = static_cast<uint8_t>(seed >> (8 * b));
    d[8 + b] = static_cast<uint8_t>(i >> (8 * b));
  }
  d[31] = 0x5a;
  return d;
}

inline kvcache::BlockKey key_of(const Digest& d) {
  return kvcache::KeyDeriver::create(test_ns()).value().key(d);
}

// `n` bytes that depend on (seed, i) at every position, so a swapped or torn block shows.
inline std::vector<uint8_t> block_bytes(uint64_t seed, uint64_t i, size_t n) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xC2B2AE3D27D4EB4Full;
  for (size_t p = 0; p < n; ++p) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[p] = static_cast<uint8_t>(x);
  }
  return v;
}

// One cgn-kvcached process. `toml` is added to the [kvcached] section (after listen,
// metrics_listen and socket, which point at port 0 and the temp dir); `extra` after it (other
// sections).
class Daemon {
 public:
  Daemon(const testing::TempDir& dir, const std::string& name, const std::string& toml,
         const std::string& extra = "", std::vector<std::string> wrapper = {})
      : dir_(dir), name_(name) {
    config_ = dir.file(name + ".toml");
    socket_ = dir.file(name + ".sock");
    testing::write_file(config_,
                        "[kvcached]\nlisten = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\n"
                        "socket = \"" +
                            socket_ + "\"\n" + toml + "\n" + extra);
    wrapper_ = std::move(wrapper);
  }

  // Starts the process and waits for both port files; false (and the log in the failure) if it
  // does not come up.
  bool start() {
    const std::string port_file = dir_.file(name_ + ".port");
    const std::string metrics_file = dir_.file(name_ + ".mport");
    ::unlink(port_file.c_str());
    ::unlink(metrics_file.c_str());
    std::vector<std::string> argv = wrapper_;
    for (const std::string& a :
         {testing::bin_path("cgn-kvcached"), std::string("--config"), config_, std::string("--port-file"),
          port_file, std::string("--metrics-port-file"), metrics_file}) {
      argv.push_back(a);
    }
    argv.insert(argv.end(), flags.begin(), flags.end());
    proc_ = std::make_unique<testing::Process>(argv, std::map<std::string, std::string>{},
                                               dir_.file(name_ + "." + std::to_string(++starts_) + ".log"));
    // Both end as soon as the process exits (a failed start), not at the bound.
    const int port = testing::wait_for_port_file(port_file, *proc_, 60s);
    const int mport = testing::wait_for_port_file(metrics_file, *proc_, 10s);
    if (port <= 0 || mport <= 0) {
      ADD_FAILURE() << "cgn-kvcached did not start (" << proc_->describe() << "):\n" << proc_->log();
      return false;
    }
    port_ = static_cast<uint16_t>(port);
    metrics_port_ = static_cast<uint16_t>(mport);
    return true;
  }

  int stop() { return proc_ ? proc_->stop(10s) : -1; }
  void kill9() {
    proc_->signal(SIGKILL);
    proc_->wait(10s);
  }

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  uint16_t metrics_port() const { return metrics_port_; }
  const std::string& socket() const { return socket_; }
  std::string log() const { return proc_ ? proc_->log() : std::string(); }
  testing::Process& process() { return *proc_; }

  // More command-line flags, after the config (e.g. {"--listen", "127.0.0.1:N"}: a fixed port
  // that a restart keeps, for clients configured with it).
  std::vector<std::string> flags;

 private:
  const testing::TempDir& dir_;
  std::string name_;
  std::string config_;
  std::string socket_;
  std::vector<std::string> wrapper_;
  std::unique_ptr<testing::Process> proc_;
  int starts_ = 0;
  uint16_t port_ = 0;
  uint16_t metrics_port_ = 0;
};

// GET /metrics over real HTTP; empty on failure.
inline std::string scrape(uint16_t port) {
  boost::asio::io_context ctx;
  http::HttpClient client(ctx);
  http::Request req{boost::beast::http::verb::get, "/metrics", 11};
  req.set(boost::beast::http::field::host, "127.0.0.1");
  auto r = testing::run_on(ctx, client.send(http::Upstream{"127.0.0.1", port, false}, std::move(req)));
  if (!r || r->result_int() != 200) {
    return {};
  }
  return r->body();
}

}  // namespace cgn::kvcached::itest
