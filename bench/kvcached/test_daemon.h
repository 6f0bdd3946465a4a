// The kvcached benchmarks' tests: a real cgn-kvcached on loopback, and running a tool to its end.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "testing/process.h"

namespace cgn::kvbench::testing {

// A cgn-kvcached with a RAM tier of `ram_bytes` and, when ssd_dir is non-empty, an unbounded SSD
// tier there; gRPC and metrics on free loopback ports, the fast path on a socket in `dir`.
struct Daemon {
  std::unique_ptr<cgn::testing::Process> proc;
  std::string grpc;    // 127.0.0.1:<port>
  std::string socket;  // the fast path's Unix socket
};

inline std::optional<Daemon> start_daemon(const cgn::testing::TempDir& dir, const std::string& name,
                                          uint64_t ram_bytes, const std::string& ssd_dir = "") {
  Daemon d;
  d.socket = dir.file(name + ".sock");
  std::ostringstream cfg;
  cfg << "[kvcached]\nlisten = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\nsocket = \"" << d.socket
      << "\"\nram_bytes = " << ram_bytes
      << "\nmax_block_bytes = " << std::min<uint64_t>(ram_bytes, 64ull << 20) << "\n";
  if (!ssd_dir.empty()) {
    cfg << "ssd_dir = \"" << ssd_dir << "\"\n";
  }
  cgn::testing::write_file(dir.file(name + ".toml"), cfg.str());
  d.proc = std::make_unique<cgn::testing::Process>(
      std::vector<std::string>{cgn::testing::bin_path("cgn-kvcached"), "--config", dir.file(name + ".toml"),
                               "--port-file", dir.file(name + ".port")},
      std::map<std::string, std::string>{}, dir.file(name + ".log"));
  // Until it serves, or exits (a configuration it refuses).
  const std::string port_file = dir.file(name + ".port");
  cgn::testing::wait_until([&] { return std::filesystem::exists(port_file) || !d.proc->running(); },
                           std::chrono::seconds(30));
  const int port =
      d.proc->running() ? cgn::testing::wait_for_port_file(port_file, std::chrono::seconds(5)) : -1;
  if (port <= 0) {
    ADD_FAILURE() << "cgn-kvcached " << name << " is not serving:\n" << d.proc->log();
    return std::nullopt;
  }
  d.grpc = "127.0.0.1:" + std::to_string(port);
  return d;
}

// Runs argv to its end (bounded); its exit status and every line of its stdout and stderr
// (which go to one log file).
struct Run {
  int status = -1;
  std::string output;
  // The JSON objects it printed, one per line that starts with '{'.
  std::vector<nlohmann::json> objects() const {
    std::vector<nlohmann::json> out;
    std::istringstream in(output);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.front() == '{') {
        out.push_back(nlohmann::json::parse(line));
      }
    }
    return out;
  }
};

inline Run run_to_end(const cgn::testing::TempDir& dir, const std::string& name,
                      std::vector<std::string> argv, std::chrono::seconds limit) {
  cgn::testing::Process p(std::move(argv), {}, dir.file(name + ".out"));
  Run r;
  r.status = p.wait(limit);
  r.output = p.log();
  return r;
}

}  // namespace cgn::kvbench::testing
