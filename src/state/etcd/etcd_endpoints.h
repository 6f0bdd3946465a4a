// Internal to state/etcd: gRPC channels and stubs per endpoint, the current
// endpoint for fail-over, the "reachable" state, and the mapping of gRPC
// statuses to EtcdErrc. Only the client's .cpp files include this.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/log.h"
#include "etcd/rpc.grpc.pb.h"
#include "state/etcd/etcd_client.h"
#include "state/etcd/etcd_types.h"

namespace cgn::etcd {

// Maps a failed gRPC status to the module's error, naming the call and endpoint.
EtcdError map_grpc_error(grpc::StatusCode code, std::string_view grpc_message, std::string_view what,
                         std::string_view endpoint);

// "http://h:p" or "https://h:p" -> "h:p"; error for an empty/ill-formed endpoint.
EtcdResult<std::string> normalize_endpoint(std::string_view endpoint);

// Whether a failed call was refused for its auth token (missing, expired, unknown after an etcd
// restart, or issued before an auth change): re-authenticating may help.
bool is_token_error(grpc::StatusCode code, std::string_view message);

// Stops the thread that holds one etcd stream (Watcher, LeaseKeeper): under `mu` sets `stopping`
// and cancels the open stream's context, if any; wakes `cv`; joins `thread` unless called on it.
void stop_stream_thread(std::mutex& mu, bool& stopping, const std::shared_ptr<grpc::ClientContext>& ctx,
                        std::condition_variable& cv, std::thread& thread);

// Ends the stream a Watcher or LeaseKeeper thread holds, on that thread: cancels it, collects its
// status, then under `mu` forgets the open context `open` (stop() cancels through it). Returns the
// status and whether stop() has asked the thread to end (`stopping`, read under `mu`).
template <class Stream>
std::pair<grpc::Status, bool> end_stream(grpc::ClientContext& ctx, Stream& stream, std::mutex& mu,
                                         std::shared_ptr<grpc::ClientContext>& open, const bool& stopping) {
  ctx.TryCancel();
  grpc::Status st = stream.Finish();
  std::lock_guard<std::mutex> lock(mu);
  open.reset();
  return {std::move(st), stopping};
}

KeyValue from_proto(const mvccpb::KeyValue& kv);
RangeResult range_from_proto(const etcdserverpb::RangeResponse& resp);
// The events of one WatchResponse, in the server's order.
std::vector<WatchEvent> events_from_proto(const etcdserverpb::WatchResponse& resp);

// Immutable after construction except for the atomics; thread-safe.
class EndpointSet {
 public:
  struct Endpoint {
    std::string target;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
    std::unique_ptr<etcdserverpb::Auth::Stub> auth;
  };

  // `credentials`: TLS for https endpoints, else insecure.
  EndpointSet(const EtcdClientOptions& options, std::vector<std::string> targets,
              std::shared_ptr<grpc::ChannelCredentials> credentials);
  ~EndpointSet();
  EndpointSet(const EndpointSet&) = delete;
  EndpointSet& operator=(const EndpointSet&) = delete;

  size_t size() const { return endpoints_.size(); }
  size_t current() const { return current_.load(std::memory_order_acquire) % endpoints_.size(); }
  Endpoint& at(size_t i) { return endpoints_[i % endpoints_.size()]; }
  // After a failure at `failed`: move the current endpoint past it (if nobody did already).
  size_t advance_from(size_t failed);

  // Records whether etcd answered; logs and calls back once per change.
  void observe(bool reachable, std::string_view detail);
  bool reachable() const { return reachable_.load(std::memory_order_acquire) != 0; }

  // Runs `rpc(endpoint, context)` with a deadline `timeout` from now. With
  // `failover`, an UNAVAILABLE answer moves on to the next endpoint while time
  // and endpoints remain. Returns Ok or the mapped error.
  EtcdStatus call(std::string_view what, Timeout timeout, bool failover,
                  const std::function<grpc::Status(Endpoint&, grpc::ClientContext&)>& rpc);

  // etcd auth (EtcdClientOptions::username). Adds the token to `ctx` (authenticating at `ep`
  // first when there is none, bounded by `deadline`) and returns the token used: "" when auth is
  // off, or when Authenticate failed (then `failed`, if given, holds its status).
  std::string attach_token(Endpoint& ep, grpc::ClientContext& ctx,
                           std::chrono::system_clock::time_point deadline, grpc::Status* failed = nullptr);
  // The token `used` was refused: the next attach_token() authenticates again.
  void drop_token(const std::string& used);
  bool auth_enabled() const { return !username_.empty(); }
  uint64_t authentications() const { return authentications_.load(std::memory_order_relaxed); }

 private:
  std::vector<Endpoint> endpoints_;
  std::atomic<size_t> current_{0};
  std::atomic<int> reachable_{1};
  std::function<void(bool)> on_change_;
  log::Logger log_;
  std::string username_;
  std::string password_;
  std::mutex auth_mu_;  // guards token_; held across Authenticate so one call renews for all
  std::string token_;
  std::atomic<uint64_t> authentications_{0};
  // Drives connection attempts: with the synchronous API nothing polls a
  // channel's sockets while no call is in flight except gRPC's 5 s backup
  // poller, which would delay noticing a returned etcd by up to 10 s.
  std::atomic<bool> stop_monitor_{false};
  std::thread monitor_;
};

}  // namespace cgn::etcd
