// Async calls of the cgn-agent's gRPC Health (proto/cognitora/v1/agent.proto) from an Asio
// io_context: the static backend polls agents listed with `agent = "host:port"` through it. Each
// call uses grpc++'s callback API; its completion is posted back to the io_context, so the
// awaiting coroutine resumes on the store's thread and a slow agent never blocks another node.
//
// Threads: health() is for coroutines on the io_context given at construction. grpc++ runs the
// callbacks on its own threads; they only post. shutdown() (from the owner, after the io_context
// stopped running and before it is destroyed) cancels calls in flight, waits for their callbacks
// and posts nothing afterwards.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "cluster/agent_health.h"
#include "core/result.h"

namespace cgn::state {

class AgentHealthClients {
 public:
  // `security`: the cluster token presented and the [tls] credentials of every channel.
  explicit AgentHealthClients(boost::asio::io_context& ctx, cluster::GrpcSecurity security = {});
  ~AgentHealthClients();
  AgentHealthClients(const AgentHealthClients&) = delete;
  AgentHealthClients& operator=(const AgentHealthClients&) = delete;

  // One channel per agent, keyed by the caller's node index. target: "host:port".
  void add(size_t key, const std::string& target);
  // One Health call with a deadline. Errors as text (unreachable, deadline, malformed answer).
  // Returns an error at once when the coroutine is cancelled.
  boost::asio::awaitable<Result<cluster::AgentHealth, std::string>> health(size_t key,
                                                                           std::chrono::milliseconds timeout);
  void shutdown();

  struct Call;
  struct Link;

 private:
  boost::asio::io_context& ctx_;
  cluster::GrpcSecurity security_;
  std::map<size_t, std::unique_ptr<Link>> links_;
  // Calls in flight (for TryCancel at shutdown); guarded by mu_.
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::shared_ptr<Call>> inflight_;
  bool open_ = true;
};

}  // namespace cgn::state
