// cgn-kvcached's metrics (cgn_kvcached_*, docs/kvcached.md "Metrics"). The store's counters and
// gauges are mirrored from BlockStore::stats() when /metrics is scraped (a collect callback), so
// the hot path pays nothing for them; the daemon's own counters (requests by method and code,
// fast-path connections) are handles updated where the event happens.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "core/metrics.h"
#include "kvcache/store_types.h"

namespace cgn::kvcached {

class KvcachedMetrics {
 public:
  using StatsSource = std::function<kvcache::StoreStats()>;

  // Registers the families in `registry` and a collect callback reading `stats` (removed by the
  // destructor; `stats` must stay callable until then).
  KvcachedMetrics(metrics::Registry& registry, StatsSource stats);
  ~KvcachedMetrics();
  KvcachedMetrics(const KvcachedMetrics&) = delete;
  KvcachedMetrics& operator=(const KvcachedMetrics&) = delete;

  // One gRPC call ended with `code` (grpc::StatusCode's name, "OK", "NOT_FOUND", ...).
  void grpc_request(std::string_view method, std::string_view code);
  // One fast-path request answered with `status` (fast_path.h's names).
  void fast_path_request(std::string_view op, std::string_view status);
  void fast_path_connection_opened() { connections_.inc(); }
  void fast_path_connection_closed() { connections_.dec(); }
  void fast_path_connection_refused() { refused_.inc(); }

 private:
  void collect();

  metrics::Registry& registry_;
  StatsSource stats_;
  uint64_t callback_id_ = 0;
  metrics::CounterFamily& grpc_requests_;
  metrics::CounterFamily& fast_requests_;
  metrics::Gauge connections_;
  metrics::Counter refused_;

  // Mirrors of the store's counters: the last value seen, so a scrape adds the difference.
  struct Mirror {
    metrics::Counter counter;
    uint64_t last = 0;
    void set(uint64_t v);
  };
  std::mutex mu_;  // guards the mirrors (collect callbacks are serialised already; cheap)
  Mirror hits_ram_, hits_ssd_, misses_ram_, misses_ssd_, evictions_ram_, evictions_ssd_;
  Mirror puts_, refreshes_, spilled_blocks_, spilled_bytes_, spill_errors_, promotions_, ttl_expiries_,
      checksum_failures_, torn_tails_, leases_granted_;
  metrics::Gauge bytes_ram_, bytes_ssd_, blocks_ram_, blocks_ssd_, capacity_ram_, capacity_ssd_;
  metrics::Gauge leases_active_, pins_active_, scan_done_, scan_total_, scan_complete_, ssd_healthy_;
};

}  // namespace cgn::kvcached
