#include "state/etcd/etcd_client.h"

#include <algorithm>
#include <utility>

#include "core/tls/grpc_tls.h"
#include "state/etcd/batch.h"
#include "state/etcd/etcd_endpoints.h"

namespace cgn::etcd {

// ---------------------------------------------------------------------------
// Helpers shared by the client's files (declared in etcd_endpoints.h)
// ---------------------------------------------------------------------------

EtcdError map_grpc_error(grpc::StatusCode code, std::string_view grpc_message, std::string_view what,
                         std::string_view endpoint) {
  std::string msg = std::string("etcd ") + std::string(what) + " at " + std::string(endpoint) + ": " +
                    std::string(grpc_message);
  auto has = [&](std::string_view needle) { return grpc_message.find(needle) != std::string_view::npos; };
  EtcdErrc errc = EtcdErrc::kInternal;
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
      errc = EtcdErrc::kUnavailable;
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      errc = EtcdErrc::kDeadlineExceeded;
      break;
    case grpc::StatusCode::CANCELLED:
      errc = EtcdErrc::kCancelled;
      break;
    case grpc::StatusCode::NOT_FOUND:
      errc = has("lease") ? EtcdErrc::kLeaseNotFound : EtcdErrc::kInvalidArgument;
      break;
    case grpc::StatusCode::OUT_OF_RANGE:
      errc = has("compacted") ? EtcdErrc::kCompacted
             : has("future")  ? EtcdErrc::kFutureRevision
                              : EtcdErrc::kInvalidArgument;
      break;
    case grpc::StatusCode::INVALID_ARGUMENT:
      errc = has("too many operations") ? EtcdErrc::kTooManyOps
             : has("too large")         ? EtcdErrc::kRequestTooLarge
                                        : EtcdErrc::kInvalidArgument;
      break;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      errc = EtcdErrc::kRequestTooLarge;
      break;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      errc = EtcdErrc::kAuth;
      break;
    default:
      break;
  }
  return make_error(errc, std::move(msg));
}

EtcdResult<std::string> normalize_endpoint(std::string_view endpoint) {
  std::string_view e = endpoint;
  if (e.starts_with("https://")) {
    e.remove_prefix(8);
  } else if (e.starts_with("http://")) {
    e.remove_prefix(7);
  }
  while (!e.empty() && e.back() == '/') {
    e.remove_suffix(1);
  }
  auto colon = e.rfind(':');
  if (e.empty() || colon == std::string_view::npos || colon == 0 || colon + 1 == e.size() ||
      e.find('/') != std::string_view::npos) {
    return make_error(EtcdErrc::kInvalidArgument, "etcd endpoint '" + std::string(endpoint) +
                                                      "': expected host:port or http://host:port");
  }
  for (char c : e.substr(colon + 1)) {
    if (c < '0' || c > '9') {
      return make_error(EtcdErrc::kInvalidArgument,
                        "etcd endpoint '" + std::string(endpoint) + "': bad port");
    }
  }
  return std::string(e);
}

bool is_token_error(grpc::StatusCode code, std::string_view message) {
  // etcd's ErrGRPCInvalidAuthToken (UNAUTHENTICATED), ErrGRPCAuthOldRevision and ErrGRPCUserEmpty
  // (INVALID_ARGUMENT), and a watch refused at create with "permission denied".
  auto has = [&](std::string_view s) { return message.find(s) != std::string_view::npos; };
  return code == grpc::StatusCode::UNAUTHENTICATED || has("invalid auth token") ||
         has("revision of auth store is old") || has("user name is empty");
}

void stop_stream_thread(std::mutex& mu, bool& stopping, const std::shared_ptr<grpc::ClientContext>& ctx,
                        std::condition_variable& cv, std::thread& thread) {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    if (ctx) {
      ctx->TryCancel();
    }
  }
  cv.notify_all();
  if (thread.joinable() && thread.get_id() != std::this_thread::get_id()) {
    thread.join();
  }
}

KeyValue from_proto(const mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

RangeResult range_from_proto(const etcdserverpb::RangeResponse& resp) {
  RangeResult out;
  out.revision = resp.header().revision();
  out.count = resp.count();
  out.more = resp.more();
  out.kvs.reserve(static_cast<size_t>(resp.kvs_size()));
  for (const auto& kv : resp.kvs()) {
    out.kvs.push_back(from_proto(kv));
  }
  return out;
}

std::vector<WatchEvent> events_from_proto(const etcdserverpb::WatchResponse& resp) {
  std::vector<WatchEvent> events;
  events.reserve(static_cast<size_t>(resp.events_size()));
  for (const auto& ev : resp.events()) {
    WatchEvent e;
    e.type = ev.type() == mvccpb::Event::DELETE ? WatchEvent::Type::kDelete : WatchEvent::Type::kPut;
    e.kv = from_proto(ev.kv());
    events.push_back(std::move(e));
  }
  return events;
}

// ---------------------------------------------------------------------------
// EndpointSet
// ---------------------------------------------------------------------------

EndpointSet::EndpointSet(const EtcdClientOptions& options, std::vector<std::string> targets,
                         std::shared_ptr<grpc::ChannelCredentials> credentials)
    : on_change_(options.on_reachability_change),
      log_(log::get("state.etcd")),
      username_(options.username),
      password_(options.password) {
  for (auto& target : targets) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                static_cast<int>(options.reconnect_backoff_min.count()));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options.reconnect_backoff_max.count()));
    // Detect a silently dead connection under a long-lived stream. etcd's
    // default --grpc-keepalive-min-time is 5 s; pinging less often than that
    // and only with calls open avoids its too_many_pings GOAWAY.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    // Each client its own connections, so one client's backoff never delays another's.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(options.max_receive_bytes);
    Endpoint ep;
    ep.target = target;
    ep.channel = grpc::CreateCustomChannel(target, credentials, args);
    ep.kv = etcdserverpb::KV::NewStub(ep.channel);
    ep.watch = etcdserverpb::Watch::NewStub(ep.channel);
    ep.lease = etcdserverpb::Lease::NewStub(ep.channel);
    ep.maintenance = etcdserverpb::Maintenance::NewStub(ep.channel);
    ep.auth = etcdserverpb::Auth::NewStub(ep.channel);
    endpoints_.push_back(std::move(ep));
  }
  monitor_ = std::thread([this] {
    const auto slice = std::chrono::milliseconds(100);
    while (!stop_monitor_.load(std::memory_order_acquire)) {
      for (auto& ep : endpoints_) {
        // try_to_connect: keep a connection up (or being retried) to every endpoint.
        grpc_connectivity_state state = ep.channel->GetState(true);
        ep.channel->WaitForStateChange(state, std::chrono::system_clock::now() + slice);
      }
    }
  });
}

EndpointSet::~EndpointSet() {
  stop_monitor_.store(true, std::memory_order_release);
  if (monitor_.joinable()) {
    monitor_.join();
  }
}

size_t EndpointSet::advance_from(size_t failed) {
  size_t expected = current_.load(std::memory_order_acquire);
  if (expected % endpoints_.size() == failed % endpoints_.size()) {
    current_.compare_exchange_strong(expected, (failed + 1) % endpoints_.size(), std::memory_order_acq_rel);
  }
  return current();
}

void EndpointSet::observe(bool reachable, std::string_view detail) {
  int now = reachable ? 1 : 0;
  if (reachable_.exchange(now, std::memory_order_acq_rel) == now) {
    return;
  }
  if (reachable) {
    CGN_LOG_INFO(log_, "etcd reachable again");
  } else {
    CGN_LOG_WARN(log_, "etcd unreachable", log::kv("detail", detail));
  }
  if (on_change_) {
    on_change_(reachable);
  }
}

std::string EndpointSet::attach_token(Endpoint& ep, grpc::ClientContext& ctx,
                                      std::chrono::system_clock::time_point deadline, grpc::Status* failed) {
  if (!auth_enabled()) {
    return {};
  }
  std::lock_guard lock(auth_mu_);
  if (token_.empty()) {
    grpc::ClientContext actx;
    actx.set_deadline(deadline);
    etcdserverpb::AuthenticateRequest req;
    req.set_name(username_);
    req.set_password(password_);
    etcdserverpb::AuthenticateResponse resp;
    grpc::Status st = ep.auth->Authenticate(&actx, req, &resp);
    if (!st.ok()) {
      // Logged without the password; the call that needed the token fails and says why.
      if (st.error_code() != grpc::StatusCode::UNAVAILABLE) {
        CGN_LOG_WARN(log_, "etcd authentication failed", log::kv("endpoint", ep.target),
                     log::kv("user", username_), log::kv("error", st.error_message()));
      }
      if (failed != nullptr) {
        *failed = st;
      }
      return {};
    }
    token_ = resp.token();
    const uint64_t n = authentications_.fetch_add(1, std::memory_order_relaxed) + 1;
    CGN_LOG_DEBUG(log_, "etcd authenticated", log::kv("endpoint", ep.target), log::kv("user", username_),
                  log::kv("count", n));
  }
  ctx.AddMetadata("token", token_);
  return token_;
}

void EndpointSet::drop_token(const std::string& used) {
  std::lock_guard lock(auth_mu_);
  if (!used.empty() && token_ == used) {
    token_.clear();
  }
}

EtcdStatus EndpointSet::call(std::string_view what, Timeout timeout, bool failover,
                             const std::function<grpc::Status(Endpoint&, grpc::ClientContext&)>& rpc) {
  const auto deadline = std::chrono::system_clock::now() + timeout;
  const size_t attempts = failover ? endpoints_.size() : 1;
  size_t idx = current();
  EtcdError last{EtcdErrc::kUnavailable, ""};
  bool reauthenticated = false;
  for (size_t attempt = 0; attempt < attempts; ++attempt) {
    Endpoint& ep = at(idx);
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline);
    grpc::Status auth_failed;
    const std::string token = attach_token(ep, ctx, deadline, &auth_failed);
    const bool unauthenticated = !auth_failed.ok();
    grpc::Status st = unauthenticated ? auth_failed : rpc(ep, ctx);
    if (st.ok()) {
      observe(true, "");
      return Ok{};
    }
    last = map_grpc_error(st.error_code(), st.error_message(),
                          unauthenticated
                              ? "Authenticate as \"" + username_ + "\" (for " + std::string(what) + ")"
                              : std::string(what),
                          ep.target);
    if (unauthenticated && st.error_code() != grpc::StatusCode::UNAVAILABLE &&
        st.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      observe(true, "");
      return make_error(EtcdErrc::kAuth, last.message);  // wrong user or password: say so
    }
    if (!unauthenticated && auth_enabled() && is_token_error(st.error_code(), st.error_message())) {
      // Expired or unknown (an etcd restart forgets simple tokens): once more with a new token,
      // on the same endpoint. Rejected writes were not applied, so this is safe for every call.
      drop_token(token);
      if (!reauthenticated && std::chrono::system_clock::now() < deadline) {
        reauthenticated = true;
        --attempt;
        continue;
      }
      observe(true, "");
      return last;
    }
    const bool unreachable = st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                             (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
                              ep.channel->GetState(false) != GRPC_CHANNEL_READY);
    if (!unreachable) {
      // The server answered (or the caller's deadline was simply too short).
      if (st.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
        observe(true, "");
      }
      return last;
    }
    observe(false, last.message);
    idx = advance_from(idx);
    if (std::chrono::system_clock::now() >= deadline) {
      break;
    }
  }
  return last;
}

// ---------------------------------------------------------------------------
// EtcdClient
// ---------------------------------------------------------------------------

namespace {

void fill_request_op(const TxnOp& op, etcdserverpb::RequestOp* out) {
  switch (op.kind) {
    case TxnOp::Kind::kGet: {
      auto* r = out->mutable_request_range();
      r->set_key(op.key);
      if (op.prefix) {
        r->set_range_end(prefix_range_end(op.key));
      }
      r->set_limit(op.limit);
      break;
    }
    case TxnOp::Kind::kPut: {
      auto* p = out->mutable_request_put();
      p->set_key(op.key);
      p->set_value(op.value);
      p->set_lease(op.lease);
      break;
    }
    case TxnOp::Kind::kDelete: {
      auto* d = out->mutable_request_delete_range();
      d->set_key(op.key);
      if (op.prefix) {
        d->set_range_end(prefix_range_end(op.key));
      }
      break;
    }
  }
}

void fill_compare(const TxnCompare& c, etcdserverpb::Compare* out) {
  using P = etcdserverpb::Compare;
  out->set_key(c.key);
  switch (c.op) {
    case TxnCompare::Op::kEqual:
      out->set_result(P::EQUAL);
      break;
    case TxnCompare::Op::kGreater:
      out->set_result(P::GREATER);
      break;
    case TxnCompare::Op::kLess:
      out->set_result(P::LESS);
      break;
    case TxnCompare::Op::kNotEqual:
      out->set_result(P::NOT_EQUAL);
      break;
  }
  switch (c.target) {
    case TxnCompare::Target::kVersion:
      out->set_target(P::VERSION);
      out->set_version(c.number);
      break;
    case TxnCompare::Target::kCreateRevision:
      out->set_target(P::CREATE);
      out->set_create_revision(c.number);
      break;
    case TxnCompare::Target::kModRevision:
      out->set_target(P::MOD);
      out->set_mod_revision(c.number);
      break;
    case TxnCompare::Target::kValue:
      out->set_target(P::VALUE);
      out->set_value(c.value);
      break;
    case TxnCompare::Target::kLease:
      out->set_target(P::LEASE);
      out->set_lease(c.number);
      break;
  }
}

}  // namespace

EtcdClientOptions client_options_from_config(const config::EtcdConfig& cfg) {
  EtcdClientOptions o;
  o.endpoints = cfg.endpoints;
  o.ca_file = cfg.ca_file;
  o.cert_file = cfg.cert_file;
  o.key_file = cfg.key_file;
  o.username = cfg.username;
  o.password = cfg.password.reveal();
  return o;
}

EtcdResult<std::shared_ptr<EtcdClient>> EtcdClient::create(EtcdClientOptions options) {
  if (options.endpoints.empty()) {
    return make_error(EtcdErrc::kInvalidArgument, "etcd client: no endpoints given");
  }
  std::vector<std::string> targets;
  for (const auto& e : options.endpoints) {
    auto t = normalize_endpoint(e);
    if (!t) {
      return t.error();
    }
    targets.push_back(std::move(t.value()));
  }
  if (options.call_timeout.count() <= 0) {
    options.call_timeout = Timeout(2000);
  }
  const size_t https =
      static_cast<size_t>(std::count_if(options.endpoints.begin(), options.endpoints.end(),
                                        [](const std::string& e) { return e.starts_with("https://"); }));
  if (https != 0 && https != options.endpoints.size()) {
    return make_error(EtcdErrc::kInvalidArgument,
                      "etcd client: endpoints mix https:// and plaintext; use one scheme for all");
  }
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (https != 0) {
    if (options.ca_file.empty()) {
      return make_error(
          EtcdErrc::kInvalidArgument,
          "etcd client: https:// endpoints need ca_file (the CA that signed etcd's certificate)");
    }
    if (options.cert_file.empty() != options.key_file.empty()) {
      return make_error(EtcdErrc::kInvalidArgument, "etcd client: cert_file and key_file go together");
    }
    auto c = tls::channel_credentials(options.ca_file, options.cert_file, options.key_file);
    if (!c) {
      return make_error(EtcdErrc::kInvalidArgument, "etcd client: " + c.error().message);
    }
    creds = std::move(*c);
  } else if (!options.ca_file.empty() || !options.cert_file.empty()) {
    return make_error(EtcdErrc::kInvalidArgument,
                      "etcd client: ca_file/cert_file are set but no endpoint is https://");
  }
  if (options.username.empty() != options.password.empty()) {
    return make_error(EtcdErrc::kInvalidArgument, "etcd client: username and password go together");
  }
  auto eps = std::make_unique<EndpointSet>(options, std::move(targets), std::move(creds));
  return std::shared_ptr<EtcdClient>(new EtcdClient(std::move(options), std::move(eps)));
}

EtcdClient::EtcdClient(EtcdClientOptions options, std::unique_ptr<EndpointSet> endpoints)
    : options_(std::move(options)), endpoints_(std::move(endpoints)) {}

EtcdClient::~EtcdClient() = default;

bool EtcdClient::reachable() const {
  return endpoints_->reachable();
}

uint64_t EtcdClient::authentications() const {
  return endpoints_->authentications();
}

EtcdResult<RangeResult> EtcdClient::range(std::string_view key, std::string_view range_end, int64_t limit,
                                          int64_t revision, Timeout timeout) {
  etcdserverpb::RangeRequest req;
  req.set_key(std::string(key));
  req.set_range_end(std::string(range_end));
  req.set_limit(limit);
  req.set_revision(revision);
  etcdserverpb::RangeResponse resp;
  auto st = endpoints_->call("Range", effective(timeout), true, [&](auto& ep, auto& ctx) {
    resp.Clear();
    return ep.kv->Range(&ctx, req, &resp);
  });
  if (!st) {
    return st.error();
  }
  return range_from_proto(resp);
}

EtcdResult<RangeResult> EtcdClient::get(std::string_view key, Timeout timeout) {
  return range(key, "", 0, 0, timeout);
}

EtcdResult<RangeResult> EtcdClient::get_prefix(std::string_view prefix, int64_t limit, Timeout timeout) {
  return range(prefix, prefix_range_end(prefix), limit, 0, timeout);
}

EtcdResult<RangeResult> EtcdClient::get_prefix_paged(std::string_view prefix, int64_t page_size,
                                                     Timeout timeout) {
  page_size = std::max<int64_t>(page_size, 1);
  const std::string end = prefix_range_end(prefix);
  auto first = range(prefix, end, page_size, 0, timeout);
  if (!first) {
    return first.error();
  }
  RangeResult all = std::move(first.value());
  const int64_t at = all.revision;
  bool more = all.more;
  while (more && !all.kvs.empty()) {
    // Next page: strictly after the last key seen, at the same revision.
    std::string from = all.kvs.back().key + std::string(1, '\0');
    auto page = range(from, end, page_size, at, timeout);
    if (!page) {
      return page.error();
    }
    more = page->more;
    for (auto& kv : page->kvs) {
      all.kvs.push_back(std::move(kv));
    }
  }
  all.more = false;
  all.count = static_cast<int64_t>(all.kvs.size());
  all.revision = at;
  return all;
}

EtcdResult<PutResult> EtcdClient::put(std::string_view key, std::string_view value, int64_t lease,
                                      Timeout timeout) {
  etcdserverpb::PutRequest req;
  req.set_key(std::string(key));
  req.set_value(std::string(value));
  req.set_lease(lease);
  etcdserverpb::PutResponse resp;
  auto st = endpoints_->call("Put", effective(timeout), false,
                             [&](auto& ep, auto& ctx) { return ep.kv->Put(&ctx, req, &resp); });
  if (!st) {
    return st.error();
  }
  return PutResult{resp.header().revision()};
}

namespace {
etcdserverpb::DeleteRangeRequest delete_request(std::string_view key, std::string range_end) {
  etcdserverpb::DeleteRangeRequest req;
  req.set_key(std::string(key));
  req.set_range_end(std::move(range_end));
  return req;
}
}  // namespace

EtcdResult<DeleteResult> EtcdClient::del(std::string_view key, Timeout timeout) {
  auto req = delete_request(key, "");
  etcdserverpb::DeleteRangeResponse resp;
  auto st = endpoints_->call("DeleteRange", effective(timeout), false,
                             [&](auto& ep, auto& ctx) { return ep.kv->DeleteRange(&ctx, req, &resp); });
  if (!st) {
    return st.error();
  }
  return DeleteResult{resp.deleted(), resp.header().revision()};
}

EtcdResult<DeleteResult> EtcdClient::del_prefix(std::string_view prefix, Timeout timeout) {
  auto req = delete_request(prefix, prefix_range_end(prefix));
  etcdserverpb::DeleteRangeResponse resp;
  auto st = endpoints_->call("DeleteRange", effective(timeout), false,
                             [&](auto& ep, auto& ctx) { return ep.kv->DeleteRange(&ctx, req, &resp); });
  if (!st) {
    return st.error();
  }
  return DeleteResult{resp.deleted(), resp.header().revision()};
}

EtcdResult<TxnResult> EtcdClient::txn(const TxnRequest& request, Timeout timeout) {
  etcdserverpb::TxnRequest req;
  for (const auto& c : request.compares) {
    fill_compare(c, req.add_compare());
  }
  for (const auto& op : request.success) {
    fill_request_op(op, req.add_success());
  }
  for (const auto& op : request.failure) {
    fill_request_op(op, req.add_failure());
  }
  etcdserverpb::TxnResponse resp;
  auto st = endpoints_->call("Txn", effective(timeout), false,
                             [&](auto& ep, auto& ctx) { return ep.kv->Txn(&ctx, req, &resp); });
  if (!st) {
    return st.error();
  }
  TxnResult out;
  out.succeeded = resp.succeeded();
  out.revision = resp.header().revision();
  for (const auto& r : resp.responses()) {
    TxnOpResult res;
    if (r.has_response_range()) {
      res.kind = TxnOp::Kind::kGet;
      for (const auto& kv : r.response_range().kvs()) {
        res.kvs.push_back(etcd::from_proto(kv));
      }
    } else if (r.has_response_put()) {
      res.kind = TxnOp::Kind::kPut;
    } else if (r.has_response_delete_range()) {
      res.kind = TxnOp::Kind::kDelete;
      res.deleted = r.response_delete_range().deleted();
    }
    out.results.push_back(std::move(res));
  }
  return out;
}

EtcdResult<BatchResult> EtcdClient::apply_batch(const std::vector<TxnOp>& ops, size_t max_ops,
                                                Timeout timeout) {
  BatchResult out;
  for (auto& chunk : split_txn_batch(ops, max_ops)) {
    TxnRequest req;
    req.success = std::move(chunk);
    auto r = txn(req, timeout);
    if (!r) {
      auto err = r.error();
      err.message += " (after " + std::to_string(out.txns) + " txns of the batch applied)";
      return err;
    }
    ++out.txns;
    out.revision = r->revision;
  }
  return out;
}

EtcdResult<int64_t> EtcdClient::compact(int64_t revision, bool physical, Timeout timeout) {
  etcdserverpb::CompactionRequest req;
  req.set_revision(revision);
  req.set_physical(physical);
  etcdserverpb::CompactionResponse resp;
  auto st = endpoints_->call("Compact", effective(timeout), false,
                             [&](auto& ep, auto& ctx) { return ep.kv->Compact(&ctx, req, &resp); });
  if (!st) {
    return st.error();
  }
  return resp.header().revision();
}

EtcdResult<LeaseGrant> EtcdClient::lease_grant(int64_t ttl_seconds, Timeout timeout) {
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(ttl_seconds);
  etcdserverpb::LeaseGrantResponse resp;
  // Safe to fail over: a grant whose answer was lost leaves an unused lease
  // that simply expires.
  auto st = endpoints_->call("LeaseGrant", effective(timeout), true, [&](auto& ep, auto& ctx) {
    resp.Clear();
    return ep.lease->LeaseGrant(&ctx, req, &resp);
  });
  if (!st) {
    return st.error();
  }
  if (!resp.error().empty()) {
    return make_error(EtcdErrc::kInternal, "etcd LeaseGrant: " + resp.error());
  }
  return LeaseGrant{resp.id(), resp.ttl()};
}

EtcdStatus EtcdClient::lease_revoke(int64_t lease_id, Timeout timeout) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease_id);
  etcdserverpb::LeaseRevokeResponse resp;
  // Idempotent, so it fails over like a read.
  return endpoints_->call("LeaseRevoke", effective(timeout), true,
                          [&](auto& ep, auto& ctx) { return ep.lease->LeaseRevoke(&ctx, req, &resp); });
}

EtcdResult<LeaseTtl> EtcdClient::lease_time_to_live(int64_t lease_id, bool with_keys, Timeout timeout) {
  etcdserverpb::LeaseTimeToLiveRequest req;
  req.set_id(lease_id);
  req.set_keys(with_keys);
  etcdserverpb::LeaseTimeToLiveResponse resp;
  auto st = endpoints_->call("LeaseTimeToLive", effective(timeout), true, [&](auto& ep, auto& ctx) {
    resp.Clear();
    return ep.lease->LeaseTimeToLive(&ctx, req, &resp);
  });
  if (!st) {
    return st.error();
  }
  LeaseTtl out;
  out.id = resp.id();
  out.ttl_seconds = resp.ttl();
  out.granted_seconds = resp.grantedttl();
  for (const auto& k : resp.keys()) {
    out.keys.push_back(k);
  }
  return out;
}

EtcdResult<ServerStatus> EtcdClient::status(Timeout timeout) {
  etcdserverpb::StatusRequest req;
  etcdserverpb::StatusResponse resp;
  auto st = endpoints_->call("Status", effective(timeout), true, [&](auto& ep, auto& ctx) {
    resp.Clear();
    return ep.maintenance->Status(&ctx, req, &resp);
  });
  if (!st) {
    return st.error();
  }
  ServerStatus out;
  out.version = resp.version();
  out.db_size = resp.dbsize();
  out.leader = resp.leader();
  out.member_id = resp.header().member_id();
  out.revision = resp.header().revision();
  return out;
}

}  // namespace cgn::etcd
