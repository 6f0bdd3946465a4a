#include "replay.h"

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/digest.h"

namespace cgn::kvbench {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t delta(uint64_t after, uint64_t before) {
  return after >= before ? after - before : 0;
}

}  // namespace

Digest block_digest(uint64_t hash_id) {
  std::string material = "cgn-kvcached-replay block ";
  for (size_t i = 0; i < 8; ++i) {
    material.push_back(static_cast<char>((hash_id >> (8 * i)) & 0xff));
  }
  return blake3_hash(material);
}

void fill_block(uint64_t hash_id, std::span<uint8_t> out) {
  uint64_t state = hash_id;
  size_t i = 0;
  for (; i + 8 <= out.size(); i += 8) {
    const uint64_t v = splitmix64(state);
    std::memcpy(out.data() + i, &v, 8);
  }
  if (i < out.size()) {
    const uint64_t v = splitmix64(state);
    std::memcpy(out.data() + i, &v, out.size() - i);
  }
}

bool check_block(uint64_t hash_id, std::span<const uint8_t> data) {
  std::vector<uint8_t> want(data.size());
  fill_block(hash_id, want);
  return std::memcmp(want.data(), data.data(), data.size()) == 0;
}

Result<ReplayReport, BenchError> run_replay(const bench::Workload& w, ReplayTarget& target,
                                            const ReplayOptions& opt) {
  if (opt.block_bytes == 0) {
    return make_error(BenchError::kInput, "block bytes must be > 0");
  }
  ReplayReport rep;
  auto before = target.stats();
  if (!before) {
    return before.error();
  }
  rep.before = *before;
  std::vector<uint8_t> block(opt.block_bytes);
  std::vector<uint8_t> readback(opt.block_bytes);
  std::vector<uint64_t> ids;
  const size_t n = (opt.limit == 0 || opt.limit > w.requests.size()) ? w.requests.size() : opt.limit;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t r = 0; r < n; ++r) {
    ids.clear();
    for (const auto& s : w.requests[r].segments) {
      ids.push_back(s.block_id);
    }
    auto run = target.lookup(ids);
    if (!run) {
      return make_error(BenchError::kTarget,
                        "request " + std::to_string(r) + ": lookup: " + run.error().message);
    }
    ++rep.requests;
    rep.blocks += ids.size();
    rep.hits += run->size();
    for (kvcache::Tier t : *run) {
      rep.hits_ram += t == kvcache::Tier::kRam ? 1 : 0;
      rep.hits_ssd += t == kvcache::Tier::kSsd ? 1 : 0;
    }
    if (opt.verify && !run->empty()) {
      const uint64_t id = ids[run->size() - 1];
      auto got = target.get(id, readback);
      if (!got) {
        return make_error(BenchError::kTarget, "request " + std::to_string(r) + ": get of resident hash_id " +
                                                   std::to_string(id) + ": " + got.error().message);
      }
      if (*got != opt.block_bytes || !check_block(id, std::span<const uint8_t>(readback.data(), *got))) {
        return make_error(BenchError::kVerify, "request " + std::to_string(r) + ": hash_id " +
                                                   std::to_string(id) + " read back wrong bytes (" +
                                                   std::to_string(*got) + " bytes)");
      }
      ++rep.verified;
    }
    for (uint64_t id : ids) {
      fill_block(id, block);
      if (auto st = target.put(id, block); !st) {
        return make_error(BenchError::kTarget, "request " + std::to_string(r) + ": put of hash_id " +
                                                   std::to_string(id) + ": " + st.error().message);
      }
    }
  }
  rep.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto after = target.stats();
  if (!after) {
    return after.error();
  }
  rep.after = *after;
  return rep;
}

std::string to_json(const ReplayReport& r, const ReplayOptions& opt, const std::string& path_name) {
  const auto pct = [&](uint64_t x) {
    return r.blocks != 0 ? 100.0 * static_cast<double>(x) / static_cast<double>(r.blocks) : 0.0;
  };
  nlohmann::json j = {
      {"path", path_name},
      {"block_bytes", opt.block_bytes},
      {"requests", r.requests},
      {"blocks", r.blocks},
      {"hits", r.hits},
      {"hits_ram", r.hits_ram},
      {"hits_ssd", r.hits_ssd},
      {"hit_rate_pct", r.hit_rate_pct()},
      {"hit_rate_ram_pct", pct(r.hits_ram)},
      {"hit_rate_ssd_pct", pct(r.hits_ssd)},
      {"verified_reads", r.verified},
      {"wall_s", r.wall_s},
      {"puts", delta(r.after.puts, r.before.puts)},
      {"refreshes", delta(r.after.refreshes, r.before.refreshes)},
      {"spilled_blocks", delta(r.after.spilled_blocks, r.before.spilled_blocks)},
      {"spilled_bytes", delta(r.after.spilled_bytes, r.before.spilled_bytes)},
      {"spill_errors", delta(r.after.spill_errors, r.before.spill_errors)},
      {"promotions", delta(r.after.promotions, r.before.promotions)},
      {"ram_evictions", delta(r.after.ram.evictions, r.before.ram.evictions)},
      {"ssd_evictions", delta(r.after.ssd.evictions, r.before.ssd.evictions)},
      {"ram_blocks_end", r.after.ram.blocks},
      {"ssd_blocks_end", r.after.ssd.blocks},
      {"ssd_bytes_end", r.after.ssd.bytes},
      {"checksum_failures", delta(r.after.checksum_failures, r.before.checksum_failures)},
  };
  return j.dump();
}

}  // namespace cgn::kvbench
