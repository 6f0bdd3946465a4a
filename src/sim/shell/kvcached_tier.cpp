#include "sim/shell/kvcached_tier.h"

#include <array>

#include "core/log.h"

namespace cgn::sim {

KvcachedTier::KvcachedTier(std::unique_ptr<KvcachedLink> client, kvcache::BlockNamespace ns)
    : client_(std::move(client)), ns_(std::move(ns)) {
  sender_ = std::thread([this] { send_loop(); });
}

KvcachedTier::~KvcachedTier() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  sender_.join();
}

void KvcachedTier::put(std::span<const BlockHash> hashes, uint64_t /*block_bytes*/) {
  {
    std::lock_guard lk(mu_);
    for (BlockHash h : hashes) {
      if (queue_.size() >= kKvcachedPutQueue) {
        queue_.pop_front();
        ++dropped_;
      }
      queue_.push_back(h);
    }
  }
  cv_.notify_one();
}

void KvcachedTier::note_failure(const std::string& what, const std::string& message) {
  std::lock_guard lk(mu_);
  if (!down_) {
    down_ = true;
    log::get("sim")->warn("kvcached {} failed ({}): offloaded KV is recomputed until it answers", what,
                          message);
  }
}

void KvcachedTier::send_loop() {
  for (;;) {
    BlockHash h = 0;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
      if (stop_) {
        return;
      }
      h = queue_.front();
      queue_.pop_front();
      sending_ = true;
    }
    const Digest d = block_digest(h);
    // Synthetic bytes derived from the digest: the simulator has no KV to store.
    std::array<uint8_t, 64> value{};
    for (size_t i = 0; i < value.size(); ++i) {
      value[i] = d[i % d.size()];
    }
    auto r = client_->put(ns_, d, value);
    if (!r.ok() && (r.error().code == kvcached::ClientError::kConnect ||
                    r.error().code == kvcached::ClientError::kUnavailable)) {
      note_failure("put", r.error().message);
    }
    std::lock_guard lk(mu_);
    sending_ = false;
    if (!r.ok()) {
      ++failed_;
    } else if (down_) {
      down_ = false;
      log::get("sim")->info("kvcached answers again: offloading resumed");
    }
  }
}

std::optional<OffloadTier::PutStats> KvcachedTier::put_stats() {
  std::lock_guard lk(mu_);
  return PutStats{.waiting = queue_.size() + (sending_ ? 1 : 0), .dropped = dropped_, .failed = failed_};
}

void KvcachedTier::lookup(std::span<const BlockHash> hashes, Nanos lease, std::vector<OffloadTierKind>& out) {
  std::vector<Digest> req;
  req.reserve(hashes.size());
  for (BlockHash h : hashes) {
    req.push_back(block_digest(h));
  }
  const auto lease_ms = static_cast<uint32_t>(std::max<Nanos>(lease / 1'000'000, 1));
  auto r = client_->lookup(ns_, req, lease_ms);
  if (!r.ok()) {
    note_failure("lookup", r.error().message);
    return;
  }
  for (kvcache::Tier t : *r) {
    if (t == kvcache::Tier::kRam) {
      out.push_back(OffloadTierKind::kRam);
    } else if (t == kvcache::Tier::kSsd) {
      out.push_back(OffloadTierKind::kSsd);
    } else {
      return;
    }
  }
}

}  // namespace cgn::sim
