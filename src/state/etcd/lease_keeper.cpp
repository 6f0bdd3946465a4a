#include "state/etcd/lease_keeper.h"

#include <algorithm>
#include <utility>

#include "state/etcd/etcd_endpoints.h"

namespace cgn::etcd {

namespace {
int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

EtcdResult<std::unique_ptr<LeaseKeeper>> LeaseKeeper::start(std::shared_ptr<EtcdClient> client,
                                                            LeaseKeeperOptions options) {
  auto grant = client->lease_grant(options.ttl_seconds);
  if (!grant) {
    return grant.error();
  }
  return std::unique_ptr<LeaseKeeper>(new LeaseKeeper(std::move(client), std::move(options), grant.value()));
}

LeaseKeeper::LeaseKeeper(std::shared_ptr<EtcdClient> client, LeaseKeeperOptions options, LeaseGrant grant)
    : client_(std::move(client)), options_(std::move(options)), log_(log::get("state.etcd")) {
  lease_id_ = grant.id;
  ttl_seconds_.store(grant.ttl_seconds, std::memory_order_release);
  last_ack_ns_.store(steady_now_ns(), std::memory_order_release);
  thread_ = std::thread([this] { run(); });
}

LeaseKeeper::~LeaseKeeper() {
  stop();
}

std::chrono::milliseconds LeaseKeeper::since_last_ack() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::nanoseconds(steady_now_ns() - last_ack_ns_.load(std::memory_order_acquire)));
}

int64_t LeaseKeeper::lease_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lease_id_;
}

void LeaseKeeper::stop() {
  stop_stream_thread(mu_, stopping_, ctx_, cv_, thread_);
}

EtcdResult<int64_t> LeaseKeeper::regrant() {
  auto grant = client_->lease_grant(options_.ttl_seconds);
  if (!grant) {
    return grant.error();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    lease_id_ = grant->id;
  }
  ttl_seconds_.store(grant->ttl_seconds, std::memory_order_release);
  last_ack_ns_.store(steady_now_ns(), std::memory_order_release);
  cv_.notify_all();
  CGN_LOG_INFO(log_, "etcd lease granted again", log::kv("lease", fmt::format("{:x}", grant->id)),
               log::kv("ttl_s", grant->ttl_seconds));
  return grant->id;
}

EtcdStatus LeaseKeeper::revoke() {
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = lease_id_;
    lease_id_ = 0;
  }
  cv_.notify_all();
  if (id == 0) {
    return Ok{};
  }
  return client_->lease_revoke(id);
}

void LeaseKeeper::lost(int64_t id, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lease_id_ != id) {
      return;  // regranted or revoked meanwhile: nothing was lost that we still hold
    }
    lease_id_ = 0;
  }
  CGN_LOG_WARN(log_, "etcd lease lost", log::kv("lease", fmt::format("{:x}", id)), log::kv("reason", reason));
  if (options_.on_lost) {
    options_.on_lost(id, reason);
  }
}

void LeaseKeeper::run() {
  EndpointSet& eps = client_->endpoints();
  size_t endpoint = eps.current();
  auto backoff = options_.backoff_initial;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Nothing to keep alive until regrant().
      cv_.wait(lock, [this] { return stopping_ || lease_id_ != 0; });
      if (stopping_) {
        break;
      }
    }
    const uint64_t acked_before = acked_.load(std::memory_order_acquire);
    if (run_stream(endpoint)) {
      break;
    }
    if (acked_.load(std::memory_order_acquire) != acked_before) {
      backoff = options_.backoff_initial;
    }
    if (eps.size() > 1) {
      endpoint = eps.advance_from(endpoint);
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, backoff, [this] { return stopping_; })) {
        break;
      }
    }
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
}

bool LeaseKeeper::run_stream(size_t endpoint) {
  EndpointSet& eps = client_->endpoints();
  EndpointSet::Endpoint& ep = eps.at(endpoint);
  auto ctx = std::make_shared<grpc::ClientContext>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return true;
    }
    ctx_ = ctx;
  }
  const std::string token =
      eps.attach_token(ep, *ctx, std::chrono::system_clock::now() + client_->options().call_timeout);
  auto stream = ep.lease->LeaseKeepAlive(ctx.get());
  std::string why;
  while (true) {
    int64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id = lease_id_;
      if (stopping_ || id == 0) {
        break;
      }
    }
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(id);
    etcdserverpb::LeaseKeepAliveResponse resp;
    if (!stream->Write(req) || !stream->Read(&resp)) {
      why = "stream broke";
      break;
    }
    if (resp.ttl() <= 0) {
      lost(id, "expired or revoked (keep-alive answered TTL " + std::to_string(resp.ttl()) + ")");
      continue;  // waits below only if nothing was regranted from on_lost
    }
    acked_.fetch_add(1, std::memory_order_acq_rel);
    last_ack_ns_.store(steady_now_ns(), std::memory_order_release);
    ttl_seconds_.store(resp.ttl(), std::memory_order_release);
    eps.observe(true, "");
    // etcd's Go client renews at TTL/3: two more tries before expiry.
    const auto interval = std::chrono::milliseconds(std::max<int64_t>(resp.ttl() * 1000 / 3, 100));
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, interval, [&] { return stopping_ || lease_id_ != id; });
  }
  auto [st, stopping] = end_stream(*ctx, *stream, mu_, ctx_, stopping_);
  if (stopping) {
    return true;
  }
  if (lease_id() == 0) {
    return false;  // lost or revoked: run() waits for regrant()
  }
  if (is_token_error(st.error_code(), st.error_message())) {
    eps.drop_token(token);  // the next stream authenticates again
  } else if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
    eps.observe(false,
                map_grpc_error(st.error_code(), st.error_message(), "LeaseKeepAlive", ep.target).message);
  } else if (st.error_code() == grpc::StatusCode::NOT_FOUND) {
    if (int64_t id = lease_id(); id != 0) {
      lost(id, "not found: " + st.error_message());
    }
  }
  CGN_LOG_DEBUG(log_, "etcd keep-alive stream ended, retrying", log::kv("endpoint", ep.target),
                log::kv("why", why), log::kv("status", st.error_message()));
  return false;
}

}  // namespace cgn::etcd
