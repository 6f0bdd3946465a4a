#include "kvcached/kvcached_metrics.h"

namespace cgn::kvcached {

void KvcachedMetrics::Mirror::set(uint64_t v) {
  if (v > last) {
    counter.inc(v - last);
  }
  last = v;
}

namespace {

metrics::Counter counter(metrics::Registry& r, const std::string& name, const std::string& help) {
  return r.counter(name, help).with({});
}

metrics::Gauge gauge(metrics::Registry& r, const std::string& name, const std::string& help) {
  return r.gauge(name, help).with({});
}

}  // namespace

KvcachedMetrics::KvcachedMetrics(metrics::Registry& registry, StatsSource stats)
    : registry_(registry),
      stats_(std::move(stats)),
      grpc_requests_(registry.counter("cgn_kvcached_grpc_requests_total",
                                      "KvCache gRPC calls by method and status code.", {"method", "code"})),
      fast_requests_(registry.counter("cgn_kvcached_fast_path_requests_total",
                                      "Local fast path requests by op and status.", {"op", "status"})),
      connections_(
          gauge(registry, "cgn_kvcached_fast_path_connections", "Open local fast path connections.")),
      refused_(counter(registry, "cgn_kvcached_fast_path_connections_refused_total",
                       "Local fast path connections closed at accept (max_connections reached).")) {
  auto& hits = registry.counter("cgn_kvcached_hits_total", "Block reads served, by tier.", {"tier"});
  auto& misses = registry.counter("cgn_kvcached_misses_total",
                                  "Block reads not served by the tier (ssd: in neither tier).", {"tier"});
  auto& evictions =
      registry.counter("cgn_kvcached_evictions_total", "Blocks dropped from a tier for space.", {"tier"});
  auto& bytes = registry.gauge("cgn_kvcached_bytes", "Bytes held per tier (ssd: record bytes).", {"tier"});
  auto& blocks = registry.gauge("cgn_kvcached_blocks", "Complete blocks held per tier.", {"tier"});
  auto& capacity = registry.gauge("cgn_kvcached_capacity_bytes",
                                  "Configured bytes per tier (ssd 0: unbounded).", {"tier"});
  hits_ram_.counter = hits.with({"ram"});
  hits_ssd_.counter = hits.with({"ssd"});
  misses_ram_.counter = misses.with({"ram"});
  misses_ssd_.counter = misses.with({"ssd"});
  evictions_ram_.counter = evictions.with({"ram"});
  evictions_ssd_.counter = evictions.with({"ssd"});
  bytes_ram_ = bytes.with({"ram"});
  bytes_ssd_ = bytes.with({"ssd"});
  blocks_ram_ = blocks.with({"ram"});
  blocks_ssd_ = blocks.with({"ssd"});
  capacity_ram_ = capacity.with({"ram"});
  capacity_ssd_ = capacity.with({"ssd"});
  puts_.counter = counter(registry, "cgn_kvcached_puts_total", "Complete puts of new blocks.");
  refreshes_.counter = counter(registry, "cgn_kvcached_refreshes_total",
                               "Puts of a block already resident (recency refreshed).");
  spilled_blocks_.counter =
      counter(registry, "cgn_kvcached_spilled_blocks_total", "Blocks copied RAM -> SSD.");
  spilled_bytes_.counter = counter(registry, "cgn_kvcached_spilled_bytes_total", "Bytes copied RAM -> SSD.");
  spill_errors_.counter =
      counter(registry, "cgn_kvcached_spill_errors_total", "Spills that failed (disk full, I/O errors).");
  promotions_.counter =
      counter(registry, "cgn_kvcached_promotions_total", "Blocks copied SSD -> RAM for pinned reads.");
  ttl_expiries_.counter =
      counter(registry, "cgn_kvcached_ttl_expiries_total", "SSD records dropped for age.");
  checksum_failures_.counter = counter(registry, "cgn_kvcached_checksum_failures_total",
                                       "SSD records dropped because their checksum failed (never served).");
  torn_tails_.counter = counter(registry, "cgn_kvcached_torn_tails_total",
                                "Segment tails cut at start (a write cut by a crash).");
  leases_granted_.counter =
      counter(registry, "cgn_kvcached_leases_granted_total", "Blocks leased by lookups.");
  leases_active_ = gauge(registry, "cgn_kvcached_leases_active", "Blocks whose lease has not expired.");
  pins_active_ = gauge(registry, "cgn_kvcached_pins_active", "Blocks pinned by open reads.");
  scan_done_ = gauge(registry, "cgn_kvcached_scan_bytes_done", "SSD segment bytes scanned since start.");
  scan_total_ = gauge(registry, "cgn_kvcached_scan_bytes_total", "SSD segment bytes to scan at start.");
  scan_complete_ =
      gauge(registry, "cgn_kvcached_scan_complete", "1 once the start-up scan of the SSD tier is done.");
  ssd_healthy_ = gauge(registry, "cgn_kvcached_ssd_healthy",
                       "0 while the SSD tier cannot write (disk full, I/O errors); else 1.");
  callback_id_ = registry.add_collect_callback([this] { collect(); });
}

KvcachedMetrics::~KvcachedMetrics() {
  registry_.remove_collect_callback(callback_id_);
}

void KvcachedMetrics::grpc_request(std::string_view method, std::string_view code) {
  grpc_requests_.with({std::string(method), std::string(code)}).inc();
}

void KvcachedMetrics::fast_path_request(std::string_view op, std::string_view status) {
  fast_requests_.with({std::string(op), std::string(status)}).inc();
}

void KvcachedMetrics::collect() {
  const kvcache::StoreStats s = stats_();
  const std::lock_guard lock(mu_);
  hits_ram_.set(s.ram.hits);
  hits_ssd_.set(s.ssd.hits);
  misses_ram_.set(s.ram.misses);
  misses_ssd_.set(s.ssd.misses);
  evictions_ram_.set(s.ram.evictions);
  evictions_ssd_.set(s.ssd.evictions);
  puts_.set(s.puts);
  refreshes_.set(s.refreshes);
  spilled_blocks_.set(s.spilled_blocks);
  spilled_bytes_.set(s.spilled_bytes);
  spill_errors_.set(s.spill_errors);
  promotions_.set(s.promotions);
  ttl_expiries_.set(s.ttl_expiries);
  checksum_failures_.set(s.checksum_failures);
  torn_tails_.set(s.torn_tails);
  leases_granted_.set(s.leases_granted);
  bytes_ram_.set(static_cast<double>(s.ram.bytes));
  bytes_ssd_.set(static_cast<double>(s.ssd.bytes));
  blocks_ram_.set(static_cast<double>(s.ram.blocks));
  blocks_ssd_.set(static_cast<double>(s.ssd.blocks));
  capacity_ram_.set(static_cast<double>(s.ram.capacity));
  capacity_ssd_.set(static_cast<double>(s.ssd.capacity));
  leases_active_.set(static_cast<double>(s.leases_active));
  pins_active_.set(static_cast<double>(s.pins_active));
  scan_done_.set(static_cast<double>(s.scan_bytes_done));
  scan_total_.set(static_cast<double>(s.scan_bytes_total));
  scan_complete_.set(s.scan_complete ? 1.0 : 0.0);
  ssd_healthy_.set(s.ssd_error.empty() ? 1.0 : 0.0);
}

}  // namespace cgn::kvcached
