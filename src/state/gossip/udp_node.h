// GossipNode: a GossipCore on a UDP socket (Boost.Asio). One thread of its own runs the socket,
// the gossip timer and seed re-resolution; the core sits behind a mutex so that set(), remove(),
// members() and stats() are safe from any thread.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/result.h"
#include "state/gossip/core.h"

namespace cgn::gossip {

enum class NodeError { kConfig, kStart };

struct NodeOptions {
  CoreOptions core;                     // name, generation, cluster_id, hmac_key, ...
  std::string listen = "0.0.0.0:7946";  // HOST:PORT; port 0 picks one
  std::vector<std::string> seeds;       // HOST:PORT each; names are re-resolved
  Nanos seed_refresh = 60 * kNanosPerSecond;
};

// "HOST:PORT" (IPv6 in brackets) split; error text names the input.
Result<std::pair<std::string, uint16_t>, NodeError> split_host_port(std::string_view s);

class GossipNode {
 public:
  static Result<std::unique_ptr<GossipNode>, NodeError> create(NodeOptions options);
  ~GossipNode();
  GossipNode(const GossipNode&) = delete;
  GossipNode& operator=(const GossipNode&) = delete;

  // Binds the socket and starts the thread. Returns the bound port.
  Result<uint16_t, NodeError> start();
  // Stops the thread and closes the socket. Idempotent.
  void stop();

  bool set(const std::string& key, const std::string& value);
  bool remove(const std::string& key);
  std::vector<MemberView> members() const;
  CoreStats stats() const;
  const std::string& name() const { return options_.core.name; }
  uint64_t generation() const { return options_.core.generation; }
  uint16_t port() const { return port_; }

 private:
  explicit GossipNode(NodeOptions options);
  void receive_next();
  void arm_timer();
  void resolve_seeds();
  void send(std::vector<Outgoing> out);

  NodeOptions options_;
  log::Logger log_;
  mutable std::mutex mu_;  // guards core_
  std::unique_ptr<GossipCore> core_;
  boost::asio::io_context ctx_;
  boost::asio::ip::udp::socket socket_{ctx_};
  boost::asio::steady_timer timer_{ctx_};
  boost::asio::ip::udp::endpoint from_;
  std::array<uint8_t, 65536> buf_{};
  std::vector<PeerAddr> seeds_;
  Nanos last_resolve_ = 0;
  std::thread thread_;
  uint16_t port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace cgn::gossip
