#include "routing/prefix_index.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "routing/rng.h"

namespace cgn::routing {

namespace {

constexpr uint32_t kNil = 0xFFFF'FFFFu;
constexpr uint16_t kInline = 3;

struct Holder {
  uint32_t entry;
  uint16_t node;
  EntryState state;
  Tier tier;
};
static_assert(sizeof(Holder) == 8);

// One per digest. 64 bytes so that the digest and its first holders share one cache line.
struct alignas(64) Record {
  Digest digest;
  Holder inl[kInline];
  uint32_t overflow;  // index into the overflow pool, or kNil
  uint16_t count;     // holders in total (inline first, then overflow)
  uint16_t pad;
};
static_assert(sizeof(Record) == 64);

// One per (digest, node): recency links of the node's list and the last touch.
struct Entry {
  Nanos touched_at;
  uint32_t record;
  uint32_t prev;  // towards the most recent (head)
  uint32_t next;  // towards the least recent (tail)
  uint16_t node;
  EntryState state;
  Tier tier;
};
static_assert(sizeof(Entry) == 24);

// Chunked storage with a free list: ids are stable, growth never copies, and only the chunks in
// use are resident.
template <class T, unsigned kShift = 14>
class Slab {
 public:
  uint32_t alloc() {
    if (!free_.empty()) {
      const uint32_t id = free_.back();
      free_.pop_back();
      return id;
    }
    if ((size_ >> kShift) == chunks_.size()) {
      chunks_.emplace_back(new T[size_t{1} << kShift]);
    }
    return size_++;
  }
  void release(uint32_t id) { free_.push_back(id); }
  T& operator[](uint32_t id) { return chunks_[id >> kShift][id & kMask]; }
  const T& operator[](uint32_t id) const { return chunks_[id >> kShift][id & kMask]; }
  void prefetch(uint32_t id) const { __builtin_prefetch(&chunks_[id >> kShift][id & kMask]); }

 private:
  static constexpr uint32_t kMask = (1u << kShift) - 1;
  std::vector<std::unique_ptr<T[]>> chunks_;
  std::vector<uint32_t> free_;
  uint32_t size_ = 0;
};

struct List {
  uint32_t head = kNil;  // most recently touched
  uint32_t tail = kNil;  // least recently touched
  uint32_t count = 0;
};

struct NodeLists {
  List lists[3];          // indexed by list_of: optimistic, confirmed (engine), confirmed (RAM/SSD)
  uint32_t capacity = 0;  // 0 = default; bounds lists 0 and 1
  uint32_t engine_total() const { return lists[0].count + lists[1].count; }
  uint32_t total() const { return engine_total() + lists[2].count; }
};

constexpr int kTierList = 2;
int list_of(EntryState s, Tier t) {
  return s == EntryState::kConfirmed && t != Tier::kEngine ? kTierList : static_cast<int>(s);
}

}  // namespace

struct Upsert {
  EntryState state;
  Tier tier;
  bool confirm;
};

struct PrefixIndex::Impl {
  // The node's least recently touched entry (kNil when it holds none).
  uint32_t lru_entry(const NodeLists& nl) const;
  void remove_entry(uint32_t eid, size_t& live_entries, size_t& live_records);
  void upsert_one(NodeIndex node, const Digest& d, Nanos now, Upsert u, size_t& live_entries,
                  size_t& live_records);
  // Open-addressing table: tag = low 32 bits of the mixed hash (its low bits are also the home
  // slot, so deletion can backward-shift without touching records), id = record id.
  struct Slot {
    uint32_t tag;
    uint32_t id;
  };

  uint64_t seed = 0;
  std::vector<Slot> slots;
  size_t mask = 0;
  size_t used = 0;
  Slab<Record> records;
  Slab<Entry> entries;
  std::vector<std::vector<Holder>> overflow;
  std::vector<uint32_t> overflow_free;
  std::vector<NodeLists> nodes;

  uint64_t hash(const Digest& d) const {
    uint64_t v;
    std::memcpy(&v, d.data(), sizeof v);
    return mix64(v ^ seed);
  }

  void init_table(size_t cap) {
    slots.assign(cap, Slot{0, kNil});
    mask = cap - 1;
    used = 0;
  }

  uint32_t find(const Digest& d, uint64_t h) const {
    const auto tag = static_cast<uint32_t>(h);
    size_t i = tag & mask;
    for (;;) {
      const Slot s = slots[i];
      if (s.id == kNil) {
        return kNil;
      }
      if (s.tag == tag && records[s.id].digest == d) {
        return s.id;
      }
      i = (i + 1) & mask;
    }
  }

  void prefetch_slot(uint64_t h) const { __builtin_prefetch(&slots[static_cast<uint32_t>(h) & mask]); }

  void grow() {
    std::vector<Slot> old;
    old.swap(slots);
    init_table(old.size() * 2);
    for (const Slot& s : old) {
      if (s.id != kNil) {
        place(s);
      }
    }
  }

  void place(Slot s) {
    size_t i = s.tag & mask;
    while (slots[i].id != kNil) {
      i = (i + 1) & mask;
    }
    slots[i] = s;
    ++used;
  }

  void insert(uint64_t h, uint32_t id) {
    if ((used + 1) * 4 > slots.size() * 3) {
      grow();
    }
    place(Slot{static_cast<uint32_t>(h), id});
  }

  // Backward-shift deletion keeps probe runs intact without tombstones.
  void erase(uint64_t h, uint32_t id) {
    size_t i = static_cast<uint32_t>(h) & mask;
    while (slots[i].id != id) {
      i = (i + 1) & mask;
    }
    size_t j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (slots[j].id == kNil) {
        break;
      }
      const size_t k = slots[j].tag & mask;
      const bool stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
      if (stays) {
        continue;
      }
      slots[i] = slots[j];
      i = j;
    }
    slots[i] = Slot{0, kNil};
    --used;
  }

  Holder& holder_at(Record& r, uint16_t pos) {
    return pos < kInline ? r.inl[pos] : overflow[r.overflow][pos - kInline];
  }
  const Holder& holder_at(const Record& r, uint16_t pos) const {
    return pos < kInline ? r.inl[pos] : overflow[r.overflow][pos - kInline];
  }

  int find_holder(const Record& r, NodeIndex node) const {
    for (uint16_t p = 0; p < r.count; ++p) {
      if (holder_at(r, p).node == node) {
        return p;
      }
    }
    return -1;
  }

  void add_holder(Record& r, Holder h) {
    if (r.count < kInline) {
      r.inl[r.count++] = h;
      return;
    }
    if (r.overflow == kNil) {
      if (!overflow_free.empty()) {
        r.overflow = overflow_free.back();
        overflow_free.pop_back();
      } else {
        r.overflow = static_cast<uint32_t>(overflow.size());
        overflow.emplace_back();
      }
    }
    overflow[r.overflow].push_back(h);
    ++r.count;
  }

  void remove_holder(Record& r, uint16_t pos) {
    const uint16_t last = r.count - 1;
    holder_at(r, pos) = holder_at(r, last);
    if (last >= kInline) {
      auto& v = overflow[r.overflow];
      v.pop_back();
      if (v.empty()) {
        v.shrink_to_fit();
        overflow_free.push_back(r.overflow);
        r.overflow = kNil;
      }
    }
    r.count = last;
  }

  NodeLists& node_lists(NodeIndex n) {
    if (n >= nodes.size()) {
      nodes.resize(size_t{n} + 1);
    }
    return nodes[n];
  }

  void link_front(List& l, uint32_t id) {
    Entry& e = entries[id];
    e.prev = kNil;
    e.next = l.head;
    if (l.head != kNil) {
      entries[l.head].prev = id;
    } else {
      l.tail = id;
    }
    l.head = id;
    ++l.count;
  }

  void unlink(List& l, uint32_t id) {
    Entry& e = entries[id];
    if (e.prev != kNil) {
      entries[e.prev].next = e.next;
    } else {
      l.head = e.next;
    }
    if (e.next != kNil) {
      entries[e.next].prev = e.prev;
    } else {
      l.tail = e.prev;
    }
    --l.count;
  }
};

void OverlapScratch::reset(size_t nodes) {
  for (NodeIndex n : touched_) {
    run_[n] = 0;
    credit_[n] = 0.0F;
    guessed_[n] = 0;
  }
  touched_.clear();
  if (run_.size() < nodes) {
    run_.resize(nodes, 0);
    credit_.resize(nodes, 0.0F);
    guessed_.resize(nodes, 0);
  }
}

PrefixIndex::PrefixIndex(IndexConfig config) : config_(config), impl_(std::make_unique<Impl>()) {
  impl_->seed = config_.hash_seed;
  impl_->init_table(1024);
}

PrefixIndex::~PrefixIndex() = default;

void PrefixIndex::set_config(const IndexConfig& config) {
  const uint64_t old_seed = config_.hash_seed;
  config_ = config;
  // Changing the seed would need a rehash of every record; the table keeps its seed.
  config_.hash_seed = old_seed;
  for (size_t n = 0; n < impl_->nodes.size(); ++n) {
    set_node_capacity(static_cast<NodeIndex>(n), impl_->nodes[n].capacity);
  }
  enforce_max_entries();
}

uint32_t PrefixIndex::node_capacity(NodeIndex node) const {
  const uint32_t cap = node < impl_->nodes.size() ? impl_->nodes[node].capacity : 0;
  return cap != 0 ? cap : std::max<uint32_t>(config_.default_node_capacity, 1);
}

size_t PrefixIndex::node_entries(NodeIndex node) const {
  return node < impl_->nodes.size() ? impl_->nodes[node].total() : 0;
}

// Removes one entry and, with its last holder, the digest's record.
void PrefixIndex::Impl::remove_entry(uint32_t eid, size_t& live_entries, size_t& live_records) {
  Impl& im = *this;
  Entry& e = im.entries[eid];
  const uint32_t rid = e.record;
  Record& r = im.records[rid];
  const int pos = im.find_holder(r, e.node);
  if (pos >= 0) {
    im.remove_holder(r, static_cast<uint16_t>(pos));
  }
  im.unlink(im.nodes[e.node].lists[list_of(e.state, e.tier)], eid);
  im.entries.release(eid);
  --live_entries;
  if (r.count == 0) {
    im.erase(im.hash(r.digest), rid);
    im.records.release(rid);
    --live_records;
  }
}

void PrefixIndex::set_node_capacity(NodeIndex node, uint32_t capacity) {
  auto& im = *impl_;
  NodeLists& nl = im.node_lists(node);
  nl.capacity = capacity;
  const uint32_t cap = node_capacity(node);
  while (nl.engine_total() > cap) {
    im.remove_entry(im.lru_entry(nl), live_entries_, live_records_);
  }
  while (nl.lists[kTierList].count > config_.max_tier_entries) {
    im.remove_entry(nl.lists[kTierList].tail, live_entries_, live_records_);
  }
}

uint32_t PrefixIndex::Impl::lru_entry(const NodeLists& nl) const {
  const List& opt = nl.lists[0];
  const List& conf = nl.lists[1];
  if (conf.tail == kNil) {
    return opt.tail;
  }
  if (opt.tail == kNil) {
    return conf.tail;
  }
  // Least recently touched goes first; on a tie the guess goes before the confirmed entry.
  return entries[opt.tail].touched_at <= entries[conf.tail].touched_at ? opt.tail : conf.tail;
}

void PrefixIndex::enforce_max_entries() {
  auto& im = *impl_;
  while (config_.max_entries != 0 && live_entries_ > config_.max_entries) {
    // The node holding the most entries gives up its least recently touched one.
    size_t fullest = 0;
    for (size_t n = 1; n < im.nodes.size(); ++n) {
      if (im.nodes[n].total() > im.nodes[fullest].total()) {
        fullest = n;
      }
    }
    const NodeLists& nl = im.nodes[fullest];
    const uint32_t engine = im.lru_entry(nl);
    const uint32_t tier = nl.lists[kTierList].tail;
    const bool tier_first =
        engine == kNil || (tier != kNil && im.entries[tier].touched_at <= im.entries[engine].touched_at);
    im.remove_entry(tier_first ? tier : engine, live_entries_, live_records_);
  }
}

void PrefixIndex::Impl::upsert_one(NodeIndex node, const Digest& d, Nanos now, Upsert u, size_t& live_entries,
                                   size_t& live_records) {
  Impl& im = *this;
  const uint64_t h = im.hash(d);
  uint32_t rid = im.find(d, h);
  if (rid == kNil) {
    rid = im.records.alloc();
    Record& r = im.records[rid];
    r.digest = d;
    r.count = 0;
    r.overflow = kNil;
    r.pad = 0;
    im.insert(h, rid);
    ++live_records;
  } else {
    Record& r = im.records[rid];
    const int pos = im.find_holder(r, node);
    if (pos >= 0) {
      Holder& hd = im.holder_at(r, static_cast<uint16_t>(pos));
      Entry& e = im.entries[hd.entry];
      NodeLists& nl = im.nodes[node];
      im.unlink(nl.lists[list_of(e.state, e.tier)], hd.entry);
      if (u.confirm) {
        e.state = EntryState::kConfirmed;
        e.tier = u.tier;
        hd.state = EntryState::kConfirmed;
        hd.tier = u.tier;
      }
      e.touched_at = now;
      im.link_front(nl.lists[list_of(e.state, e.tier)], hd.entry);
      return;
    }
  }
  const uint32_t eid = im.entries.alloc();
  Entry& e = im.entries[eid];
  e.touched_at = now;
  e.record = rid;
  e.node = node;
  e.state = u.state;
  e.tier = u.tier;
  im.link_front(im.node_lists(node).lists[list_of(u.state, u.tier)], eid);
  im.add_holder(im.records[rid], Holder{eid, node, u.state, u.tier});
  ++live_entries;
}

void PrefixIndex::record_optimistic(NodeIndex node, std::span<const Digest> digests, Nanos now) {
  auto& im = *impl_;
  im.node_lists(node);
  // Newest-first insertion order would make the leading digests the least recent; insert from
  // the end so that capacity pruning drops a prefix's tail before its head (as engines do).
  for (size_t i = digests.size(); i-- > 0;) {
    im.upsert_one(node, digests[i], now, Upsert{EntryState::kOptimistic, Tier::kEngine, false}, live_entries_,
                  live_records_);
  }
  set_node_capacity(node, im.nodes[node].capacity);
  enforce_max_entries();
}

void PrefixIndex::confirm(NodeIndex node, std::span<const Digest> digests, Tier tier, Nanos now) {
  auto& im = *impl_;
  im.node_lists(node);
  for (size_t i = digests.size(); i-- > 0;) {
    im.upsert_one(node, digests[i], now, Upsert{EntryState::kConfirmed, tier, true}, live_entries_,
                  live_records_);
  }
  set_node_capacity(node, im.nodes[node].capacity);
  enforce_max_entries();
}

void PrefixIndex::remove(NodeIndex node, std::span<const Digest> digests) {
  auto& im = *impl_;
  for (const Digest& d : digests) {
    const uint32_t rid = im.find(d, im.hash(d));
    if (rid == kNil) {
      continue;
    }
    const int pos = im.find_holder(im.records[rid], node);
    if (pos < 0) {
      continue;
    }
    im.remove_entry(im.holder_at(im.records[rid], static_cast<uint16_t>(pos)).entry, live_entries_,
                    live_records_);
  }
}

size_t PrefixIndex::clear_node(NodeIndex node) {
  auto& im = *impl_;
  if (node >= im.nodes.size()) {
    return 0;
  }
  size_t dropped = 0;
  for (List& l : im.nodes[node].lists) {
    while (l.tail != kNil) {
      im.remove_entry(l.tail, live_entries_, live_records_);
      ++dropped;
    }
  }
  return dropped;
}

size_t PrefixIndex::sweep_expired(Nanos now) {
  auto& im = *impl_;
  size_t dropped = 0;
  for (NodeLists& nl : im.nodes) {
    List& opt = nl.lists[0];
    while (opt.tail != kNil && now - im.entries[opt.tail].touched_at >= config_.optimistic_ttl) {
      im.remove_entry(opt.tail, live_entries_, live_records_);
      ++dropped;
    }
  }
  next_sweep_ = now + config_.sweep_interval;
  return dropped;
}

void PrefixIndex::maybe_sweep(Nanos now) {
  if (now >= next_sweep_) {
    sweep_expired(now);
  }
}

void PrefixIndex::match(std::span<const Digest> digests, const TierCredit& credit, size_t node_limit,
                        OverlapScratch& out) const {
  const auto& im = *impl_;
  out.reset(node_limit);
  constexpr size_t kAhead = 4;
  const size_t n = digests.size();
  for (size_t i = 0; i < std::min(n, kAhead); ++i) {
    im.prefetch_slot(im.hash(digests[i]));
  }
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      im.prefetch_slot(im.hash(digests[i + kAhead]));
    }
    const uint32_t rid = im.find(digests[i], im.hash(digests[i]));
    if (rid == kNil) {
      return;
    }
    const Record& r = im.records[rid];
    bool advanced = false;
    const auto pos_i = static_cast<uint32_t>(i);
    for (uint16_t p = 0; p < r.count; ++p) {
      const Holder& h = im.holder_at(r, p);
      if (h.node >= node_limit || out.run_[h.node] != pos_i) {
        continue;
      }
      if (pos_i == 0) {
        out.touched_.push_back(h.node);
      }
      out.run_[h.node] = pos_i + 1;
      out.credit_[h.node] += credit.of(h.tier, h.state);
      out.guessed_[h.node] += h.state == EntryState::kOptimistic ? 1 : 0;
      advanced = true;
    }
    if (!advanced) {
      return;
    }
  }
}

bool PrefixIndex::state_of(NodeIndex node, const Digest& d, EntryState* state, Tier* tier) const {
  const auto& im = *impl_;
  const uint32_t rid = im.find(d, im.hash(d));
  if (rid == kNil) {
    return false;
  }
  const int pos = im.find_holder(im.records[rid], node);
  if (pos < 0) {
    return false;
  }
  const Holder& h = im.holder_at(im.records[rid], static_cast<uint16_t>(pos));
  if (state != nullptr) {
    *state = h.state;
  }
  if (tier != nullptr) {
    *tier = h.tier;
  }
  return true;
}

bool PrefixIndex::holds(NodeIndex node, const Digest& d) const {
  return state_of(node, d, nullptr, nullptr);
}

uint32_t digest_capacity(uint64_t total_blocks, uint32_t engine_block_size_tokens, double bytes_per_token,
                         uint32_t block_bytes) {
  if (total_blocks == 0 || engine_block_size_tokens == 0 || block_bytes == 0 || !(bytes_per_token > 0)) {
    return 0;
  }
  const double blocks = static_cast<double>(total_blocks) * engine_block_size_tokens * bytes_per_token /
                        static_cast<double>(block_bytes);
  if (blocks >= static_cast<double>(std::numeric_limits<uint32_t>::max())) {
    return std::numeric_limits<uint32_t>::max();
  }
  return std::max<uint32_t>(1, static_cast<uint32_t>(std::floor(blocks)));
}

}  // namespace cgn::routing
