#include "cluster/kv_publish_set.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

namespace cgn::cluster {

std::string kv_prefix_value(uint64_t epoch, routing::Tier tier) {
  if (tier == routing::Tier::kEngine) {
    return std::to_string(epoch);
  }
  return R"({"epoch":)" + std::to_string(epoch) + R"(,"tier":")" + std::string(routing::to_string(tier)) +
         "\"}";
}

Result<KvPrefixValue, KvValueError> parse_kv_prefix_value(std::string_view value) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) {
    value.remove_prefix(1);
  }
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) {
    value.remove_suffix(1);
  }
  KvPrefixValue out;
  if (!value.starts_with('{')) {
    uint64_t epoch = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), epoch);
    if (!value.empty() && ec == std::errc{} && p == value.data() + value.size()) {
      out.epoch = epoch;
    }
    return out;
  }
  const auto j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return make_error(KvValueError::kInvalid, std::string("live-prefix value is not valid JSON"));
  }
  const auto epoch = j.find("epoch");
  if (epoch == j.end() || !epoch->is_number_unsigned()) {
    return make_error(KvValueError::kInvalid,
                      std::string("live-prefix value: \"epoch\" must be a non-negative integer"));
  }
  out.epoch = epoch->get<uint64_t>();
  const auto tier = j.find("tier");
  const std::string name = tier != j.end() && tier->is_string() ? tier->get<std::string>() : "";
  if (name == "engine") {
    out.tier = routing::Tier::kEngine;
  } else if (name == "ram") {
    out.tier = routing::Tier::kRam;
  } else if (name == "ssd") {
    out.tier = routing::Tier::kSsd;
  } else {
    return make_error(KvValueError::kInvalid,
                      std::string(R"(live-prefix value: "tier" must be "engine", "ram" or "ssd")"));
  }
  return out;
}

size_t publish_capacity(uint64_t total_blocks, uint32_t engine_block_tokens, uint32_t block_bytes,
                        size_t cap) {
  if (total_blocks == 0 || engine_block_tokens == 0 || block_bytes == 0) {
    return cap;
  }
  // Bounded before multiplying so an absurd scrape cannot overflow.
  const uint64_t blocks = std::min<uint64_t>(total_blocks, uint64_t{1} << 32);
  const uint64_t bytes = blocks * engine_block_tokens * kBytesPerToken;
  return static_cast<size_t>(std::min<uint64_t>(bytes / block_bytes, cap));
}

size_t digests_for_engine_blocks(uint64_t n, uint32_t engine_block_tokens, uint32_t block_bytes) {
  if (n == 0) {
    return 0;
  }
  const uint64_t blocks = std::min<uint64_t>(n, uint64_t{1} << 32);  // bounded before multiplying
  if (engine_block_tokens == 0 || block_bytes == 0) {
    return static_cast<size_t>(blocks);
  }
  const uint64_t bytes = blocks * engine_block_tokens * kBytesPerToken;
  return static_cast<size_t>(std::max<uint64_t>((bytes + block_bytes - 1) / block_bytes, 1));
}

bool under_kv_pressure(uint64_t total_blocks, std::optional<uint64_t> free_blocks, double threshold) {
  if (total_blocks == 0 || !free_blocks.has_value()) {
    return false;
  }
  return static_cast<double>(*free_blocks) < threshold * static_cast<double>(total_blocks);
}

void PublishedSet::touch(std::span<const Digest> chain) {
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Digest& d = *it;
    if (auto found = map_.find(d); found != map_.end()) {
      Entry& e = *found->second;
      if (e.tier != routing::Tier::kEngine) {
        e.tier = routing::Tier::kEngine;  // the engine holds it again: its key's value changes
        e.published = false;
        engine_.splice(engine_.begin(), tiers_, found->second);
      } else {
        engine_.splice(engine_.begin(), engine_, found->second);
      }
      continue;
    }
    // Evicted but not yet deleted from etcd: the key is still there (with this value when it
    // named the engine), so it needs no put.
    bool still_in_etcd = false;
    if (auto pending = pending_deletes_.find(d); pending != pending_deletes_.end()) {
      still_in_etcd = pending->second == routing::Tier::kEngine;
      pending_deletes_.erase(pending);
    }
    engine_.push_front(Entry{d, still_in_etcd, routing::Tier::kEngine});
    map_.emplace(d, engine_.begin());
  }
  enforce_bounds();
}

size_t PublishedSet::set_residency(std::span<const std::pair<Digest, routing::Tier>> resident,
                                   std::span<const Digest> gone) {
  size_t changed = 0;
  for (const Digest& d : gone) {
    residency_.erase(d);
    auto found = map_.find(d);
    if (found == map_.end() || found->second->tier == routing::Tier::kEngine) {
      continue;  // an engine-held prefix stays published as the engine's
    }
    evict(found->second);
    ++changed;
  }
  for (const auto& [d, tier] : resident) {
    residency_[d] = tier;
    changed += add_tier_entry(d, tier) ? 1 : 0;
  }
  return changed;
}

bool PublishedSet::add_tier_entry(const Digest& d, routing::Tier tier) {
  if (auto found = map_.find(d); found != map_.end()) {
    Entry& e = *found->second;
    if (e.tier == routing::Tier::kEngine || e.tier == tier) {
      return false;
    }
    e.tier = tier;
    e.published = false;
    return true;
  }
  if (map_.size() >= cap_) {
    return false;  // the key cap holds; what the engine holds is never displaced by a tier
  }
  auto pending = pending_deletes_.find(d);
  const bool still_in_etcd = pending != pending_deletes_.end() && pending->second == tier;
  if (pending != pending_deletes_.end()) {
    pending_deletes_.erase(pending);
  }
  tiers_.push_front(Entry{d, still_in_etcd, tier});
  map_.emplace(d, tiers_.begin());
  return true;
}

std::optional<routing::Tier> PublishedSet::tier_of(const Digest& d) const {
  auto found = map_.find(d);
  if (found == map_.end()) {
    return std::nullopt;
  }
  return found->second->tier;
}

void PublishedSet::set_capacity(size_t capacity) {
  capacity_ = std::min(capacity, cap_);
  enforce_bounds();
}

size_t PublishedSet::prune_oldest(size_t n) {
  size_t done = 0;
  while (done < n && !engine_.empty()) {
    leave_engine(std::prev(engine_.end()));
    ++done;
  }
  return done;
}

void PublishedSet::clear() {
  engine_.clear();
  tiers_.clear();
  map_.clear();
  pending_deletes_.clear();
  clear_all_ = true;
  // What kvcached holds does not depend on the engine's epoch: published again under the new one.
  for (const auto& [d, tier] : residency_) {
    add_tier_entry(d, tier);
  }
}

void PublishedSet::evict(std::list<Entry>::iterator it) {
  if (it->published && !clear_all_) {
    pending_deletes_[it->digest] = it->tier;
  }
  map_.erase(it->digest);
  (it->tier == routing::Tier::kEngine ? engine_ : tiers_).erase(it);
}

void PublishedSet::leave_engine(std::list<Entry>::iterator it) {
  auto res = residency_.find(it->digest);
  if (res == residency_.end()) {
    evict(it);
    return;
  }
  it->tier = res->second;  // kvcached holds it: published at its tier from now on
  it->published = false;
  tiers_.splice(tiers_.begin(), engine_, it);
}

void PublishedSet::enforce_bounds() {
  while (engine_.size() > capacity_) {
    leave_engine(std::prev(engine_.end()));
  }
  while (map_.size() > cap_ && !tiers_.empty()) {
    evict(std::prev(tiers_.end()));
  }
}

PrefixChanges PublishedSet::take_changes() {
  PrefixChanges c;
  c.clear_all = clear_all_;
  clear_all_ = false;
  // Every unpublished entry goes into exactly one flush (oldest first: tiers, then the engine's
  // least recently used).
  for (auto* list : {&tiers_, &engine_}) {
    for (auto it = list->rbegin(); it != list->rend(); ++it) {
      if (!it->published) {
        c.puts.push_back(it->digest);
        c.put_tiers.push_back(it->tier);
        it->published = true;
      }
    }
  }
  c.deletes.reserve(pending_deletes_.size());
  for (const auto& [d, tier] : pending_deletes_) {
    c.deletes.push_back(d);
  }
  pending_deletes_.clear();
  return c;
}

void PublishedSet::restore_changes(const PrefixChanges& failed) {
  if (failed.clear_all) {
    clear_all_ = true;
  }
  for (const Digest& d : failed.puts) {
    if (auto found = map_.find(d); found != map_.end()) {
      found->second->published = false;
    } else {
      // Evicted after the failed flush took it: its put never landed, so no delete is needed.
      pending_deletes_.erase(d);
    }
  }
  if (clear_all_) {
    return;  // the pending clear removes everything anyway
  }
  for (const Digest& d : failed.deletes) {
    if (!map_.contains(d)) {
      pending_deletes_.emplace(d, routing::Tier::kEngine);  // its value is unknown: put again if re-touched
    }
  }
}

void PublishedSet::mark_unpublished() {
  for (auto* list : {&engine_, &tiers_}) {
    for (Entry& e : *list) {
      e.published = false;
    }
  }
  pending_deletes_.clear();
  clear_all_ = false;
}

std::vector<Digest> PublishedSet::entries() const {
  std::vector<Digest> out;
  out.reserve(map_.size());
  for (const auto* list : {&engine_, &tiers_}) {
    for (const Entry& e : *list) {
      out.push_back(e.digest);
    }
  }
  return out;
}

}  // namespace cgn::cluster
