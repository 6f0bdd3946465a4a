#include "state/static/agent_health_client.h"

#include <grpcpp/grpcpp.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "cognitora/v1/agent.grpc.pb.h"
#include "core/tls/grpc_tls.h"

// GCC 12 with sanitizers: false -Wmismatched-new-delete on Asio coroutine frames (see
// static_store.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace cgn::state {

namespace asio = boost::asio;
namespace pb = cognitora::v1;

struct AgentHealthClients::Link {
  std::string target;
  std::unique_ptr<pb::Agent::Stub> stub;  // null when the credentials could not be built
  std::string error;                      // why not
};

// Shared by the awaiting coroutine and grpc++'s callback.
struct AgentHealthClients::Call {
  grpc::ClientContext ctx;
  pb::HealthRequest req;
  pb::HealthResponse resp;
  grpc::Status status;
};

namespace {
// Lives in the coroutine frame; the posted completion reaches it only while the frame exists
// (weak_ptr), and both run on the io_context's thread.
struct Waiter {
  explicit Waiter(asio::io_context& ctx) : timer(ctx, asio::steady_timer::time_point::max()) {}
  asio::steady_timer timer;
  bool done = false;
};
}  // namespace

AgentHealthClients::AgentHealthClients(asio::io_context& ctx, cluster::GrpcSecurity security)
    : ctx_(ctx), security_(std::move(security)) {}

AgentHealthClients::~AgentHealthClients() {
  shutdown();
}

void AgentHealthClients::add(size_t key, const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(cluster::kMaxHealthResponseBytes);
  auto link = std::make_unique<Link>();
  link->target = target;
  if (auto creds = tls::channel_credentials(security_.tls)) {
    link->stub = pb::Agent::NewStub(grpc::CreateCustomChannel(target, *creds, args));
  } else {
    link->error = creds.error().message;
  }
  links_[key] = std::move(link);
}

asio::awaitable<Result<cluster::AgentHealth, std::string>> AgentHealthClients::health(
    size_t key, std::chrono::milliseconds timeout) {
  auto it = links_.find(key);
  if (it == links_.end()) {
    co_return make_error(std::string("config"), "no agent link for this node");
  }
  Link& link = *it->second;
  if (!link.stub) {
    co_return make_error(std::string("config"), "Agent.Health on " + link.target + ": " + link.error);
  }
  auto call = std::make_shared<Call>();
  call->ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  if (security_.token.configured()) {
    call->ctx.AddMetadata(auth::kClusterTokenMetadata, std::string(security_.token.presented()));
  }
  auto waiter = std::make_shared<Waiter>(ctx_);
  {
    std::lock_guard lock(mu_);
    if (!open_) {
      co_return make_error(std::string("stopped"), "store stopped");
    }
    inflight_.insert(call);
  }
  std::weak_ptr<Waiter> weak = waiter;
  link.stub->async()->Health(&call->ctx, &call->req, &call->resp, [this, call, weak](grpc::Status st) {
    call->status = std::move(st);
    std::lock_guard lock(mu_);
    if (open_) {
      asio::post(ctx_, [weak] {
        if (auto w = weak.lock()) {
          w->done = true;
          w->timer.cancel();
        }
      });
    }
    inflight_.erase(call);
    cv_.notify_all();
  });
  while (!waiter->done) {
    auto [ec] = co_await waiter->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;
    if (waiter->done) {
      break;
    }
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) {
      call->ctx.TryCancel();
      co_return make_error(std::string("cancelled"), "cancelled");
    }
  }
  if (!call->status.ok()) {
    co_return make_error(std::string("call"),
                         "Agent.Health on " + link.target + ": " + call->status.error_message());
  }
  auto h = cluster::from_proto(call->resp);
  if (!h) {
    co_return make_error(std::string("answer"), "Agent.Health on " + link.target + ": " + h.error().message);
  }
  co_return std::move(*h);
}

void AgentHealthClients::shutdown() {
  std::unique_lock lock(mu_);
  open_ = false;
  for (const auto& c : inflight_) {
    c->ctx.TryCancel();
  }
  cv_.wait(lock, [&] { return inflight_.empty(); });
}

}  // namespace cgn::state
