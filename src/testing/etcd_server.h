// A real etcd (Debian etcd-server, /usr/bin/etcd) for integration tests: one
// member on free loopback client and peer ports, its data dir on tmpfs
// (/dev/shm when present), stoppable and restartable on the same ports and
// data so tests can exercise reconnects and resumption.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "testing/process.h"

namespace cgn::testing {

// Owns the etcd child process and its data directory (removed on destruction).
// Not thread-safe: drive it from the test's main thread.
class EtcdServer {
 public:
  // Picks the ports and creates the data dir; does not start etcd.
  EtcdServer();

  // Before start(): the main client port (endpoint()) serves TLS with this certificate and, with a
  // client CA, requires client certificates it signed (--client-cert-auth). The admin port stays
  // plaintext for the test itself.
  struct Tls {
    std::string cert_file;
    std::string key_file;
    std::string client_ca_file;  // empty: no client certificates asked for
  };
  void use_tls(Tls tls) { tls_ = std::move(tls); }
  // Before start(): more etcd flags (e.g. "--auth-token-ttl=1").
  void add_flags(std::vector<std::string> flags) { extra_flags_ = std::move(flags); }
  // With etcd running: creates user root with `password` and turns auth on (etcdctl over the
  // admin port). Returns "" or what failed.
  std::string enable_auth(const std::string& password);
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  // Starts etcd (same ports, same data) and waits until GET /health reports
  // healthy (it has a leader) or `timeout` passes. Returns false on timeout or
  // if the process exits; log() tells why. etcd always serves clients on the
  // admin port; on the main port (endpoint()) only when `serve_endpoint`, so a
  // test can change the store while the code under test cannot reach it.
  bool start(std::chrono::milliseconds timeout = std::chrono::seconds(20), bool serve_endpoint = true);
  // SIGTERM, then SIGKILL after `grace`. No-op when not running.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  // SIGKILL: a crash, no clean shutdown.
  void kill();
  bool running();
  // One GET /health on the client port; true when etcd answers healthy.
  bool healthy() const;

  // "127.0.0.1:<client port>" (what grpc++ dials): the endpoint for the code under test.
  std::string endpoint() const;
  // "127.0.0.1:<admin port>": a second client port for the test itself.
  std::string admin_endpoint() const;
  int client_port() const { return client_port_; }
  int peer_port() const { return peer_port_; }
  const std::string& data_dir() const { return data_dir_; }
  // Everything etcd wrote since the first start.
  std::string log() const;

 private:
  std::string base_dir_;  // removed on destruction
  std::string data_dir_;
  std::string log_path_;
  int client_port_ = 0;
  int admin_port_ = 0;
  int peer_port_ = 0;
  std::unique_ptr<Process> process_;
  Tls tls_;
  std::vector<std::string> extra_flags_;
};

}  // namespace cgn::testing
