#include "state/gossip/udp_node.h"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <charconv>
#include <map>

#include "core/host_port.h"

namespace cgn::gossip {

namespace asio = boost::asio;
using asio::ip::udp;

namespace {

Nanos now_ns() {
  return SteadyClock::instance().now();
}

PeerAddr to_peer(const udp::endpoint& ep) {
  PeerAddr a;
  a.port = ep.port();
  const auto addr = ep.address();
  if (addr.is_v4()) {
    a.family = 4;
    const auto b = addr.to_v4().to_bytes();
    std::copy(b.begin(), b.end(), a.bytes.begin());
  } else {
    const auto v6 = addr.to_v6();
    if (v6.is_v4_mapped()) {
      return to_peer(udp::endpoint(asio::ip::make_address_v4(asio::ip::v4_mapped, v6), ep.port()));
    }
    a.family = 6;
    const auto b = v6.to_bytes();
    std::copy(b.begin(), b.end(), a.bytes.begin());
  }
  return a;
}

udp::endpoint to_endpoint(const PeerAddr& a) {
  if (a.family == 4) {
    asio::ip::address_v4::bytes_type b;
    std::copy_n(a.bytes.begin(), 4, b.begin());
    return {asio::ip::address_v4(b), a.port};
  }
  asio::ip::address_v6::bytes_type b;
  std::copy_n(a.bytes.begin(), 16, b.begin());
  return {asio::ip::address_v6(b), a.port};
}

}  // namespace

Result<std::pair<std::string, uint16_t>, NodeError> split_host_port(std::string_view s) {
  if (auto hp = cgn::split_host_port(s)) {
    return std::move(*hp);
  }
  return make_error(NodeError::kConfig, "address \"" + std::string(s) + "\" is not HOST:PORT");
}

GossipNode::GossipNode(NodeOptions options) : options_(std::move(options)), log_(log::get("state.gossip")) {}

GossipNode::~GossipNode() {
  stop();
}

Result<std::unique_ptr<GossipNode>, NodeError> GossipNode::create(NodeOptions options) {
  auto& c = options.core;
  if (c.name.empty() || c.name.size() > kMaxName) {
    return make_error(NodeError::kConfig, "gossip member name must be 1 to 64 bytes");
  }
  if (c.cluster_id.empty() || c.cluster_id.size() > kMaxName) {
    return make_error(NodeError::kConfig, "[state.gossip] cluster_id must be 1 to 64 bytes");
  }
  if (c.max_datagram < 512 || c.max_datagram > kMaxDatagram) {
    return make_error(NodeError::kConfig, "gossip datagram limit must be 512 to 1400 bytes");
  }
  auto listen = split_host_port(options.listen);
  if (!listen) {
    return make_error(NodeError::kConfig, "[state.gossip] listen: " + listen.error().message);
  }
  for (const auto& s : options.seeds) {
    if (auto hp = split_host_port(s); !hp) {
      return make_error(NodeError::kConfig, "[state.gossip] seeds: " + hp.error().message);
    }
  }
  return std::unique_ptr<GossipNode>(new GossipNode(std::move(options)));
}

Result<uint16_t, NodeError> GossipNode::start() {
  if (started_) {
    return port_;
  }
  auto hp = split_host_port(options_.listen);
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(hp->first, ec);
  if (ec) {
    return make_error(NodeError::kConfig,
                      "[state.gossip] listen host \"" + hp->first + "\" is not an IP address");
  }
  udp::endpoint ep(addr, hp->second);
  socket_.open(ep.protocol(), ec);
  if (!ec && addr.is_v6()) {
    socket_.set_option(asio::ip::v6_only(false), ec);
    ec.clear();
  }
  if (!ec) {
    socket_.bind(ep, ec);
  }
  if (ec) {
    return make_error(NodeError::kStart,
                      "cannot bind gossip socket " + options_.listen + ": " + ec.message());
  }
  port_ = socket_.local_endpoint().port();
  if (!addr.is_unspecified()) {
    options_.core.advertise = to_peer(udp::endpoint(addr, port_));
  }
  core_ = std::make_unique<GossipCore>(options_.core, now_ns());
  started_ = true;
  resolve_seeds();
  receive_next();
  arm_timer();
  thread_ = std::thread([this] { ctx_.run(); });
  CGN_LOG_INFO(log_, "gossip member started", log::kv("member", options_.core.name),
               log::kv("generation", options_.core.generation), log::kv("port", port_),
               log::kv("cluster", options_.core.cluster_id), log::kv("seeds", options_.seeds.size()),
               log::kv("hmac", !options_.core.hmac_key.empty()));
  return port_;
}

void GossipNode::stop() {
  if (!started_ || stopped_) {
    return;
  }
  stopped_ = true;
  asio::post(ctx_, [this] {
    boost::system::error_code ec;
    timer_.cancel();
    socket_.close(ec);
  });
  ctx_.stop();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void GossipNode::send(std::vector<Outgoing> out) {
  for (auto& o : out) {
    if (!o.to.known()) {
      continue;
    }
    boost::system::error_code ec;
    // Datagrams are small and the socket is non-blocking in practice; a full buffer drops the
    // datagram, which gossip tolerates.
    socket_.send_to(asio::buffer(o.bytes), to_endpoint(o.to), 0, ec);
  }
}

void GossipNode::receive_next() {
  socket_.async_receive_from(asio::buffer(buf_), from_, [this](boost::system::error_code ec, size_t n) {
    if (ec == asio::error::operation_aborted || !socket_.is_open()) {
      return;
    }
    if (!ec) {
      std::vector<Outgoing> out;
      {
        std::lock_guard lock(mu_);
        const uint64_t rejected = core_->stats().rejected_total();
        out = core_->receive(std::span<const uint8_t>(buf_.data(), n), to_peer(from_), now_ns());
        if (core_->stats().rejected_total() != rejected) {
          CGN_LOG_DEBUG(log_, "gossip packet rejected", log::kv("from", to_peer(from_).to_string()),
                        log::kv("bytes", n));
        }
      }
      send(std::move(out));
    }
    receive_next();
  });
}

void GossipNode::arm_timer() {
  timer_.expires_after(std::chrono::nanoseconds(options_.core.gossip_interval));
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) {
      return;
    }
    if (now_ns() - last_resolve_ >= options_.seed_refresh) {
      resolve_seeds();
    }
    std::vector<Outgoing> out;
    {
      std::lock_guard lock(mu_);
      out = core_->tick(now_ns());
    }
    send(std::move(out));
    arm_timer();
  });
}

void GossipNode::resolve_seeds() {
  last_resolve_ = now_ns();
  if (options_.seeds.empty()) {
    return;
  }
  // Literal addresses need no lookup; names are resolved asynchronously (re-resolved every
  // seed_refresh, so a seed that moves is found again).
  auto results = std::make_shared<std::map<std::string, std::vector<PeerAddr>>>();
  auto pending = std::make_shared<size_t>(options_.seeds.size());
  auto resolver = std::make_shared<udp::resolver>(ctx_);
  auto finish = [this, results, pending, resolver] {
    if (--*pending != 0) {
      return;
    }
    std::vector<PeerAddr> all;
    for (auto& [name, addrs] : *results) {
      all.insert(all.end(), addrs.begin(), addrs.end());
    }
    std::lock_guard lock(mu_);
    if (!all.empty() || seeds_.empty()) {
      seeds_ = all;
      core_->set_seeds(all);
    }
  };
  for (const auto& s : options_.seeds) {
    auto hp = split_host_port(s);
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(hp->first, ec);
    if (!ec) {
      (*results)[s].push_back(to_peer(udp::endpoint(addr, hp->second)));
      finish();
      continue;
    }
    resolver->async_resolve(
        hp->first, std::to_string(hp->second),
        [this, s, results, finish](boost::system::error_code rec, udp::resolver::results_type r) {
          if (rec) {
            CGN_LOG_WARN(log_, "cannot resolve gossip seed", log::kv("seed", s),
                         log::kv("error", rec.message()));
          } else {
            for (const auto& e : r) {
              (*results)[s].push_back(to_peer(e.endpoint()));
            }
          }
          finish();
        });
  }
}

bool GossipNode::set(const std::string& key, const std::string& value) {
  std::lock_guard lock(mu_);
  return core_ && core_->set(key, value, now_ns());
}

bool GossipNode::remove(const std::string& key) {
  std::lock_guard lock(mu_);
  return core_ && core_->remove(key, now_ns());
}

std::vector<MemberView> GossipNode::members() const {
  std::lock_guard lock(mu_);
  return core_ ? core_->members(now_ns()) : std::vector<MemberView>{};
}

CoreStats GossipNode::stats() const {
  std::lock_guard lock(mu_);
  return core_ ? core_->stats() : CoreStats{};
}

}  // namespace cgn::gossip
