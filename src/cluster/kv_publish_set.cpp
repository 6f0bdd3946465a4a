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
      }
      lru_.splice(lru_.begin(), lru_, found->second);
      continue;
    }
    // Evicted but not yet deleted from etcd: the key is still there (with this value when it
    // named the engine), so it needs no put.
    bool still_in_etcd = false;
    if (auto pending = pending_deletes_.find(d); pending != pending_deletes_.end()) {
      still_in_etcd = pending->second == routing::Tier::kEngine;
      pending_deletes_.erase(pending);
    }
    lru_.push_front(Entry{d, still_in_etcd, routing::Tier::kEngine});
    map_.emplace(d, lru_.begin());
  }
  while (map_.size() > capacity_) {
    evict_back();
  }
}

size_t PublishedSet::set_residency(std::span<const std::pair<Digest, routing::Tier>> resident,
                                   std::span<const Digest> gone) {
  size_t changed = 0;
  for (const Digest& d : gone) {
    auto found = map_.find(d);
    if (found == map_.end() || found->second->tier == routing::Tier::kEngine) {
      continue;  // an engine-held prefix stays published as the engine's
    }
    if (found->second->published && !clear_all_) {
      pending_deletes_[d] = found->second->tier;
    }
    lru_.erase(found->second);
    map_.erase(found);
    ++changed;
  }
  for (const auto& [d, tier] : resident) {
    if (auto found = map_.find(d); found != map_.end()) {
      Entry& e = *found->second;
      if (e.tier != routing::Tier::kEngine && e.tier != tier) {
        e.tier = tier;
        e.published = false;
        ++changed;
      }
      continue;
    }
    if (map_.size() >= capacity_) {
      continue;  // the cap holds; what the engine holds is never displaced by a tier
    }
    auto pending = pending_deletes_.find(d);
    const bool still_in_etcd = pending != pending_deletes_.end() && pending->second == tier;
    if (pending != pending_deletes_.end()) {
      pending_deletes_.erase(pending);
    }
    lru_.push_back(Entry{d, still_in_etcd, tier});  // oldest: evicted before engine prefixes
    map_.emplace(d, std::prev(lru_.end()));
    ++changed;
  }
  return changed;
}

std::optional<routing::Tier> PublishedSet::tier_of(const Digest& d) const {
  auto found = map_.find(d);
  if (found == map_.end()) {
    return std::nullopt;
  }
  return found->second->tier;
}

void PublishedSet::set_capacity(size_t capacity) {
  capacity_ = capacity;
  while (map_.size() > capacity_) {
    evict_back();
  }
}

size_t PublishedSet::prune_oldest(size_t n) {
  size_t done = 0;
  while (done < n && !lru_.empty()) {
    evict_back();
    ++done;
  }
  return done;
}

void PublishedSet::clear() {
  lru_.clear();
  map_.clear();
  pending_deletes_.clear();
  clear_all_ = true;
}

void PublishedSet::evict_back() {
  const Entry& e = lru_.back();
  if (e.published && !clear_all_) {
    pending_deletes_[e.digest] = e.tier;
  }
  map_.erase(e.digest);
  lru_.pop_back();
}

PrefixChanges PublishedSet::take_changes() {
  PrefixChanges c;
  c.clear_all = clear_all_;
  clear_all_ = false;
  // Every unpublished entry goes into exactly one flush (oldest-used first).
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    if (!it->published) {
      c.puts.push_back(it->digest);
      c.put_tiers.push_back(it->tier);
      it->published = true;
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
  for (Entry& e : lru_) {
    e.published = false;
  }
  pending_deletes_.clear();
  clear_all_ = false;
}

std::vector<Digest> PublishedSet::entries() const {
  std::vector<Digest> out;
  out.reserve(lru_.size());
  for (const Entry& e : lru_) {
    out.push_back(e.digest);
  }
  return out;
}

}  // namespace cgn::cluster
