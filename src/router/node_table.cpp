#include "router/node_table.h"

#include "router/disagg.h"

namespace cgn::router {

NodeTable::NodeTable(const Clock& clock, routing::RoutingPolicy policy, routing::IndexConfig index,
                     uint64_t seed)
    : core_(clock, std::move(policy), std::move(index), seed) {}

NodeTable::ModelInfo NodeTable::lookup(std::string_view model) const {
  ModelInfo m;
  std::lock_guard lock(mu_);
  for (const auto& [name, info] : nodes_) {
    const auto* st = core_.node(info.index);
    if (st != nullptr && st->serves(model)) {
      m.served = true;
      m.disaggregated = m.disaggregated || st->role != routing::NodeRole::kBoth;
    }
  }
  return m;
}

std::set<std::string> NodeTable::healthy_models() const {
  std::set<std::string> ids;
  std::lock_guard lock(mu_);
  for (const auto& [name, info] : nodes_) {
    const auto* st = core_.node(info.index);
    if (st != nullptr && st->health == routing::Health::kHealthy && !st->cordoned) {
      ids.insert(st->models.begin(), st->models.end());
    }
  }
  return ids;
}

Result<NodeTable::Ranked, routing::RouteError> NodeTable::rank(const routing::RouteRequest& rr, size_t max,
                                                               bool decode_order) {
  Ranked out;
  const auto t0 = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  auto decided = core_.decide(rr);
  out.decide_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!decided.ok()) {
    return make_error(decided.error().code, decided.error().message);
  }
  out.decision = std::move(*decided);
  if (decode_order) {
    routing::order_for_decode(out.decision.ranked);
  }
  for (const auto& c : out.decision.ranked) {
    if (out.targets.size() >= max) {
      break;
    }
    const auto* st = core_.node(c.node);
    if (st == nullptr) {
      continue;
    }
    if (auto it = nodes_.find(st->id); it != nodes_.end()) {
      out.targets.push_back(Target{it->first, it->second.endpoint, c.node});
    }
  }
  return out;
}

routing::DispatchTicket NodeTable::dispatch(const Target& t, const routing::RouteRequest& rr) {
  if (t.peer()) {
    return {};
  }
  std::lock_guard lock(mu_);
  return core_.record_dispatch(t.index, rr);
}

void NodeTable::first_token(routing::DispatchTicket& ticket) {
  if (ticket.node == routing::kNoNode) {
    return;
  }
  std::lock_guard lock(mu_);
  core_.record_first_token(ticket);
}

void NodeTable::complete(routing::DispatchTicket& ticket) {
  finish(ticket, false);
}

void NodeTable::finish(routing::DispatchTicket& ticket, bool answered) {
  if (ticket.node == routing::kNoNode) {
    return;
  }
  std::lock_guard lock(mu_);
  if (answered) {
    core_.record_first_token(ticket);
  }
  core_.record_completion(ticket);
}

void NodeTable::mark_refused(std::string_view node) {
  {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(node);
    if (it == nodes_.end()) {
      return;  // a peer, or a node removed meanwhile
    }
    routing::NodeUpdate u;
    u.health = routing::Health::kUnhealthy;
    (void)core_.upsert_node(node, u, routing::UpdateSource::kScrape);
    it->second.refused_at = std::chrono::steady_clock::now();
  }
  notify_health();
}

void NodeTable::set_health_listener(std::function<void()> f) {
  std::lock_guard lock(listener_mu_);
  health_listener_ = std::move(f);
}

void NodeTable::notify_health() const {
  std::lock_guard lock(listener_mu_);
  if (health_listener_) {
    health_listener_();
  }
}

std::vector<std::string> NodeTable::readmit_refused(std::chrono::milliseconds retry) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> back;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, info] : nodes_) {
      if (!info.refused_at || now - *info.refused_at < retry) {
        continue;
      }
      info.refused_at.reset();
      const auto* st = core_.node(info.index);
      // Only a verdict of our own is lifted: a poll or a record that says unhealthy stands.
      if (st != nullptr && st->health == routing::Health::kUnhealthy &&
          st->last_source == routing::UpdateSource::kScrape) {
        routing::NodeUpdate u;
        u.health = routing::Health::kHealthy;
        (void)core_.upsert_node(name, u, routing::UpdateSource::kScrape);
        back.push_back(name);
      }
    }
  }
  if (!back.empty()) {
    notify_health();
  }
  return back;
}

size_t NodeTable::healthy_nodes() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [name, info] : nodes_) {
    const auto* st = core_.node(info.index);
    n += static_cast<size_t>(st != nullptr && st->health == routing::Health::kHealthy &&
                             !core_.stale(info.index));
  }
  return n;
}

size_t NodeTable::stale_nodes() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [name, info] : nodes_) {
    n += static_cast<size_t>(core_.stale(info.index));
  }
  return n;
}

size_t NodeTable::known_nodes() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

uint64_t NodeTable::inflight(std::string_view node) const {
  std::lock_guard lock(mu_);
  const auto idx = core_.find_node(node);
  return idx == routing::kNoNode ? 0 : core_.inflight_requests(idx);
}

size_t NodeTable::index_entries() const {
  std::lock_guard lock(mu_);
  return core_.index().entries();
}

}  // namespace cgn::router
