#include "state/etcd/watcher.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "state/etcd/etcd_endpoints.h"

namespace cgn::etcd {

namespace {
// revision + 1 without overflow (a broken server could send INT64_MAX).
int64_t after(int64_t revision) {
  return revision < std::numeric_limits<int64_t>::max() ? revision + 1 : revision;
}
}  // namespace

void WatchCursor::on_created(int64_t header_revision) {
  if (next_ == 0) {
    // A "now" watch is pinned to the revision it was created at, so a
    // reconnect before the first event still misses nothing.
    next_ = std::max<int64_t>(after(header_revision), 0);
  }
}

void WatchCursor::on_progress(int64_t header_revision) {
  next_ = std::max(next_, header_revision + 1);
}

std::vector<WatchEvent> WatchCursor::accept(std::vector<WatchEvent> events) {
  std::vector<WatchEvent> out;
  out.reserve(events.size());
  // The floor is fixed per response: one txn's events share a revision, and
  // etcd never splits a revision across responses (we do not ask for fragments).
  const int64_t floor = next_;
  for (auto& e : events) {
    // Never deliver a revision twice, even if a server resends it.
    if (e.kv.mod_revision < floor) {
      continue;
    }
    next_ = std::max(next_, after(e.kv.mod_revision));
    out.push_back(std::move(e));
  }
  return out;
}

Watcher::Watcher(std::shared_ptr<EtcdClient> client, WatchOptions options, WatchCallback callback)
    : client_(std::move(client)),
      options_(std::move(options)),
      callback_(std::move(callback)),
      log_(log::get("state.etcd")),
      cursor_(options_.start_revision) {
  next_revision_.store(cursor_.next_revision(), std::memory_order_release);
  thread_ = std::thread([this] { run(); });
}

Watcher::~Watcher() {
  stop();
}

std::unique_ptr<Watcher> Watcher::prefix(std::shared_ptr<EtcdClient> client, const std::string& prefix,
                                         int64_t start_revision, WatchCallback callback) {
  WatchOptions o;
  o.key = prefix;
  o.range_end = prefix_range_end(prefix);
  o.start_revision = start_revision;
  return std::make_unique<Watcher>(std::move(client), std::move(o), std::move(callback));
}

void Watcher::stop() {
  stop_stream_thread(mu_, stopping_, ctx_, cv_, thread_);
  finished_.store(true, std::memory_order_release);
}

bool Watcher::wait_backoff(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, d, [this] { return stopping_; });
}

void Watcher::run() {
  EndpointSet& eps = client_->endpoints();
  size_t endpoint = eps.current();
  auto backoff = options_.backoff_initial;
  bool first = true;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        break;
      }
    }
    if (!first) {
      reconnects_.fetch_add(1, std::memory_order_acq_rel);
    }
    first = false;
    auto t0 = std::chrono::steady_clock::now();
    if (run_stream(endpoint)) {
      break;
    }
    // A stream that lived a while resets the backoff; a flapping one grows it.
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(5)) {
      backoff = options_.backoff_initial;
    }
    if (eps.size() > 1) {
      endpoint = eps.advance_from(endpoint);
    }
    if (wait_backoff(backoff)) {
      break;
    }
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
  finished_.store(true, std::memory_order_release);
}

bool Watcher::run_stream(size_t endpoint) {
  EndpointSet& eps = client_->endpoints();
  EndpointSet::Endpoint& ep = eps.at(endpoint);
  auto ctx = std::make_shared<grpc::ClientContext>();
  // Without a leader the member cancels the stream, and we move on.
  ctx->AddMetadata("hasleader", "true");
  const std::string token =
      eps.attach_token(ep, *ctx, std::chrono::system_clock::now() + client_->options().call_timeout);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return true;
    }
    ctx_ = ctx;
  }
  auto stream = ep.watch->Watch(ctx.get());

  etcdserverpb::WatchRequest req;
  auto* create = req.mutable_create_request();
  create->set_key(options_.key);
  create->set_range_end(options_.range_end);
  create->set_start_revision(cursor_.next_revision());
  create->set_progress_notify(true);

  bool done = false;
  std::string why;
  if (stream->Write(req)) {
    etcdserverpb::WatchResponse resp;
    while (stream->Read(&resp)) {
      if (resp.compact_revision() != 0) {
        // Our next revision is gone: the caller must re-read and start over.
        CGN_LOG_WARN(log_, "etcd watch needs resync: its revision was compacted",
                     log::kv("key", options_.key), log::kv("revision", cursor_.next_revision()),
                     log::kv("oldest_kept", resp.compact_revision()));
        WatchUpdate up;
        up.kind = WatchUpdate::Kind::kResyncNeeded;
        up.revision = resp.header().revision();
        up.compact_revision = resp.compact_revision();
        connected_.store(false, std::memory_order_release);
        callback_(up);
        done = true;
        break;
      }
      if (resp.canceled()) {
        why = "canceled by server: " + resp.cancel_reason();
        // etcd refuses a watch whose token it no longer knows with "permission denied": the
        // next stream authenticates again.
        if (eps.auth_enabled() && (is_token_error(grpc::StatusCode::OK, resp.cancel_reason()) ||
                                   resp.cancel_reason().find("permission denied") != std::string::npos)) {
          eps.drop_token(token);
        }
        break;
      }
      if (resp.created()) {
        connected_.store(true, std::memory_order_release);
        eps.observe(true, "");
        cursor_.on_created(resp.header().revision());
      } else if (resp.events_size() == 0) {
        cursor_.on_progress(resp.header().revision());
      } else {
        WatchUpdate up;
        up.kind = WatchUpdate::Kind::kEvents;
        up.revision = resp.header().revision();
        up.events = cursor_.accept(events_from_proto(resp));
        if (!up.events.empty()) {
          next_revision_.store(cursor_.next_revision(), std::memory_order_release);
          callback_(up);
        }
      }
      next_revision_.store(cursor_.next_revision(), std::memory_order_release);
    }
  } else {
    why = "could not open stream";
  }
  connected_.store(false, std::memory_order_release);
  auto [st, stopping] = end_stream(*ctx, *stream, mu_, ctx_, stopping_);
  if (stopping) {
    return true;
  }
  if (done) {
    return true;
  }
  if (!st.ok() && st.error_code() != grpc::StatusCode::CANCELLED) {
    why += (why.empty() ? "" : "; ") + st.error_message();
    if (is_token_error(st.error_code(), st.error_message())) {
      eps.drop_token(token);
    }
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
      eps.observe(false, map_grpc_error(st.error_code(), st.error_message(), "Watch", ep.target).message);
    }
  }
  CGN_LOG_DEBUG(log_, "etcd watch stream broke, resuming", log::kv("key", options_.key),
                log::kv("endpoint", ep.target), log::kv("why", why),
                log::kv("from_revision", cursor_.next_revision()));
  return false;
}

}  // namespace cgn::etcd
