#include "kvcache/block_store.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/log.h"
#include "kvcache/ram_arena.h"
#include "kvcache/slot_index.h"
#include "kvcache/ssd_tier.h"

namespace cgn::kvcache {

namespace {

constexpr uint32_t kNil = UINT32_MAX;
constexpr auto kMaintainPeriod = std::chrono::seconds(1);
constexpr uintptr_t kReadAlign = 4096;  // O_DIRECT alignment of SSD reads into a handle's buffer

enum class SlotState : uint8_t { kFree, kWriting, kComplete };

// One block's metadata. The slot array is sized once (one slot per arena page, the most blocks
// that can fit), so a slot's address never changes and no block costs a heap allocation.
struct Slot {
  BlockKey key{};
  uint64_t length = 0;    // value bytes
  Nanos lease_until = 0;  // store clock; leased while now < lease_until
  uint32_t first_page = 0;
  uint32_t pages = 0;
  uint32_t prev = kNil;  // LRU list, towards the most recently used end
  uint32_t next = kNil;  // towards the least recently used end
  uint32_t pins = 0;     // open ReadHandles
  SlotState state = SlotState::kFree;
  bool spilling = false;       // being copied to SSD outside the lock: not freed, not spilled again
  bool on_ssd = false;         // its bytes were written to SSD (promoted, or spilled and kept); the SSD
                               // tier may have dropped them since (size, TTL): see still_on_ssd()
  bool touched = false;        // read or refreshed since its spill began: keep it in RAM
  bool in_lease_list = false;  // listed in Impl::leased_
};
static_assert(sizeof(Slot) <= 80, "src/kvcache/README.md states the slot size");

// Guards for SSD-only blocks, consulted by the SSD tier before it evicts a record.
struct SsdGuard {
  Nanos lease_until = 0;
  uint32_t readers = 0;  // get()s reading the record now
};

Error<StoreError> config_error(const std::string& what) {
  return make_error(StoreError::kConfig, "kvcache store config: " + what);
}

}  // namespace

class BlockStore::Impl {
 public:
  Impl(const StoreConfig& cfg, const Clock& clock, std::unique_ptr<RamArena> arena)
      : cfg_(cfg),
        clock_(clock),
        arena_(std::move(arena)),
        max_slots_(arena_->pages().pages()),
        index_(max_slots_),
        ssd_errors_(log::get("kvcache")) {
    slots_.reserve(max_slots_);
    free_slots_.reserve(max_slots_);
    leased_.reserve(max_slots_);
  }

  // ---- locked helpers (mu_ held) ----

  uint32_t find(const BlockKey& key) const {
    return index_.find(key, [this](uint32_t s) -> const BlockKey& { return slots_[s].key; });
  }
  void unindex(const BlockKey& key) {
    index_.erase(key, [this](uint32_t s) -> const BlockKey& { return slots_[s].key; });
  }

  void lru_unlink(uint32_t s) {
    Slot& sl = slots_[s];
    (sl.prev == kNil ? mru_ : slots_[sl.prev].next) = sl.next;
    (sl.next == kNil ? lru_ : slots_[sl.next].prev) = sl.prev;
    sl.prev = sl.next = kNil;
  }
  void lru_push_mru(uint32_t s) {
    Slot& sl = slots_[s];
    sl.prev = kNil;
    sl.next = mru_;
    (mru_ == kNil ? lru_ : slots_[mru_].prev) = s;
    mru_ = s;
  }
  void touch(uint32_t s) {
    if (mru_ != s) {
      lru_unlink(s);
      lru_push_mru(s);
    }
    slots_[s].touched = true;
  }

  bool leased(const Slot& sl, Nanos now) const { return sl.lease_until > now; }
  bool evictable(const Slot& sl, Nanos now) const {
    return sl.state == SlotState::kComplete && !sl.spilling && sl.pins == 0 && !leased(sl, now);
  }

  // The least recently used evictable block, or kNil.
  uint32_t lru_victim(Nanos now) const {
    for (uint32_t s = lru_; s != kNil; s = slots_[s].prev) {
      if (evictable(slots_[s], now)) {
        return s;
      }
    }
    return kNil;
  }

  uint32_t new_slot() {
    if (!free_slots_.empty()) {
      const uint32_t s = free_slots_.back();
      free_slots_.pop_back();
      return s;
    }
    assert(slots_.size() < max_slots_);
    slots_.emplace_back();  // within the reserved capacity: no reallocation
    return static_cast<uint32_t>(slots_.size() - 1);
  }

  // Whether a block's copy on SSD is still there, so freeing it from RAM loses nothing.
  bool still_on_ssd(const Slot& sl) const { return sl.on_ssd && ssd_ && ssd_->contains(sl.key); }

  uint64_t slot_bytes(const Slot& sl) const { return static_cast<uint64_t>(sl.pages) * arena_->page_bytes(); }

  // Frees a slot and its pages. A complete block leaves the LRU list and the RAM counters.
  void free_slot(uint32_t s) {
    Slot& sl = slots_[s];
    if (sl.state == SlotState::kComplete) {
      lru_unlink(s);
      --ram_blocks_;
      ram_block_bytes_ -= slot_bytes(sl);
    }
    unindex(sl.key);
    arena_->pages().release(sl.first_page, sl.pages);
    used_bytes_ -= slot_bytes(sl);
    const bool listed = sl.in_lease_list;  // the lease list drops stale entries lazily
    sl = Slot{};
    sl.in_lease_list = listed;
    free_slots_.push_back(s);
  }

  void add_lease(uint32_t s, Nanos until) {
    Slot& sl = slots_[s];
    sl.lease_until = std::max(sl.lease_until, until);
    if (!sl.in_lease_list) {
      sl.in_lease_list = true;
      leased_.push_back(s);
    }
  }

  // Drops expired and freed entries from the lease list; returns how many RAM blocks are leased.
  uint64_t prune_ram_leases(Nanos now) {
    size_t kept = 0;
    for (uint32_t s : leased_) {
      Slot& sl = slots_[s];
      if (sl.state != SlotState::kFree && leased(sl, now)) {
        leased_[kept++] = s;
      } else {
        sl.in_lease_list = false;
      }
    }
    leased_.resize(kept);
    return kept;
  }

  bool over_watermark() const {
    return static_cast<double>(used_bytes_) > cfg_.high_watermark * static_cast<double>(arena_->bytes());
  }

  // `err` null: the write succeeded.
  void note_ssd_write(const Error<StoreError>* err, uint64_t length) {
    if (err == nullptr) {
      ++spilled_blocks_;
      spilled_bytes_ += length;
      if (!ssd_error_.empty()) {
        ssd_error_.clear();
        ssd_errors_.update("ssd", "ok", spdlog::level::info, "spilling to the SSD tier again");
      }
      return;
    }
    ++spill_errors_;
    ssd_error_ = std::string(to_string(err->code)) + ": " + err->message;
    ssd_errors_.update("ssd", "failing", spdlog::level::warn,
                       "spill to the SSD tier failed; RAM keeps serving", log::kv("error", ssd_error_));
  }

  // Reserves a kWriting slot of `length` bytes for `key`, making room by evicting least recently
  // used blocks (spilled to SSD first when the tier is on). May drop and retake `lk`. Sets
  // `resident` (and returns kNil) when the key is complete in RAM or on SSD.
  Result<uint32_t, StoreError> reserve(std::unique_lock<std::mutex>& lk, const BlockKey& key, uint64_t length,
                                       bool& resident) {
    resident = false;
    const uint32_t pages = static_cast<uint32_t>(
        std::max<uint64_t>(1, (length + arena_->page_bytes() - 1) / arena_->page_bytes()));
    for (;;) {
      if (stopped_) {
        return make_error(StoreError::kStopped, "the block store is stopping");
      }
      if (const uint32_t s = find(key); s != kNil) {
        if (slots_[s].state == SlotState::kWriting) {
          return make_error(StoreError::kBusy, "a put of this block is in progress");
        }
        resident = true;
        return kNil;
      }
      if (const std::optional<uint32_t> first = arena_->pages().allocate(pages)) {
        const uint32_t s = new_slot();
        Slot& sl = slots_[s];
        sl.key = key;
        sl.length = length;
        sl.first_page = *first;
        sl.pages = pages;
        sl.state = SlotState::kWriting;
        index_.insert(key, s);
        used_bytes_ += slot_bytes(sl);
        return s;
      }
      const Nanos now = clock_.now();
      const uint32_t v = lru_victim(now);
      if (v == kNil) {
        if (spills_in_flight_ > 0) {  // their blocks may be freed when they finish
          spill_done_.wait(lk);
          continue;
        }
        return make_error(StoreError::kNoSpace,
                          "the RAM tier is full of pinned, leased or half-written blocks");
      }
      if (!ssd_ || still_on_ssd(slots_[v])) {
        if (!ssd_) {
          ++ram_evictions_;
        }
        free_slot(v);
        continue;
      }
      spill_and_free(lk, v, /*drop_on_error=*/true);
    }
  }

  // Copies block `v` (complete, evictable) to SSD outside the lock, then frees it unless it was
  // pinned, leased or used meanwhile (it is on SSD anyway). On a write error the block is dropped
  // when `drop_on_error` (the caller needs the space), else kept.
  void spill_and_free(std::unique_lock<std::mutex>& lk, uint32_t v, bool drop_on_error) {
    Slot& sl = slots_[v];
    sl.spilling = true;
    sl.touched = false;
    ++spills_in_flight_;
    const BlockKey key = sl.key;
    const std::span<const uint8_t> bytes = arena_->span(sl.first_page, sl.length);
    lk.unlock();
    const Status<StoreError> st = ssd_->write(key, bytes);
    lk.lock();
    --spills_in_flight_;
    finish_spill(v, st ? nullptr : &st.error(), drop_on_error, clock_.now());
    spill_done_.notify_all();
  }

  void finish_spill(uint32_t v, const Error<StoreError>* err, bool drop_on_error, Nanos now) {
    Slot& sl = slots_[v];
    sl.spilling = false;
    note_ssd_write(err, sl.length);
    if (err == nullptr) {
      sl.on_ssd = true;
    }
    const bool keep = !evictable(sl, now) || sl.touched;
    if (err == nullptr && !keep) {
      free_slot(v);
    } else if (err != nullptr && drop_on_error && !keep) {
      ++ram_evictions_;
      free_slot(v);
    }
  }

  // One background round: copies the least recently used evictable blocks, spill_fraction of
  // the arena, to SSD and frees them.
  void spill_round(std::unique_lock<std::mutex>& lk) {
    const Nanos now = clock_.now();
    const uint64_t target = static_cast<uint64_t>(cfg_.spill_fraction * static_cast<double>(arena_->bytes()));
    round_.clear();
    uint64_t picked = 0;
    for (uint32_t s = lru_; s != kNil && picked < target; s = slots_[s].prev) {
      Slot& sl = slots_[s];
      if (!evictable(sl, now)) {
        continue;
      }
      picked += slot_bytes(sl);
      if (still_on_ssd(sl)) {
        round_.push_back({s, true});  // already on SSD (promoted): freed below without a rewrite
        continue;
      }
      sl.spilling = true;
      sl.touched = false;
      ++spills_in_flight_;
      round_.push_back({s, false});
    }
    // Blocks already on SSD go now (freeing one does not change the LRU order of the others).
    std::erase_if(round_, [this](const Spill& sp) {
      if (sp.done) {
        free_slot(sp.slot);
      }
      return sp.done;
    });
    if (round_.empty()) {
      return;
    }
    // Write outside the lock. The slots cannot be freed meanwhile (spilling), and their bytes
    // do not change (a complete block is immutable).
    for (Spill& sp : round_) {
      sp.key = slots_[sp.slot].key;
      sp.bytes = arena_->span(slots_[sp.slot].first_page, slots_[sp.slot].length);
    }
    // Each block is accounted (and freed) as soon as its write returns, so RAM comes back and
    // the counters move during a long round. After one failure the round ends: the disk is
    // full or failing.
    bool failed = false;
    for (const Spill& sp : round_) {
      std::optional<Error<StoreError>> error;
      const bool skip = failed || stop_requested_.load(std::memory_order_relaxed);
      lk.unlock();
      if (!skip) {
        Status<StoreError> st = ssd_->write(sp.key, sp.bytes);
        if (!st) {
          error = st.error();
          failed = true;
        }
      }
      lk.lock();
      --spills_in_flight_;
      if (skip) {
        slots_[sp.slot].spilling = false;
      } else {
        finish_spill(sp.slot, error ? &*error : nullptr, /*drop_on_error=*/false, clock_.now());
      }
      spill_done_.notify_all();
    }
    round_failed_ = failed;
  }

  void maintenance_loop() {
    std::unique_lock<std::mutex> lk(mu_);
    auto next_tick = std::chrono::steady_clock::now() + kMaintainPeriod;
    while (!stopped_) {
      if (ssd_ && spill_kick_ && over_watermark() && !round_failed_) {
        spill_kick_ = false;
        const uint64_t before = used_bytes_;
        spill_round(lk);
        if (used_bytes_ < before && over_watermark()) {
          spill_kick_ = true;  // progress made and still above the mark: go again
        }
        continue;
      }
      maint_cv_.wait_until(lk, next_tick, [this] {
        return stopped_ || (ssd_ && spill_kick_ && over_watermark() && !round_failed_);
      });
      if (stopped_) {
        break;
      }
      if (std::chrono::steady_clock::now() >= next_tick) {
        next_tick = std::chrono::steady_clock::now() + kMaintainPeriod;
        round_failed_ = false;  // retry a failing SSD at most once per period
        spill_kick_ = true;     // a round per period, in case a lease expiry made blocks spillable
        prune_ram_leases(clock_.now());
        if (ssd_) {
          lk.unlock();
          ssd_->maintain();
          prune_ssd_guards();
          lk.lock();
        }
      }
    }
  }

  // ---- SSD guards (guard_mu_ only; never held while calling into the SSD tier or taking mu_) ----

  bool ssd_protected(const BlockKey& key) const {
    std::lock_guard<std::mutex> g(guard_mu_);
    const auto it = guards_.find(key);
    return it != guards_.end() && (it->second.readers > 0 || it->second.lease_until > clock_.now());
  }

  void prune_ssd_guards() {
    const Nanos now = clock_.now();
    std::lock_guard<std::mutex> g(guard_mu_);
    std::erase_if(guards_,
                  [now](const auto& kv) { return kv.second.readers == 0 && kv.second.lease_until <= now; });
  }

  uint64_t ssd_leases_active() const {
    const Nanos now = clock_.now();
    std::lock_guard<std::mutex> g(guard_mu_);
    uint64_t n = 0;
    for (const auto& [k, g2] : guards_) {
      n += g2.lease_until > now ? 1 : 0;
    }
    return n;
  }

  void guard_read(const BlockKey& key, int delta) {
    std::lock_guard<std::mutex> g(guard_mu_);
    SsdGuard& gd = guards_[key];
    gd.readers = static_cast<uint32_t>(static_cast<int>(gd.readers) + delta);
    if (gd.readers == 0 && gd.lease_until <= clock_.now()) {
      guards_.erase(key);
    }
  }

  struct Spill {
    uint32_t slot = 0;
    bool done = false;  // already on SSD: nothing to write
    BlockKey key{};
    std::span<const uint8_t> bytes;
    Spill(uint32_t s, bool d) : slot(s), done(d) {}
  };

  const StoreConfig cfg_;
  const Clock& clock_;
  const std::unique_ptr<RamArena> arena_;
  const uint32_t max_slots_;

  mutable std::mutex mu_;
  std::condition_variable maint_cv_;    // wakes the maintenance thread (watermark, stop)
  std::condition_variable spill_done_;  // a spill finished, or the store stops
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  SlotIndex index_;
  uint32_t mru_ = kNil;
  uint32_t lru_ = kNil;
  std::vector<uint32_t> leased_;
  std::vector<Spill> round_;
  uint64_t used_bytes_ = 0;  // pages of complete and half-written blocks
  uint64_t ram_blocks_ = 0;
  uint64_t ram_block_bytes_ = 0;  // pages of complete blocks
  uint64_t spills_in_flight_ = 0;
  uint64_t ssd_users_ = 0;  // calls into the SSD tier outside mu_ (other than spills)
  uint64_t pinned_blocks_ = 0;
  uint64_t open_handles_ = 0;  // PutHandles and pinned ReadHandles
  bool spill_kick_ = false;
  bool round_failed_ = false;
  bool stopped_ = false;
  std::atomic<bool> stop_requested_{false};
  std::once_flag stop_once_;
  std::string ssd_error_;
  log::StateChangeLogger ssd_errors_;

  // Counters.
  uint64_t ram_hits_ = 0, ram_misses_ = 0, ram_evictions_ = 0;
  uint64_t ssd_hits_ = 0, ssd_misses_ = 0;
  uint64_t puts_ = 0, refreshes_ = 0, spilled_blocks_ = 0, spilled_bytes_ = 0, spill_errors_ = 0;
  uint64_t promotions_ = 0, leases_granted_ = 0;

  std::unique_ptr<SsdTier> ssd_;  // null when the tier is off or after stop()
  SsdStats last_ssd_stats_;       // the tier's final numbers once stop() destroyed it
  std::thread maint_;

  mutable std::mutex guard_mu_;
  std::unordered_map<BlockKey, SsdGuard, DigestHash> guards_;
};

// ---- handles ----

PutHandle::PutHandle(PutHandle&& other) noexcept
    : store_(std::exchange(other.store_, nullptr)),
      key_(other.key_),
      slot_(other.slot_),
      offset_(other.offset_),
      data_(std::exchange(other.data_, {})) {}

PutHandle& PutHandle::operator=(PutHandle&& other) noexcept {
  if (this != &other) {
    if (store_ != nullptr) {
      store_->abort_put(slot_);
    }
    store_ = std::exchange(other.store_, nullptr);
    key_ = other.key_;
    slot_ = other.slot_;
    offset_ = other.offset_;
    data_ = std::exchange(other.data_, {});
  }
  return *this;
}

PutHandle::~PutHandle() {
  if (store_ != nullptr) {
    store_->abort_put(slot_);
  }
}

ReadHandle::ReadHandle(ReadHandle&& other) noexcept
    : store_(std::exchange(other.store_, nullptr)),
      slot_(other.slot_),
      tier_(other.tier_),
      offset_(other.offset_),
      owned_(std::move(other.owned_)),
      data_(std::exchange(other.data_, {})) {}

ReadHandle& ReadHandle::operator=(ReadHandle&& other) noexcept {
  if (this != &other) {
    if (store_ != nullptr) {
      store_->unpin(slot_);
    }
    store_ = std::exchange(other.store_, nullptr);
    slot_ = other.slot_;
    tier_ = other.tier_;
    offset_ = other.offset_;
    owned_ = std::move(other.owned_);
    data_ = std::exchange(other.data_, {});
  }
  return *this;
}

ReadHandle::~ReadHandle() {
  if (store_ != nullptr) {
    store_->unpin(slot_);
  }
}

// ---- BlockStore ----

Result<std::unique_ptr<BlockStore>, StoreError> BlockStore::open(const StoreConfig& cfg, const Clock& clock) {
  if (cfg.page_bytes < 4096 || !std::has_single_bit(cfg.page_bytes)) {
    return config_error("page_bytes must be a power of two >= 4096, got " + std::to_string(cfg.page_bytes));
  }
  if (cfg.ram_bytes < cfg.page_bytes || cfg.ram_bytes % cfg.page_bytes != 0) {
    return config_error("ram_bytes must be a positive multiple of page_bytes (" +
                        std::to_string(cfg.page_bytes) + "), got " + std::to_string(cfg.ram_bytes));
  }
  if (cfg.ram_bytes / cfg.page_bytes >= UINT32_MAX) {
    return config_error("ram_bytes / page_bytes must be below 2^32; raise page_bytes");
  }
  if (cfg.max_block_bytes == 0) {
    return config_error("max_block_bytes must be positive");
  }
  if (!(cfg.high_watermark > 0.0 && cfg.high_watermark <= 1.0)) {
    return config_error("high_watermark must be in (0, 1], got " + std::to_string(cfg.high_watermark));
  }
  if (!(cfg.spill_fraction > 0.0 && cfg.spill_fraction <= 1.0)) {
    return config_error("spill_fraction must be in (0, 1], got " + std::to_string(cfg.spill_fraction));
  }
  if (cfg.max_lease < 0) {
    return config_error("max_lease must not be negative");
  }
  auto arena = RamArena::create(cfg.ram_bytes, cfg.page_bytes, cfg.stop_requested);
  if (!arena) {
    return arena.error();
  }
  auto impl = std::make_unique<Impl>(cfg, clock, std::move(*arena));
  if (cfg.ssd_enabled) {
    Impl* raw = impl.get();
    auto ssd = SsdTier::open(cfg.ssd, clock, [raw](const BlockKey& key) { return raw->ssd_protected(key); });
    if (!ssd) {
      return ssd.error();
    }
    impl->ssd_ = std::move(*ssd);
  }
  impl->maint_ = std::thread([raw = impl.get()] { raw->maintenance_loop(); });
  return std::unique_ptr<BlockStore>(new BlockStore(std::move(impl)));
}

BlockStore::BlockStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BlockStore::~BlockStore() {
  stop();
  // Handles point into the store and its arena: release them before destroying it.
  assert(impl_->open_handles_ == 0 && "a PutHandle or ReadHandle outlived its BlockStore");
}

void BlockStore::stop() {
  Impl& m = *impl_;
  std::call_once(m.stop_once_, [&m] {
    {
      std::lock_guard<std::mutex> lk(m.mu_);
      m.stopped_ = true;
      m.stop_requested_.store(true);
    }
    m.maint_cv_.notify_all();
    m.spill_done_.notify_all();
    if (m.maint_.joinable()) {
      m.maint_.join();
    }
    std::unique_ptr<SsdTier> ssd;
    {
      std::unique_lock<std::mutex> lk(m.mu_);
      m.spill_done_.wait(lk, [&m] { return m.spills_in_flight_ == 0 && m.ssd_users_ == 0; });
      if (m.ssd_) {
        m.last_ssd_stats_ = m.ssd_->stats();
      }
      ssd = std::move(m.ssd_);
    }
    ssd.reset();  // joins the tier's scan thread
  });
}

Result<std::optional<PutHandle>, StoreError> BlockStore::put_start(const BlockKey& key, uint64_t length) {
  Impl& m = *impl_;
  if (length > m.cfg_.max_block_bytes || length > m.arena_->bytes()) {
    return make_error(StoreError::kTooLarge,
                      "block of " + std::to_string(length) + " bytes is larger than " +
                          std::to_string(std::min(m.cfg_.max_block_bytes, m.arena_->bytes())));
  }
  std::unique_lock<std::mutex> lk(m.mu_);
  if (m.stopped_) {
    return make_error(StoreError::kStopped, "the block store is stopping");
  }
  // Already resident: refresh, write nothing.
  if (const uint32_t s = m.find(key); s != kNil && m.slots_[s].state == SlotState::kComplete) {
    m.touch(s);
    ++m.refreshes_;
    return std::optional<PutHandle>();
  }
  if (m.ssd_ && m.find(key) == kNil && m.ssd_->contains(key)) {
    ++m.refreshes_;
    return std::optional<PutHandle>();
  }
  bool resident = false;
  auto slot = m.reserve(lk, key, length, resident);
  if (!slot) {
    return slot.error();
  }
  if (resident) {  // someone completed it while we made room
    if (const uint32_t s = m.find(key); s != kNil) {
      m.touch(s);
    }
    ++m.refreshes_;
    return std::optional<PutHandle>();
  }
  const Slot& sl = m.slots_[*slot];
  ++m.open_handles_;
  PutHandle h;
  h.store_ = this;
  h.key_ = key;
  h.slot_ = *slot;
  h.offset_ = m.arena_->offset(sl.first_page);
  h.data_ = m.arena_->span(sl.first_page, length);
  return std::optional<PutHandle>(std::move(h));
}

Status<StoreError> BlockStore::put_end(PutHandle&& handle) {
  Impl& m = *impl_;
  if (handle.store_ != this) {
    return make_error(StoreError::kNotFound, "put_end: the handle does not belong to this store");
  }
  handle.store_ = nullptr;
  std::unique_lock<std::mutex> lk(m.mu_);
  --m.open_handles_;
  Slot& sl = m.slots_[handle.slot_];
  assert(sl.state == SlotState::kWriting && sl.key == handle.key_);
  if (m.stopped_) {
    m.free_slot(handle.slot_);
    return make_error(StoreError::kStopped, "the block store is stopping");
  }
  sl.state = SlotState::kComplete;
  m.lru_push_mru(handle.slot_);
  ++m.ram_blocks_;
  m.ram_block_bytes_ += m.slot_bytes(sl);
  ++m.puts_;
  if (m.ssd_ && m.over_watermark()) {
    m.spill_kick_ = true;
    lk.unlock();
    m.maint_cv_.notify_one();
  }
  return Ok{};
}

Status<StoreError> BlockStore::put(const BlockKey& key, std::span<const uint8_t> value) {
  auto h = put_start(key, value.size());
  if (!h) {
    return h.error();
  }
  if (!h->has_value()) {
    return Ok{};
  }
  PutHandle& handle = **h;
  if (!value.empty()) {
    std::memcpy(handle.data().data(), value.data(), value.size());
  }
  return put_end(std::move(handle));
}

void BlockStore::abort_put(uint32_t slot) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lk(m.mu_);
  --m.open_handles_;
  assert(m.slots_[slot].state == SlotState::kWriting);
  m.free_slot(slot);
  m.spill_done_.notify_all();  // a put waiting for space may use it
}

LookupResult BlockStore::lookup(std::span<const BlockKey> keys, Nanos lease) {
  Impl& m = *impl_;
  LookupResult out;
  out.tiers.reserve(keys.size());
  lease = std::clamp<Nanos>(lease, 0, m.cfg_.max_lease);
  const Nanos now = m.clock_.now();
  const Nanos until = lease > 0 ? now + lease : 0;
  std::lock_guard<std::mutex> lk(m.mu_);
  if (m.stopped_) {
    return out;
  }
  for (const BlockKey& key : keys) {
    const uint32_t s = m.find(key);
    if (s != kNil && m.slots_[s].state == SlotState::kComplete) {
      out.tiers.push_back(Tier::kRam);
      if (until != 0) {
        m.add_lease(s, until);
      }
      continue;
    }
    if (!m.ssd_) {
      break;
    }
    // Lease before asking, so the SSD tier cannot evict the record between the answer and the
    // lease; undo it if the record is not there.
    std::optional<Nanos> previous;
    if (until != 0) {
      std::lock_guard<std::mutex> g(m.guard_mu_);
      auto [it, fresh] = m.guards_.try_emplace(key);
      if (!fresh) {
        previous = it->second.lease_until;
      }
      it->second.lease_until = std::max(it->second.lease_until, until);
    }
    if (m.ssd_->contains(key)) {
      out.tiers.push_back(Tier::kSsd);
      continue;
    }
    if (until != 0) {
      std::lock_guard<std::mutex> g(m.guard_mu_);
      auto it = m.guards_.find(key);
      if (!previous && it->second.readers == 0) {
        m.guards_.erase(it);
      } else {
        it->second.lease_until = previous.value_or(0);
      }
    }
    break;
  }
  if (until != 0 && !out.tiers.empty()) {
    out.lease_until = until;
    m.leases_granted_ += out.tiers.size();
  }
  return out;
}

Result<ReadHandle, StoreError> BlockStore::get(const BlockKey& key, bool pin_in_ram) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lk(m.mu_);
  if (m.stopped_) {
    return make_error(StoreError::kStopped, "the block store is stopping");
  }
  auto pin = [&](uint32_t s, Tier tier) {
    Slot& sl = m.slots_[s];
    if (sl.pins++ == 0) {
      ++m.pinned_blocks_;
    }
    ++m.open_handles_;
    m.touch(s);
    ReadHandle h;
    h.store_ = this;
    h.slot_ = s;
    h.tier_ = tier;
    h.offset_ = m.arena_->offset(sl.first_page);
    h.data_ = m.arena_->span(sl.first_page, sl.length);
    return h;
  };
  if (const uint32_t s = m.find(key); s != kNil && m.slots_[s].state == SlotState::kComplete) {
    ++m.ram_hits_;
    return pin(s, Tier::kRam);
  }
  ++m.ram_misses_;
  const std::optional<uint64_t> length = m.ssd_ ? m.ssd_->length(key) : std::nullopt;
  if (!length) {
    if (m.ssd_) {
      ++m.ssd_misses_;
    }
    return make_error(StoreError::kNotFound, "no such block");
  }
  ++m.ssd_users_;
  m.guard_read(key, +1);
  // With pin_in_ram: a kWriting slot to read into (or the block, if a put completed meanwhile).
  uint32_t slot = kNil;
  if (pin_in_ram) {
    bool resident = false;
    auto r = m.reserve(lk, key, *length, resident);
    if (!r || resident) {
      m.guard_read(key, -1);
      --m.ssd_users_;
      m.spill_done_.notify_all();
      if (!r) {
        return r.error();
      }
      // A put or another promotion completed it while we made room: a RAM hit after all.
      --m.ram_misses_;
      ++m.ram_hits_;
      return pin(m.find(key), Tier::kRam);
    }
    slot = *r;
  }
  const std::span<uint8_t> arena_span =
      slot != kNil ? m.arena_->span(m.slots_[slot].first_page, *length) : std::span<uint8_t>();
  lk.unlock();

  // Without pin_in_ram: a buffer of the handle's own, its start page-aligned so that an O_DIRECT
  // tier reads straight into it. Not zeroed: the read fills every byte handed out.
  std::unique_ptr<uint8_t[]> owned;
  std::span<uint8_t> out = arena_span;
  if (slot == kNil) {
    owned = std::make_unique_for_overwrite<uint8_t[]>(*length + kReadAlign - 1);
    const auto addr = reinterpret_cast<uintptr_t>(owned.get());
    out = std::span<uint8_t>(owned.get() + (kReadAlign - addr % kReadAlign) % kReadAlign, *length);
  }
  const Result<uint64_t, StoreError> n = m.ssd_->read(key, out);
  m.guard_read(key, -1);

  lk.lock();
  --m.ssd_users_;
  m.spill_done_.notify_all();
  if (!n || *n != *length) {
    if (slot != kNil) {
      m.free_slot(slot);
    }
    ++m.ssd_misses_;
    if (!n) {
      return n.error();
    }
    return make_error(StoreError::kNotFound, "the SSD record changed while it was read");
  }
  ++m.ssd_hits_;
  if (slot == kNil) {
    ReadHandle h;
    h.tier_ = Tier::kSsd;
    h.owned_ = std::move(owned);
    h.data_ = out;
    return h;
  }
  Slot& sl = m.slots_[slot];
  if (m.stopped_) {
    m.free_slot(slot);
    return make_error(StoreError::kStopped, "the block store is stopping");
  }
  sl.state = SlotState::kComplete;
  sl.on_ssd = true;
  m.lru_push_mru(slot);
  ++m.ram_blocks_;
  m.ram_block_bytes_ += m.slot_bytes(sl);
  ++m.promotions_;
  if (m.over_watermark()) {
    m.spill_kick_ = true;
    m.maint_cv_.notify_one();
  }
  return pin(slot, Tier::kSsd);
}

void BlockStore::unpin(uint32_t slot) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mu_);
    --m.open_handles_;
    Slot& sl = m.slots_[slot];
    assert(sl.pins > 0);
    if (--sl.pins == 0) {
      --m.pinned_blocks_;
    }
  }
  m.spill_done_.notify_all();
}

StoreStats BlockStore::stats() const {
  Impl& m = *impl_;
  StoreStats st;
  std::unique_lock<std::mutex> lk(m.mu_);
  st.ram.hits = m.ram_hits_;
  st.ram.misses = m.ram_misses_;
  st.ram.bytes = m.ram_block_bytes_;
  st.ram.blocks = m.ram_blocks_;
  st.ram.evictions = m.ram_evictions_;
  st.ram.capacity = m.arena_->bytes();
  st.ssd.hits = m.ssd_hits_;
  st.ssd.misses = m.ssd_misses_;
  st.ssd.capacity = m.cfg_.ssd_enabled ? m.cfg_.ssd.max_bytes : 0;
  st.puts = m.puts_;
  st.refreshes = m.refreshes_;
  st.spilled_blocks = m.spilled_blocks_;
  st.spilled_bytes = m.spilled_bytes_;
  st.spill_errors = m.spill_errors_;
  st.promotions = m.promotions_;
  st.leases_granted = m.leases_granted_;
  st.leases_active = m.prune_ram_leases(m.clock_.now());
  st.pins_active = m.pinned_blocks_;
  st.ssd_error = m.ssd_error_;
  const SsdStats ssd = m.ssd_ ? m.ssd_->stats() : m.last_ssd_stats_;
  lk.unlock();
  st.leases_active += m.ssd_leases_active();
  st.ssd.bytes = ssd.bytes;
  st.ssd.blocks = ssd.blocks;
  st.ssd.evictions = ssd.evictions;
  st.ttl_expiries = ssd.ttl_expiries;
  st.checksum_failures = ssd.checksum_failures;
  st.torn_tails = ssd.torn_tails;
  st.scan_bytes_done = ssd.scan_bytes_done;
  st.scan_bytes_total = ssd.scan_bytes_total;
  st.scan_complete = m.cfg_.ssd_enabled ? ssd.scan_complete : true;
  st.ssd_direct_io = ssd.direct_io;
  if (st.ssd_error.empty()) {
    st.ssd_error = ssd.last_error;
  }
  return st;
}

int BlockStore::arena_fd() const {
  return impl_->arena_->fd();
}
uint64_t BlockStore::arena_bytes() const {
  return impl_->arena_->bytes();
}

}  // namespace cgn::kvcache
