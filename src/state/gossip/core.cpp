#include "state/gossip/core.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_set>

namespace cgn::gossip {

namespace {

// Visits the elements of `v` in uniformly random order (Fisher-Yates drawn one step at a time)
// until `visit` returns false: picking k of N costs k draws, not N.
template <class T, class Rng, class F>
void visit_shuffled(std::vector<T>& v, Rng& rng, F visit) {
  for (size_t i = 0; i < v.size(); ++i) {
    std::swap(v[i], v[std::uniform_int_distribution<size_t>(i, v.size() - 1)(rng)]);
    if (!visit(v[i])) {
      return;
    }
  }
}

// The smallest digest entry: a 1-byte name, the generation, three 1-byte varints.
constexpr size_t kMinDigestEntry = 1 + 1 + 8 + 3;
// A sampled digest stops after this many members in a row did not fit (names differ in length,
// so a later one might, but the datagram is full for practical purposes).
constexpr size_t kMaxDigestMisfits = 8;

}  // namespace

GossipCore::GossipCore(CoreOptions options, Nanos now) : options_(std::move(options)) {
  const uint64_t seed = options_.seed != 0 ? options_.seed
                                           : std::hash<std::string>{}(options_.name) ^
                                                 (options_.generation * 0x9E3779B97F4A7C15ULL);
  rng_.seed(seed);
  Member m;
  m.name = options_.name;
  m.generation = options_.generation;
  m.addr = options_.advertise;
  m.addr_direct = true;
  m.heartbeat = 1;
  m.fd = PhiDetector(options_.phi);
  m.fd.heartbeat(now);
  self_ = add_member(std::move(m));
}

GossipCore::Member* GossipCore::find(std::string_view name) {
  auto it = members_.find(name);
  return it == members_.end() ? nullptr : &it->second;
}

const GossipCore::Member* GossipCore::find(std::string_view name) const {
  auto it = members_.find(name);
  return it == members_.end() ? nullptr : &it->second;
}

GossipCore::Member* GossipCore::add_member(Member m) {
  std::string key = m.name;
  auto it = members_.emplace(std::move(key), std::move(m)).first;
  Member* p = &it->second;
  order_.push_back(p);
  if (p->name != options_.name) {
    auto& list = p->live ? live_ : dead_;
    p->list_index = list.size();
    list.push_back(p);
  }
  return p;
}

void GossipCore::set_live(Member& m, bool live) {
  if (m.live == live || &m == self_) {
    m.live = live;
    return;
  }
  auto& from = m.live ? live_ : dead_;
  auto& to = live ? live_ : dead_;
  from[m.list_index] = from.back();
  from[m.list_index]->list_index = m.list_index;
  from.pop_back();
  m.list_index = to.size();
  to.push_back(&m);
  m.live = live;
}

void GossipCore::make_hot(Member& m) {
  if (!m.hot && &m != self_) {
    m.hot = true;
    hot_.push_back(&m);
  }
}

bool GossipCore::set(const std::string& key, const std::string& value, Nanos now) {
  (void)now;
  auto& s = self();
  if (key.empty() || key.size() > kMaxName || value.size() > kMaxValue) {
    return false;
  }
  auto it = s.kvs.find(key);
  if (it == s.kvs.end() && s.kvs.size() >= options_.max_keys) {
    return false;
  }
  if (it != s.kvs.end() && !it->second.deleted && it->second.value == value) {
    return true;  // unchanged: no new version
  }
  KvEntry e;
  e.value = value;
  e.version = ++s.max_version;
  s.kvs[key] = std::move(e);
  mark_fresh(s);
  return true;
}

bool GossipCore::remove(const std::string& key, Nanos now) {
  auto& s = self();
  auto it = s.kvs.find(key);
  if (it == s.kvs.end() || it->second.deleted) {
    return false;
  }
  it->second.value.clear();
  it->second.deleted = true;
  it->second.deleted_at = now;
  it->second.version = ++s.max_version;
  mark_fresh(s);
  return true;
}

size_t GossipCore::retransmit_limit() const {
  if (options_.retransmit != 0) {
    return options_.retransmit;
  }
  return 3 * static_cast<size_t>(std::ceil(std::log10(static_cast<double>(members_.size()) + 1.0)));
}

void GossipCore::mark_fresh(Member& m) {
  m.retransmit_left = retransmit_limit();
  make_hot(m);
}

GossipCore::Member* GossipCore::learn(const std::string& name, uint64_t generation, Nanos now) {
  if (name == options_.name) {
    return nullptr;
  }
  if (auto g = gced_.find(name); g != gced_.end() && g->second >= generation) {
    return nullptr;
  }
  if (Member* known = find(name); known != nullptr) {
    if (generation < known->generation) {
      return nullptr;
    }
    if (generation > known->generation) {
      supersede(*known, generation, now);
    }
    return known;
  }
  if (members_.size() >= options_.max_members) {
    return nullptr;
  }
  Member m;
  m.name = name;
  m.generation = generation;
  m.fd = PhiDetector(options_.phi);
  m.fd.heartbeat(now);
  return add_member(std::move(m));
}

void GossipCore::supersede(Member& m, uint64_t generation, Nanos now) {
  m.generation = generation;
  m.addr_direct = false;
  m.heartbeat = 0;
  m.max_version = 0;
  m.seen_max_version = 0;
  m.last_gc_version = 0;
  m.kvs.clear();
  m.fd.reset();
  m.fd.heartbeat(now);
  set_live(m, true);
  m.retransmit_left = 0;
  ++stats_.superseded;
}

void GossipCore::observe_heartbeat(Member& m, uint64_t heartbeat, Nanos now) {
  if (heartbeat <= m.heartbeat) {
    return;
  }
  m.heartbeat = heartbeat;
  if (!m.live) {
    set_live(m, true);  // it was alive after we declared it dead
    m.fd.reset();
  }
  m.fd.heartbeat(now);
}

size_t GossipCore::header_bytes() const {
  return header_size(options_.cluster_id, options_.name, !options_.hmac_key.empty());
}

Message GossipCore::blank(MessageType type) const {
  Message m;
  m.type = type;
  m.cluster_id = options_.cluster_id;
  m.sender = options_.name;
  m.sender_generation = options_.generation;
  return m;
}

std::vector<uint8_t> GossipCore::seal(const Message& m) {
  auto bytes = encode(m, options_.hmac_key);
  ++stats_.packets_out;
  stats_.bytes_out += bytes.size();
  return bytes;
}

Digest GossipCore::make_digest(size_t budget) {
  Digest d;
  // Self first, then members we know to be behind on (pull), then fresh changes (push), then a
  // random sample of the rest.
  ++mark_epoch_;
  self_->mark = mark_epoch_;
  stale_.clear();
  fresh_.clear();
  for (size_t i = hot_.size(); i-- > 0;) {
    Member* m = hot_[i];
    const bool stale = m->seen_max_version > m->max_version;
    if (!stale && m->retransmit_left == 0) {
      m->hot = false;
      hot_[i] = hot_.back();
      hot_.pop_back();
      continue;
    }
    if (m->live) {
      m->mark = mark_epoch_;
      (stale ? stale_ : fresh_).push_back(m);
    }
  }
  size_t used = kDigestOverhead;
  size_t misfits = 0;
  auto add = [&](Member& m) {
    DigestEntry e{m.name, m.generation, m.heartbeat, m.max_version, m.last_gc_version};
    const size_t n = digest_entry_size(e);
    if (used + n > budget || d.entries.size() >= 65535) {
      ++misfits;
      return;
    }
    misfits = 0;
    used += n;
    d.entries.push_back(std::move(e));
    if (m.retransmit_left > 0) {
      --m.retransmit_left;
    }
  };
  auto full = [&] {
    return used + kMinDigestEntry > budget || misfits >= kMaxDigestMisfits || d.entries.size() >= 65535;
  };
  add(self());
  for (auto* list : {&stale_, &fresh_}) {
    visit_shuffled(*list, rng_, [&](Member* m) {
      add(*m);
      return !full();
    });
  }
  // The rest: a copy of the live list, visited in random order; members already listed (hot
  // ones) are skipped without a draw counting against the budget.
  if (!full()) {
    rest_.assign(live_.begin(), live_.end());
    visit_shuffled(rest_, rng_, [&](Member* m) {
      if (m->mark != mark_epoch_) {
        add(*m);
      }
      return !full();
    });
  }
  d.complete = d.entries.size() == live_.size() + 1;
  if (!d.complete) {
    ++stats_.digests_sampled;
  }
  return d;
}

void GossipCore::apply_digest(const Digest& d, Nanos now) {
  for (const auto& e : d.entries) {
    if (e.name == options_.name) {
      if (e.generation > options_.generation) {
        ++stats_.name_conflicts;
      }
      continue;
    }
    Member* m = learn(e.name, e.generation, now);
    if (m == nullptr || m->generation != e.generation) {
      continue;
    }
    observe_heartbeat(*m, e.heartbeat, now);
    m->seen_max_version = std::max(m->seen_max_version, e.max_version);
    if (m->seen_max_version > m->max_version) {
      make_hot(*m);
    }
  }
}

std::vector<NodeDelta> GossipCore::make_delta(const Digest& peer, size_t budget) {
  struct Candidate {
    Member* m;
    uint64_t floor;
    bool reset;
  };
  std::vector<Candidate> cands;
  for (const auto& e : peer.entries) {
    Member* found = find(e.name);
    if (found == nullptr) {
      continue;
    }
    Member& m = *found;
    const bool is_self = e.name == options_.name;
    if ((!m.live && !is_self) || m.generation < e.generation) {
      continue;
    }
    if (m.generation > e.generation) {
      cands.push_back({&m, 0, true});
    } else if (e.last_gc_version < m.last_gc_version && e.max_version < m.last_gc_version) {
      cands.push_back({&m, 0, true});
    } else if (m.max_version > e.max_version || m.last_gc_version > e.last_gc_version) {
      cands.push_back({&m, e.max_version, false});
    }
  }
  if (peer.complete) {
    std::unordered_set<std::string_view> listed;
    for (const auto& e : peer.entries) {
      listed.insert(e.name);
    }
    for (Member* m : order_) {
      if (!listed.contains(m->name) && (m->live || m == self_) && (m->max_version > 0 || m->addr.known())) {
        cands.push_back({m, 0, false});
      }
    }
  }
  // Our own state first; the rest in random order so that no member starves (quickwit-oss/chitchat
  // issue 119).
  std::shuffle(cands.begin(), cands.end(), rng_);
  std::stable_partition(cands.begin(), cands.end(),
                        [&](const Candidate& c) { return c.m->name == options_.name; });

  std::vector<NodeDelta> out;
  size_t used = kDeltaOverhead;
  bool cut = false;
  for (const auto& c : cands) {
    Member& m = *c.m;
    NodeDelta nd;
    nd.name = m.name;
    nd.generation = m.generation;
    nd.addr = m.addr;
    nd.heartbeat = m.heartbeat;
    nd.last_gc_version = m.last_gc_version;
    nd.floor = c.floor;
    nd.max_version = m.max_version;
    nd.reset = c.reset;
    std::vector<const std::pair<const std::string, KvEntry>*> kvs;
    for (const auto& kv : m.kvs) {
      if (kv.second.version > c.floor) {
        kvs.push_back(&kv);
      }
    }
    std::sort(kvs.begin(), kvs.end(), [](auto* a, auto* b) { return a->second.version < b->second.version; });
    size_t size = node_delta_header_size(nd);
    if (used + size > budget) {
      cut = true;
      continue;
    }
    for (auto* kv : kvs) {
      KvUpdate u{kv->first, kv->second.version, kv->second.deleted ? KvStatus::kDeleted : KvStatus::kSet,
                 kv->second.deleted ? std::string() : kv->second.value};
      const size_t n = kv_size(u);
      if (used + size + n > budget || nd.kvs.size() >= 65535) {
        break;
      }
      size += n;
      nd.kvs.push_back(std::move(u));
    }
    nd.complete = nd.kvs.size() == kvs.size();
    if (!nd.complete) {
      cut = true;
      if (nd.kvs.empty()) {
        continue;  // a header alone would tell the peer nothing
      }
    }
    used += size;
    out.push_back(std::move(nd));
  }
  if (cut) {
    ++stats_.deltas_cut;
  }
  return out;
}

void GossipCore::apply_delta(const std::vector<NodeDelta>& delta, Nanos now) {
  for (const auto& nd : delta) {
    if (nd.name == options_.name) {
      if (nd.generation > options_.generation) {
        ++stats_.name_conflicts;
      }
      continue;
    }
    Member* m = learn(nd.name, nd.generation, now);
    if (m == nullptr || m->generation != nd.generation) {
      continue;
    }
    if (!m->addr_direct && nd.addr.known()) {
      m->addr = nd.addr;
    }
    if (nd.reset && nd.last_gc_version > m->last_gc_version) {
      m->kvs.clear();
      m->max_version = 0;
      m->last_gc_version = nd.last_gc_version;
    }
    bool applied_all = false;
    bool changed = false;
    if (nd.floor <= m->max_version) {
      if (nd.last_gc_version > m->last_gc_version) {
        std::erase_if(m->kvs, [&](const auto& kv) {
          return kv.second.deleted && kv.second.version <= nd.last_gc_version;
        });
        m->last_gc_version = nd.last_gc_version;
      }
      applied_all = true;
      for (const auto& kv : nd.kvs) {
        if (kv.version <= m->max_version) {
          continue;
        }
        auto it = m->kvs.find(kv.key);
        if (it == m->kvs.end() && m->kvs.size() >= options_.max_keys) {
          applied_all = false;
          break;
        }
        KvEntry& e = m->kvs[kv.key];
        e.value = kv.value;
        e.version = kv.version;
        e.deleted = kv.status == KvStatus::kDeleted;
        e.deleted_at = now;
        m->max_version = kv.version;
        changed = true;
      }
      if (applied_all && nd.complete && nd.max_version > m->max_version) {
        m->max_version = nd.max_version;
        changed = true;
      }
    }
    if (changed) {
      mark_fresh(*m);
    }
    m->seen_max_version = std::max(m->seen_max_version, nd.max_version);
    if (m->seen_max_version > m->max_version) {
      make_hot(*m);
    }
    observe_heartbeat(*m, nd.heartbeat, now);
  }
}

void GossipCore::detect(Nanos now) {
  // Backwards: set_live moves the last live member into the slot of the one leaving.
  for (size_t i = live_.size(); i-- > 0;) {
    Member* m = live_[i];
    if (!m->fd.available(now)) {
      set_live(*m, false);
      m->dead_since = now;
      ++stats_.members_dead;
    }
  }
}

void GossipCore::collect(Nanos now) {
  auto& s = self();
  for (auto it = s.kvs.begin(); it != s.kvs.end();) {
    if (it->second.deleted && now - it->second.deleted_at >= options_.tombstone_grace) {
      s.last_gc_version = std::max(s.last_gc_version, it->second.version);
      it = s.kvs.erase(it);
    } else {
      ++it;
    }
  }
  for (size_t i = dead_.size(); i-- > 0;) {
    Member& m = *dead_[i];
    if (now - m.dead_since >= options_.dead_gc) {
      auto& g = gced_[m.name];
      g = std::max(g, m.generation);
      gc_order_.emplace_back(m.name, m.generation);
      while (gc_order_.size() > options_.gc_history) {
        auto [name, gen] = gc_order_.front();
        gc_order_.pop_front();
        if (auto f = gced_.find(name); f != gced_.end() && f->second == gen) {
          gced_.erase(f);
        }
      }
      ++stats_.members_gced;
      const std::string name = m.name;
      std::erase(order_, &m);
      if (m.hot) {
        std::erase(hot_, &m);
      }
      dead_[i] = dead_.back();
      dead_[i]->list_index = i;
      dead_.pop_back();
      members_.erase(name);
    }
  }
}

std::vector<Outgoing> GossipCore::tick(Nanos now) {
  ++self().heartbeat;
  self().fd.heartbeat(now);
  detect(now);
  collect(now);

  // `fanout` random live peers with a known address (a copy of the live list, visited in random
  // order until enough are found).
  std::vector<PeerAddr> targets;
  if (options_.fanout > 0) {
    rest_.assign(live_.begin(), live_.end());
    visit_shuffled(rest_, rng_, [&](const Member* m) {
      if (m->addr.known()) {
        targets.push_back(m->addr);
      }
      return targets.size() < options_.fanout;
    });
  }
  const bool no_live_peer = targets.empty();
  const double live = static_cast<double>(live_.size());
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  if (!dead_.empty() && coin(rng_) < static_cast<double>(dead_.size()) / (live + 1)) {
    const Member* d = dead_[std::uniform_int_distribution<size_t>(0, dead_.size() - 1)(rng_)];
    if (d->addr.known()) {
      targets.push_back(d->addr);
    }
  }
  // A seed when we know no live peer, or now and then (as often as seeds are rare among the live)
  // so that partitions heal through them.
  if (!seeds_.empty() && (no_live_peer || coin(rng_) < static_cast<double>(seeds_.size()) / (live + 1))) {
    const PeerAddr& s = seeds_[std::uniform_int_distribution<size_t>(0, seeds_.size() - 1)(rng_)];
    if (std::find(targets.begin(), targets.end(), s) == targets.end() && s != options_.advertise) {
      targets.push_back(s);
    }
  }
  std::vector<Outgoing> out;
  for (const auto& t : targets) {
    Message syn = blank(MessageType::kSyn);
    syn.digest = make_digest(options_.max_datagram - header_bytes());
    out.push_back({t, seal(syn)});
  }
  return out;
}

std::vector<Outgoing> GossipCore::receive(std::span<const uint8_t> bytes, const PeerAddr& from, Nanos now) {
  ++stats_.packets_in;
  stats_.bytes_in += bytes.size();
  auto decoded =
      decode(bytes, options_.cluster_id, options_.hmac_key, options_.max_datagram, options_.rotation_key);
  if (!decoded) {
    ++stats_.rejected[static_cast<size_t>(decoded.error().code)];
    return {};
  }
  Message& msg = *decoded;
  if (msg.sender == options_.name) {
    if (msg.sender_generation != options_.generation) {
      ++stats_.name_conflicts;
    }
    return {};
  }
  if (Member* s = learn(msg.sender, msg.sender_generation, now);
      s != nullptr && s->generation == msg.sender_generation) {
    s->addr = from;
    s->addr_direct = true;
  }
  const size_t room = options_.max_datagram - header_bytes();
  std::vector<Outgoing> out;
  switch (msg.type) {
    case MessageType::kSyn: {
      apply_digest(msg.digest, now);
      Message reply = blank(MessageType::kSynAck);
      // Deltas first (what the peer asked for), leaving room for a digest of our own: a quarter of
      // the datagram, or all it needs.
      const size_t digest_room = std::min(room / 4, kDigestOverhead + members_.size() * (kMaxName / 4 + 12));
      reply.delta = make_delta(msg.digest, room - digest_room - kDigestOverhead);
      size_t used = kDeltaOverhead;
      for (const auto& nd : reply.delta) {
        used += node_delta_header_size(nd);
        for (const auto& kv : nd.kvs) {
          used += kv_size(kv);
        }
      }
      reply.digest = make_digest(room - used);
      out.push_back({from, seal(reply)});
      break;
    }
    case MessageType::kSynAck: {
      apply_delta(msg.delta, now);
      apply_digest(msg.digest, now);
      Message ack = blank(MessageType::kAck);
      ack.delta = make_delta(msg.digest, room - kDeltaOverhead);
      if (!ack.delta.empty()) {
        out.push_back({from, seal(ack)});
      }
      break;
    }
    case MessageType::kAck:
      apply_delta(msg.delta, now);
      break;
  }
  return out;
}

std::vector<MemberView> GossipCore::members(Nanos now) const {
  std::vector<MemberView> out;
  out.reserve(members_.size());
  std::vector<const std::pair<const std::string, Member>*> sorted;
  sorted.reserve(members_.size());
  for (const auto& entry : members_) {
    sorted.push_back(&entry);
  }
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (const auto* entry : sorted) {
    const auto& [name, m] = *entry;
    MemberView v;
    v.name = name;
    v.generation = m.generation;
    v.addr = m.addr;
    v.heartbeat = m.heartbeat;
    v.max_version = m.max_version;
    v.self = name == options_.name;
    v.live = m.live;
    v.phi = v.self ? 0.0 : m.fd.phi(now);
    for (const auto& [k, e] : m.kvs) {
      if (!e.deleted) {
        v.kvs[k] = e.value;
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

bool GossipCore::has_version(const std::string& name, uint64_t generation, uint64_t version) const {
  const Member* m = find(name);
  return m != nullptr && m->live && m->generation == generation && m->max_version >= version;
}

bool GossipCore::is_live(const std::string& name) const {
  const Member* m = find(name);
  return m != nullptr && m->live;
}

uint64_t GossipCore::max_version() const {
  return self().max_version;
}

}  // namespace cgn::gossip
