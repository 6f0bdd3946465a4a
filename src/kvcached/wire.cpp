#include "kvcached/wire.h"

#include <fmt/format.h>

#include <cstring>

#include "cognitora/v1/kvcached.pb.h"

namespace cgn::kvcached {

namespace {

Error<WireError> invalid(std::string message) {
  return make_error(WireError::kInvalid, std::move(message));
}

}  // namespace

Result<kvcache::BlockNamespace, WireError> decode_namespace(const cognitora::v1::BlockNamespace& m) {
  kvcache::BlockNamespace ns;
  ns.model = m.model();
  ns.dtype = m.dtype();
  ns.tp_rank = m.tp_rank();
  ns.tp_size = m.tp_size();
  ns.block_tokens = m.block_tokens();
  ns.tenant = m.tenant();
  if (auto v = kvcache::validate(ns); !v) {
    return invalid("namespace: " + v.error().message);
  }
  return ns;
}

Result<Digest, WireError> decode_digest(std::string_view bytes, std::string_view field) {
  Digest d{};
  if (bytes.size() != d.size()) {
    return invalid(fmt::format("{} must be {} bytes, got {}", field, d.size(), bytes.size()));
  }
  std::memcpy(d.data(), bytes.data(), d.size());
  return d;
}

Result<PutHeader, WireError> decode_put_header(const cognitora::v1::PutBlockRequest& m,
                                               uint64_t max_block_bytes) {
  if (!m.has_namespace_()) {
    return invalid("the first PutBlock message must carry the namespace");
  }
  auto ns = decode_namespace(m.namespace_());
  if (!ns) {
    return ns.error();
  }
  auto d = decode_digest(m.digest(), "digest");
  if (!d) {
    return d.error();
  }
  if (m.length() == 0) {
    return invalid("length must be > 0");
  }
  if (m.length() > max_block_bytes) {
    return invalid(fmt::format("length {} is above max_block_bytes ({})", m.length(), max_block_bytes));
  }
  if (m.data().size() > m.length()) {
    return invalid(fmt::format("{} data bytes for a block of length {}", m.data().size(), m.length()));
  }
  return PutHeader{std::move(*ns), *d, m.length()};
}

Status<WireError> check_put_continuation(const cognitora::v1::PutBlockRequest& m) {
  if (m.has_namespace_() || !m.digest().empty() || m.length() != 0) {
    return invalid("only the first PutBlock message may carry namespace, digest and length");
  }
  return Ok{};
}

Result<GetRequest, WireError> decode_get(const cognitora::v1::GetBlockRequest& m) {
  auto ns = decode_namespace(m.namespace_());
  if (!ns) {
    return ns.error();
  }
  auto d = decode_digest(m.digest(), "digest");
  if (!d) {
    return d.error();
  }
  return GetRequest{std::move(*ns), *d};
}

Result<LookupRequest, WireError> decode_lookup(const cognitora::v1::BatchLookupRequest& m) {
  auto ns = decode_namespace(m.namespace_());
  if (!ns) {
    return ns.error();
  }
  if (static_cast<size_t>(m.requests_size()) > kMaxLookupRequests) {
    return invalid(
        fmt::format("{} requests in one BatchLookup; at most {}", m.requests_size(), kMaxLookupRequests));
  }
  size_t total = 0;
  for (const auto& r : m.requests()) {
    total += static_cast<size_t>(r.digests_size());
  }
  if (total > kMaxLookupDigests) {
    return invalid(fmt::format("{} digests in one BatchLookup; at most {}", total, kMaxLookupDigests));
  }
  LookupRequest out;
  out.ns = std::move(*ns);
  out.lease_ms = m.lease_ms();
  out.requests.reserve(static_cast<size_t>(m.requests_size()));
  for (int i = 0; i < m.requests_size(); ++i) {
    const auto& r = m.requests(i);
    std::vector<Digest> digests;
    digests.reserve(static_cast<size_t>(r.digests_size()));
    for (int j = 0; j < r.digests_size(); ++j) {
      auto d = decode_digest(r.digests(j), fmt::format("requests[{}].digests[{}]", i, j));
      if (!d) {
        return d.error();
      }
      digests.push_back(*d);
    }
    out.requests.push_back(std::move(digests));
  }
  return out;
}

kvcache::Tier parse_tier(std::string_view s) {
  if (s == kvcache::to_string(kvcache::Tier::kRam)) {
    return kvcache::Tier::kRam;
  }
  if (s == kvcache::to_string(kvcache::Tier::kSsd)) {
    return kvcache::Tier::kSsd;
  }
  return kvcache::Tier::kNone;
}

namespace {

void encode_tier(const kvcache::TierStats& t, cognitora::v1::TierStats& out) {
  out.set_hits(t.hits);
  out.set_misses(t.misses);
  out.set_bytes(t.bytes);
  out.set_blocks(t.blocks);
  out.set_evictions(t.evictions);
  out.set_capacity_bytes(t.capacity);
}

kvcache::TierStats decode_tier(const cognitora::v1::TierStats& m) {
  kvcache::TierStats t;
  t.hits = m.hits();
  t.misses = m.misses();
  t.bytes = m.bytes();
  t.blocks = m.blocks();
  t.evictions = m.evictions();
  t.capacity = m.capacity_bytes();
  return t;
}

}  // namespace

void encode_stats(const kvcache::StoreStats& s, cognitora::v1::StatsResponse& out) {
  encode_tier(s.ram, *out.mutable_ram());
  encode_tier(s.ssd, *out.mutable_ssd());
  out.set_puts(s.puts);
  out.set_refreshes(s.refreshes);
  out.set_spilled_blocks(s.spilled_blocks);
  out.set_spilled_bytes(s.spilled_bytes);
  out.set_spill_errors(s.spill_errors);
  out.set_ttl_expiries(s.ttl_expiries);
  out.set_checksum_failures(s.checksum_failures);
  out.set_torn_tails(s.torn_tails);
  out.set_leases_active(s.leases_active);
  out.set_scan_bytes_done(s.scan_bytes_done);
  out.set_scan_bytes_total(s.scan_bytes_total);
  out.set_scan_complete(s.scan_complete);
  out.set_ssd_error(s.ssd_error);
  out.set_promotions(s.promotions);
  out.set_leases_granted(s.leases_granted);
  out.set_pins_active(s.pins_active);
}

kvcache::StoreStats decode_stats(const cognitora::v1::StatsResponse& m) {
  kvcache::StoreStats s;
  s.ram = decode_tier(m.ram());
  s.ssd = decode_tier(m.ssd());
  s.puts = m.puts();
  s.refreshes = m.refreshes();
  s.spilled_blocks = m.spilled_blocks();
  s.spilled_bytes = m.spilled_bytes();
  s.spill_errors = m.spill_errors();
  s.ttl_expiries = m.ttl_expiries();
  s.checksum_failures = m.checksum_failures();
  s.torn_tails = m.torn_tails();
  s.leases_active = m.leases_active();
  s.scan_bytes_done = m.scan_bytes_done();
  s.scan_bytes_total = m.scan_bytes_total();
  s.scan_complete = m.scan_complete();
  s.ssd_error = m.ssd_error();
  s.promotions = m.promotions();
  s.leases_granted = m.leases_granted();
  s.pins_active = m.pins_active();
  return s;
}

void set_namespace(const kvcache::BlockNamespace& ns, cognitora::v1::BlockNamespace& out) {
  out.set_model(ns.model);
  out.set_dtype(ns.dtype);
  out.set_tp_rank(ns.tp_rank);
  out.set_tp_size(ns.tp_size);
  out.set_block_tokens(ns.block_tokens);
  out.set_tenant(ns.tenant);
}

}  // namespace cgn::kvcached
