#include "agent/kv_residency.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "cluster/kv_publish_set.h"
#include "core/metrics.h"
#include "kvcached/wire.h"

namespace cgn::agent {

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

void KvResidency::track(std::span<const Digest> routing, std::span<const Digest> engine) {
  if (engine.empty() || routing.empty()) {
    return;
  }
  // Chained digests: a tracked chain is a prefix of `engine` when its last digest sits at the
  // same depth in `engine` (and the other way round).
  const size_t keep = std::min(engine.size(), options_.max_digests);
  std::lock_guard lock(mu_);
  for (auto it = chains_.begin(); it != chains_.end();) {
    const auto& e = it->engine;
    if (e.size() >= keep && e[keep - 1] == engine[keep - 1]) {
      return;  // already tracked, whole
    }
    if (e.size() < keep && engine[e.size() - 1] == e.back()) {
      tracked_ -= e.size();
      it = chains_.erase(it);
    } else {
      ++it;
    }
  }
  chains_.push_back(Tracked{{routing.begin(), routing.end()},
                            {engine.begin(), engine.begin() + static_cast<std::ptrdiff_t>(keep)}});
  tracked_ += keep;
  while (tracked_ > options_.max_digests && chains_.size() > 1) {
    tracked_ -= chains_.front().engine.size();
    chains_.pop_front();
  }
}

void KvResidency::map_run(const Tracked& t, std::span<const std::optional<routing::Tier>> blocks,
                          std::unordered_map<Digest, routing::Tier, DigestHash>& out) const {
  const uint64_t block_bytes_engine = uint64_t{options_.ns.block_tokens} * cluster::kBytesPerToken;
  if (blocks.empty() || block_bytes_engine == 0 || options_.block_bytes == 0) {
    return;
  }
  for (size_t j = 0; j < t.routing.size(); ++j) {
    const uint64_t first = j * uint64_t{options_.block_bytes} / block_bytes_engine;
    const uint64_t last = ((j + 1) * uint64_t{options_.block_bytes} - 1) / block_bytes_engine;
    if (last >= blocks.size()) {
      break;
    }
    std::optional<routing::Tier> tier = routing::Tier::kRam;
    for (uint64_t b = first; b <= last && tier; ++b) {
      tier = blocks[b] ? std::optional<routing::Tier>(std::max(*tier, *blocks[b])) : std::nullopt;  // coldest
    }
    if (!tier) {
      continue;  // not wholly in kvcached (the engine may hold it: published as the engine's)
    }
    auto [it, fresh] = out.emplace(t.routing[j], *tier);
    if (!fresh && *tier > it->second) {
      it->second = *tier;  // two chains disagree: the colder tier, the cautious credit
    }
  }
}

std::vector<Digest> KvResidency::resident_run(std::span<const Digest> chain) const {
  std::vector<Digest> out;
  std::lock_guard lock(mu_);
  for (const Digest& d : chain) {
    if (resident_.contains(d)) {
      out.push_back(d);
    }
  }
  return out;
}

// kvcached answers at most kvcached::kMaxLookupRequests requests in one BatchLookup: more
// tracked blocks go in several, answered in order.
Result<kvcached::KvLookup, kvcached::ClientError> KvResidency::lookup_in_batches(
    const std::vector<std::vector<Digest>>& requests) const {
  kvcached::KvLookup all;
  all.runs.reserve(requests.size());
  for (size_t at = 0; at < requests.size(); at += kvcached::kMaxLookupRequests) {
    const size_t end = std::min(requests.size(), at + kvcached::kMaxLookupRequests);
    const std::vector<std::vector<Digest>> batch(requests.begin() + static_cast<std::ptrdiff_t>(at),
                                                 requests.begin() + static_cast<std::ptrdiff_t>(end));
    auto answer = lookup_(options_.ns, batch, /*lease_ms=*/0);
    if (!answer) {
      return answer;
    }
    answer->runs.resize(batch.size());  // a short answer: the missing requests found nothing
    for (auto& run : answer->runs) {
      all.runs.push_back(std::move(run));
    }
  }
  return all;
}

bool KvResidency::refresh_once() {
  std::vector<Tracked> tracked;
  {
    std::lock_guard lock(mu_);
    tracked.assign(chains_.begin(), chains_.end());
  }
  if (tracked.empty()) {
    return true;
  }
  // One request per block: BatchLookup answers the unbroken run from a request's first digest,
  // and a prompt whose head the engine still holds has only its tail in kvcached.
  std::vector<std::vector<Digest>> requests;
  for (const auto& t : tracked) {
    for (const Digest& d : t.engine) {
      requests.push_back({d});
    }
  }
  auto answer = lookup_in_batches(requests);
  if (!answer) {
    changes_.update("kvcached", "unreachable", spdlog::level::warn,
                    "cgn-kvcached did not answer BatchLookup; residency is not refreshed",
                    log::kv("error", answer.error().message));
    std::lock_guard lock(mu_);
    ++failures_;
    return false;
  }
  changes_.update("kvcached", "reachable", spdlog::level::info, "cgn-kvcached answers BatchLookup");
  std::unordered_map<Digest, routing::Tier, DigestHash> engine_now;
  std::unordered_map<Digest, routing::Tier, DigestHash> routing_now;
  size_t k = 0;
  for (const auto& t : tracked) {
    std::vector<std::optional<routing::Tier>> blocks(t.engine.size());
    for (size_t b = 0; b < t.engine.size(); ++b, ++k) {
      if (k < answer->runs.size() && !answer->runs[k].empty()) {
        blocks[b] = to_routing_tier(answer->runs[k][0]);
        engine_now[t.engine[b]] = *blocks[b];
      }
    }
    map_run(t, blocks, routing_now);
  }
  ResidencyChange change;
  {
    std::lock_guard lock(mu_);
    for (const auto& [d, tier] : routing_now) {
      auto old = published_.find(d);
      if (old == published_.end() || old->second != tier) {
        change.resident.emplace_back(d, tier);
      }
    }
    for (const auto& [d, tier] : published_) {
      if (!routing_now.contains(d)) {
        change.gone.push_back(d);
      }
    }
    resident_ = std::move(engine_now);
    published_ = std::move(routing_now);
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

KvResidency::Published KvResidency::published() const {
  std::lock_guard lock(mu_);
  Published p;
  for (const auto& [d, tier] : published_) {
    (tier == routing::Tier::kSsd ? p.ssd : p.ram) += 1;
  }
  return p;
}

void add_kv_residency_metrics(metrics::Registry& reg, const KvResidency& r) {
  auto& lookups = reg.counter("cgn_agent_kv_residency_lookups_total",
                              "Residency lookup rounds against cgn-kvcached, by outcome (ok: answered, "
                              "failed: not answered, the last answer stands).",
                              {"outcome"});
  auto ok = lookups.with({"ok"});
  auto failed = lookups.with({"failed"});
  auto tracked = reg.gauge("cgn_agent_kv_residency_tracked_digests",
                           "Engine block digests the residency lookups follow.")
                     .with({});
  auto& published = reg.gauge("cgn_agent_kv_residency_published_digests",
                              "Routing digests the last lookup found in cgn-kvcached, by tier.", {"tier"});
  auto ram = published.with({"ram"});
  auto ssd = published.with({"ssd"});
  auto last = std::make_shared<std::pair<uint64_t, uint64_t>>(0, 0);
  (void)reg.add_collect_callback([=, &r] {
    const uint64_t rounds = r.rounds();
    const uint64_t failures = r.failures();
    ok.inc(rounds - last->first);
    failed.inc(failures - last->second);
    *last = {rounds, failures};
    tracked.set(static_cast<double>(r.tracked_digests()));
    const KvResidency::Published p = r.published();
    ram.set(static_cast<double>(p.ram));
    ssd.set(static_cast<double>(p.ssd));
  });
}

}  // namespace cgn::agent
