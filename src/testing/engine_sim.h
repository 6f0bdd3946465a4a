// The project's engine simulator (cgn-engine-sim) as a child process on loopback, the one way tests
// start it: port 0, the bound port read back from its port file, the base URL made from it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "testing/process.h"

namespace cgn::testing {

struct EngineSimOptions {
  // Flag mode (engine_line empty): `cgn-engine-sim --flavor F --model M [--host H] ARGS
  // --port 0 --port-file P [--enable-admin]`. An empty flavour or model is left out.
  std::string flavour = "vllm";
  std::string model = "m";
  std::string host;  // --host; empty: the simulator's default, 127.0.0.1
  // Engine-line mode (non-empty): `PROGRAM ENGINE_LINE... ARGS --port 0 --sim-port-file P
  // [--sim-enable-admin]`, e.g. {"--", "vllm", "serve", "m"} after cgn-engine-sim, or the line of a
  // wrapper script or symlink named like the engine (`program`). flavour, model and host are unused.
  std::vector<std::string> engine_line;
  std::vector<std::string> args;  // more flags: --time-scale, --mode, --kv-transfer-config, ...
  std::map<std::string, std::string> env;
  // Contents of a --fault-rules file (sim/fault_rules.h), written into dir() before the start;
  // empty: none.
  std::string fault_rules;
  bool admin = false;    // the admin endpoints (--enable-admin / --sim-enable-admin)
  std::string program;   // empty: bin_path("cgn-engine-sim")
  std::string log_path;  // empty: a temporary file (Process)
  // Generous: the simulator binds within milliseconds on an idle machine.
  std::chrono::milliseconds start_timeout = std::chrono::seconds(60);
};

// Starts the simulator in the constructor and waits for its port file; killed (process group) on
// destruction. If it never reported a port (bad flags, crash), port() is 0 and log() says why:
// callers assert `port() > 0` with the log as the message. Owned by the test thread.
class EngineSim {
 public:
  explicit EngineSim(EngineSimOptions options = {});
  EngineSim(const EngineSim&) = delete;
  EngineSim& operator=(const EngineSim&) = delete;

  uint16_t port() const { return port_; }
  const std::string& host() const { return host_; }
  // http://HOST:PORT, no trailing slash.
  std::string url() const;
  Process& process() { return *proc_; }
  std::string log() const { return proc_->log(); }
  // A scratch directory that lives as long as the simulator (fault-rules files and the like).
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
  std::string host_;
  std::unique_ptr<Process> proc_;
  uint16_t port_ = 0;
};

}  // namespace cgn::testing
