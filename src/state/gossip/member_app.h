// cgn-gossip's command line and application object: one gossip member on its own, for tests,
// demos and debugging a cluster (docs/architecture/gossip.md). main.cpp is a thin main over it
// (docs/design/lifecycle.md).
//
//   cgn-gossip --name N --listen 127.0.0.1:0 --seed HOST:PORT [--record-file R.json]
//              [--cluster ID] (--secret-env VAR [--rotation-secret-env VAR2] | --insecure)
//              [--port-file F] [--status-file S]
//
// With --record-file it publishes that node record (re-read every second) like an agent does;
// without, it joins as a plain member (like the router). --status-file is rewritten (atomically)
// every 200 ms with the member's view: members (name, generation, live, addr, keys) and counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/cli_exit.h"
#include "state/gossip/gossip_store.h"

namespace cgn::gossip {

struct MemberOptions {
  std::string name;
  std::string listen = "127.0.0.1:0";
  std::vector<std::string> seeds;
  std::string cluster = "cognitora";
  std::string secret_env;    // the variable holding the HMAC key
  std::string rotation_env;  // the variable holding a second key accepted while keys rotate
  bool insecure = false;
  std::string record_file;
  std::string port_file;
  std::string status_file;
  std::string log_level = "info";
};

// --help: status 0 and the help text; a bad flag or value: CLI11's status and message. Reads no
// environment and no file.
CliResult<MemberOptions> parse_member_options(int argc, const char* const* argv);

// The member's view as the status file holds it: name, generation, members (name, generation,
// live, self, addr, heartbeat, kvs), rejected packets by reason and the packet counters.
std::string member_status_json(const GossipNode& node);

// One member, started by start() and stopped by stop() (idempotent; the destructor calls it).
// Nothing to drain on stop: gossip has no in-flight work.
class MemberApp {
 public:
  explicit MemberApp(MemberOptions options);
  ~MemberApp();
  MemberApp(const MemberApp&) = delete;
  MemberApp& operator=(const MemberApp&) = delete;

  // Reads the key variables, binds, joins and starts publishing (with --record-file) and writing
  // the port and status files. The bound UDP port, or the exit status and message: 2 for a
  // configuration the node refuses (no key and no --insecure, a bad address), 1 when it cannot
  // start (the port is taken); then nothing is left running.
  CliResult<uint16_t> start();
  void stop();

 private:
  MemberOptions options_;
  std::unique_ptr<RecordPublisher> publisher_;  // owns the node
  std::atomic<bool> stop_status_{false};
  std::thread status_thread_;
  bool started_ = false;
};

}  // namespace cgn::gossip
