// Keeps one etcd lease alive over the LeaseKeepAlive bidi stream, on its own
// thread: a keep-alive every TTL/3 (as etcd's Go client does), reconnecting
// with backoff across endpoints when the stream breaks. When the server says
// the lease is gone (a keep-alive answer with TTL <= 0: expired or revoked) it
// reports "lease lost" once through on_lost and waits for regrant().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/log.h"
#include "state/etcd/etcd_client.h"
#include "state/etcd/etcd_types.h"

namespace grpc {
class ClientContext;
}

namespace cgn::etcd {

struct LeaseKeeperOptions {
  int64_t ttl_seconds = 10;
  // Called on the keeper's thread with the lost lease's id and why. May call
  // regrant() (and re-put its keys); must not destroy the keeper.
  std::function<void(int64_t lease_id, const std::string& reason)> on_lost;
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{1000};
};

// Owns its thread and stream; every public method is safe from any thread.
// Destruction stops keep-alives without revoking (the keys live out the TTL);
// call revoke() first to drop them at once.
class LeaseKeeper {
 public:
  // Grants a lease of options.ttl_seconds and starts keeping it alive.
  static EtcdResult<std::unique_ptr<LeaseKeeper>> start(std::shared_ptr<EtcdClient> client,
                                                        LeaseKeeperOptions options);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // The lease being kept alive; 0 after it was lost or revoked, until regrant().
  int64_t lease_id() const;
  // Seconds the server granted (it raises a TTL below its minimum).
  int64_t ttl_seconds() const { return ttl_seconds_.load(std::memory_order_acquire); }
  // Grants a fresh lease with the same TTL and keeps it alive instead of the
  // current one (which is left to expire, not revoked). Returns the new id.
  EtcdResult<int64_t> regrant();
  // Revokes the current lease (deleting its keys) and stops keeping it alive.
  EtcdStatus revoke();
  // Stops the thread; idempotent.
  void stop();

  // Keep-alive answers with TTL > 0 received so far.
  uint64_t keepalives_acked() const { return acked_.load(std::memory_order_acquire); }
  // Time since etcd last confirmed the lease (the grant counts). Past the TTL
  // while etcd is unreachable, the lease may be gone: the owner can treat its
  // keys as at risk before the keeper can learn the truth from etcd.
  std::chrono::milliseconds since_last_ack() const;

 private:
  LeaseKeeper(std::shared_ptr<EtcdClient> client, LeaseKeeperOptions options, LeaseGrant grant);
  void run();
  // One stream's life; returns true when stopping.
  bool run_stream(size_t endpoint);
  void lost(int64_t id, const std::string& reason);

  std::shared_ptr<EtcdClient> client_;
  LeaseKeeperOptions options_;
  log::Logger log_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                     // guarded by mu_
  int64_t lease_id_ = 0;                      // guarded by mu_
  std::shared_ptr<grpc::ClientContext> ctx_;  // guarded by mu_

  std::atomic<int64_t> ttl_seconds_{0};
  std::atomic<uint64_t> acked_{0};
  std::atomic<int64_t> last_ack_ns_{0};  // steady_clock, since epoch
  std::thread thread_;
};

}  // namespace cgn::etcd
