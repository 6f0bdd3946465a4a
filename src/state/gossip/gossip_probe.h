// GossipProbe: the gossip counters as Prometheus metrics (cgn_gossip_*), refreshed from a node's
// CoreStats at every scrape through a registry collect callback. The probe keeps telemetry out of
// the protocol core (STYLE.md: metrics in a per-module probe).
//
// Metrics: cgn_gossip_packets_total{direction}, cgn_gossip_bytes_total{direction},
// cgn_gossip_packets_rejected_total{reason} (size, magic, version, auth, malformed, bad_cluster),
// cgn_gossip_members{state} (live, dead), cgn_gossip_member_deaths_total,
// cgn_gossip_generation_supersedes_total, cgn_gossip_deltas_cut_total,
// cgn_gossip_digests_sampled_total, cgn_gossip_name_conflicts_total.
//
// Thread-safety: the callback runs on the scraping thread and reads the node under its mutex.
// Destroy the probe (which removes the callback) before the node.
#pragma once

#include <cstdint>
#include <mutex>

#include "core/metrics.h"
#include "state/gossip/udp_node.h"

namespace cgn::gossip {

class GossipProbe {
 public:
  GossipProbe(metrics::Registry& registry, const GossipNode& node);
  ~GossipProbe();
  GossipProbe(const GossipProbe&) = delete;
  GossipProbe& operator=(const GossipProbe&) = delete;

 private:
  void collect();

  metrics::Registry& registry_;
  const GossipNode& node_;
  metrics::Counter packets_in_, packets_out_, bytes_in_, bytes_out_;
  metrics::Counter rejected_[6];
  metrics::Counter deaths_, supersedes_, cut_, sampled_, conflicts_;
  metrics::Gauge live_, dead_;
  uint64_t callback_ = 0;
  std::mutex mu_;
  CoreStats last_{};
};

}  // namespace cgn::gossip
