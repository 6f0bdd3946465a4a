#include "agent/kv_residency.h"

#include <algorithm>

#include "agent/driver.h"

namespace cgn::agent {

kvcache::BlockNamespace kv_namespace(const config::EngineConfig& engine, uint32_t block_bytes) {
  kvcache::BlockNamespace ns;
  ns.model = detail::served_name_or_model(engine);
  ns.dtype = "auto";
  ns.tp_rank = 0;
  ns.tp_size = 1;
  ns.block_tokens = std::max<uint32_t>(block_bytes / 4, 1);
  return ns;
}

routing::Tier to_routing_tier(kvcache::Tier t) {
  return t == kvcache::Tier::kSsd ? routing::Tier::kSsd : routing::Tier::kRam;
}

KvResidency::KvResidency(KvResidencyOptions options, KvLookupFn lookup, ResidencySink sink)
    : options_(std::move(options)),
      lookup_(std::move(lookup)),
      sink_(std::move(sink)),
      log_(log::get("agent.residency")),
      changes_(log_) {}

KvResidency::~KvResidency() {
  stop();
}

void KvResidency::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) {
    return;
  }
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void KvResidency::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void KvResidency::track(std::span<const Digest> chain) {
  if (chain.empty()) {
    return;
  }
  // Chained digests: a tracked chain is a prefix of `chain` when its last digest sits at the
  // same depth in `chain` (and the other way round).
  const size_t keep = std::min(chain.size(), options_.max_digests);
  std::lock_guard lock(mu_);
  for (auto it = chains_.begin(); it != chains_.end();) {
    if (it->size() >= keep && (*it)[keep - 1] == chain[keep - 1]) {
      return;  // already tracked, whole
    }
    if (it->size() < keep && chain[it->size() - 1] == it->back()) {
      tracked_ -= it->size();
      it = chains_.erase(it);
    } else {
      ++it;
    }
  }
  chains_.emplace_back(chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(keep));
  tracked_ += keep;
  while (tracked_ > options_.max_digests && chains_.size() > 1) {
    tracked_ -= chains_.front().size();
    chains_.pop_front();
  }
}

std::vector<Digest> KvResidency::resident_run(std::span<const Digest> chain) const {
  std::vector<Digest> out;
  std::lock_guard lock(mu_);
  for (const Digest& d : chain) {
    if (!resident_.contains(d)) {
      break;
    }
    out.push_back(d);
  }
  return out;
}

bool KvResidency::refresh_once() {
  std::vector<std::vector<Digest>> chains;
  {
    std::lock_guard lock(mu_);
    chains.assign(chains_.begin(), chains_.end());
  }
  if (chains.empty()) {
    return true;
  }
  auto answer = lookup_(options_.ns, chains, /*lease_ms=*/0);
  if (!answer) {
    changes_.update("kvcached", "unreachable", spdlog::level::warn,
                    "cgn-kvcached did not answer BatchLookup; residency is not refreshed",
                    log::kv("error", answer.error().message));
    std::lock_guard lock(mu_);
    ++failures_;
    return false;
  }
  changes_.update("kvcached", "reachable", spdlog::level::info, "cgn-kvcached answers BatchLookup");
  std::unordered_map<Digest, routing::Tier, DigestHash> now;
  for (size_t i = 0; i < chains.size() && i < answer->runs.size(); ++i) {
    const auto& run = answer->runs[i];
    for (size_t j = 0; j < run.size() && j < chains[i].size(); ++j) {
      now[chains[i][j]] = to_routing_tier(run[j]);
    }
  }
  ResidencyChange change;
  {
    std::lock_guard lock(mu_);
    for (const auto& [d, tier] : now) {
      auto old = resident_.find(d);
      if (old == resident_.end() || old->second != tier) {
        change.resident.emplace_back(d, tier);
      }
    }
    for (const auto& [d, tier] : resident_) {
      if (!now.contains(d)) {
        change.gone.push_back(d);
      }
    }
    resident_ = std::move(now);
    ++rounds_;
  }
  if (sink_ && !change.empty()) {
    sink_(change);
  }
  return true;
}

void KvResidency::run() {
  for (;;) {
    refresh_once();
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, options_.interval, [this] { return stopping_; })) {
      return;
    }
  }
}

uint64_t KvResidency::rounds() const {
  std::lock_guard lock(mu_);
  return rounds_;
}

uint64_t KvResidency::failures() const {
  std::lock_guard lock(mu_);
  return failures_;
}

size_t KvResidency::tracked_digests() const {
  std::lock_guard lock(mu_);
  return tracked_;
}

}  // namespace cgn::agent
