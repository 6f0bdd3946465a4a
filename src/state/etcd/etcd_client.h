// The etcd v3 client over grpc++: KV (range/put/delete/txn/compact), leases,
// and the status check, with per-call deadlines and fail-over between
// endpoints. Streams live in their own classes on their own threads:
// Watcher (watcher.h), LeaseKeeper (lease_keeper.h), PrefixMirror
// (prefix_mirror.h). Semantics: docs/architecture/etcd.md.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "state/etcd/etcd_types.h"

namespace cgn::etcd {

class EndpointSet;  // gRPC channels and stubs (etcd_endpoints.h, internal)

using Timeout = std::chrono::milliseconds;
// Passed as a timeout: use EtcdClientOptions::call_timeout.
inline constexpr Timeout kDefaultTimeout{0};

struct EtcdClientOptions {
  // "host:port", "http://host:port" or "https://host:port"; at least one, all of one scheme.
  std::vector<std::string> endpoints;
  // https:// endpoints: the CA (PEM file) that signed etcd's certificate (required), and this
  // client's certificate and key when etcd runs with --client-cert-auth (both or neither).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // etcd auth: with a username, the client calls Auth.Authenticate and sends the token on every
  // call and stream; a call refused for its token ("invalid auth token", an expired or restarted
  // etcd) re-authenticates and is retried once, and a stream refused for it reopens with a new one.
  std::string username;
  std::string password;
  // Deadline of each unary call unless the call passes its own.
  Timeout call_timeout{2000};
  // First and largest gRPC reconnect backoff, so a returning etcd is found
  // quickly (gRPC's defaults are 1 s and 120 s).
  Timeout reconnect_backoff_min{100};
  Timeout reconnect_backoff_max{1000};
  // Largest response accepted (a big range); requests are bounded by etcd itself.
  int max_receive_bytes = 64 * 1024 * 1024;
  // Called on every change of "etcd reachable" (also logged once per change),
  // from whichever thread saw the change. Must not block.
  std::function<void(bool reachable)> on_reachability_change;
};

// Endpoints, TLS files and auth from [state.etcd] (the password from its variable).
EtcdClientOptions client_options_from_config(const config::EtcdConfig& cfg);

// Thread-safety: every method may be called from any thread at once (gRPC
// stubs are thread-safe; the client's own state is atomics). Create it with
// create(); Watcher, LeaseKeeper and PrefixMirror share ownership of it. It
// owns one thread that keeps its channels connecting while idle.
//
// Fail-over: calls start at the current endpoint. Reads (range, status,
// lease_time_to_live) and the lease calls that are safe to repeat
// (lease_grant, lease_revoke) move to the next endpoint on UNAVAILABLE within
// the same deadline. KV writes (put, del, txn, compact) are not retried (a
// lost answer could hide an applied write); they fail with kUnavailable and
// the next call starts at the next endpoint.
//
// A down etcd makes calls fail fast with kUnavailable (gRPC does not wait for
// a connection) and, at worst, with kDeadlineExceeded at the call's deadline.
class EtcdClient {
 public:
  static EtcdResult<std::shared_ptr<EtcdClient>> create(EtcdClientOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // ---- KV ----
  // The one key `key`.
  EtcdResult<RangeResult> get(std::string_view key, Timeout timeout = kDefaultTimeout);
  // Every key under `prefix` (up to `limit`, 0 = no limit), sorted by key.
  EtcdResult<RangeResult> get_prefix(std::string_view prefix, int64_t limit = 0,
                                     Timeout timeout = kDefaultTimeout);
  // [key, range_end) at `revision` (0 = latest); range_end "" = just key.
  EtcdResult<RangeResult> range(std::string_view key, std::string_view range_end, int64_t limit,
                                int64_t revision, Timeout timeout = kDefaultTimeout);
  // Every key under `prefix` at one revision, read in pages of `page_size` keys
  // so no single response grows without bound. kCompacted if the revision was
  // compacted between pages (retry).
  EtcdResult<RangeResult> get_prefix_paged(std::string_view prefix, int64_t page_size = 1000,
                                           Timeout timeout = kDefaultTimeout);

  // lease 0 = no lease. kLeaseNotFound if the lease is gone.
  EtcdResult<PutResult> put(std::string_view key, std::string_view value, int64_t lease = 0,
                            Timeout timeout = kDefaultTimeout);
  EtcdResult<DeleteResult> del(std::string_view key, Timeout timeout = kDefaultTimeout);
  EtcdResult<DeleteResult> del_prefix(std::string_view prefix, Timeout timeout = kDefaultTimeout);

  // One atomic txn. etcd rejects more than 128 compares or ops per branch
  // (kTooManyOps) and two writes to one key (kInvalidArgument).
  EtcdResult<TxnResult> txn(const TxnRequest& request, Timeout timeout = kDefaultTimeout);
  // Unconditional writes split by split_txn_batch() into txns of <= max_ops.
  // Each txn is atomic; the batch is not: on error, the txns before it stay
  // applied (BatchResult is lost with the error; re-apply is idempotent for
  // puts and deletes). `timeout` applies per txn.
  EtcdResult<BatchResult> apply_batch(const std::vector<TxnOp>& ops, size_t max_ops = kMaxTxnOps,
                                      Timeout timeout = kDefaultTimeout);

  // Drops history before `revision`; watchers behind it get "resync needed".
  EtcdResult<int64_t> compact(int64_t revision, bool physical = true, Timeout timeout = kDefaultTimeout);

  // ---- Leases (one-shot; LeaseKeeper keeps one alive) ----
  EtcdResult<LeaseGrant> lease_grant(int64_t ttl_seconds, Timeout timeout = kDefaultTimeout);
  // kLeaseNotFound when already gone. Deletes every key attached.
  EtcdStatus lease_revoke(int64_t lease_id, Timeout timeout = kDefaultTimeout);
  EtcdResult<LeaseTtl> lease_time_to_live(int64_t lease_id, bool with_keys = false,
                                          Timeout timeout = kDefaultTimeout);

  // ---- Health ----
  // Maintenance.Status of the current endpoint (failing over). Updates
  // reachable() and logs/calls back on a change.
  EtcdResult<ServerStatus> status(Timeout timeout = kDefaultTimeout);
  // The last observation of any call or stream; true before the first one.
  bool reachable() const;

  const EtcdClientOptions& options() const { return options_; }
  // Successful Auth.Authenticate calls so far (0 without a username).
  uint64_t authentications() const;

 private:
  friend class Watcher;
  friend class LeaseKeeper;
  explicit EtcdClient(EtcdClientOptions options, std::unique_ptr<EndpointSet> endpoints);
  EndpointSet& endpoints() { return *endpoints_; }
  Timeout effective(Timeout t) const { return t.count() > 0 ? t : options_.call_timeout; }

  EtcdClientOptions options_;
  std::unique_ptr<EndpointSet> endpoints_;
};

}  // namespace cgn::etcd
