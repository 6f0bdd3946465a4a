#include "bandwidth_run.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "bandwidth.h"
#include "targets.h"

namespace cgn::kvbench {
namespace {

void emit(std::ostream& out, uint64_t block_bytes, const std::string& path, const std::string& op,
          uint32_t threads, const Rate& r, int64_t blocks = -1) {
  nlohmann::json j = {{"block_bytes", block_bytes}, {"path", path},     {"op", op},
                      {"threads", threads},         {"bytes", r.bytes}, {"seconds", r.seconds},
                      {"gib_s", r.gib_s()}};
  if (blocks >= 0) {
    j["blocks"] = blocks;
  }
  out << j.dump() << std::endl;
}

// The median of `rounds` by GiB/s (the lower middle of an even count), with every round's GiB/s.
void emit_median(std::ostream& out, uint64_t block_bytes, const std::string& path, const std::string& op,
                 uint32_t threads, std::vector<Rate> rounds) {
  std::sort(rounds.begin(), rounds.end(), [](const Rate& a, const Rate& b) { return a.gib_s() < b.gib_s(); });
  nlohmann::json all = nlohmann::json::array();
  for (const Rate& r : rounds) {
    all.push_back(r.gib_s());
  }
  const Rate& m = rounds[(rounds.size() - 1) / 2];
  nlohmann::json j = {{"block_bytes", block_bytes}, {"path", path},     {"op", op},
                      {"threads", threads},         {"bytes", m.bytes}, {"seconds", m.seconds},
                      {"gib_s", m.gib_s()},         {"rounds", all}};
  out << j.dump() << std::endl;
}

// "host:port" (port 6379 when absent); an unparsable port gives -1, which fails the connection
// with Redis's own message.
std::pair<std::string, int> host_port(const std::string& hp) {
  const auto colon = hp.rfind(':');
  if (colon == std::string::npos) {
    return {hp, 6379};
  }
  int port = -1;
  const char* first = hp.data() + colon + 1;
  const char* last = hp.data() + hp.size();
  if (auto [ptr, ec] = std::from_chars(first, last, port); ec != std::errc() || ptr != last) {
    port = -1;
  }
  return {hp.substr(0, colon), port};
}

// The SSD-tier blocks among ids (one BatchLookup, one single-block request per id).
Result<std::vector<uint64_t>, BenchError> on_ssd(kvcached::KvClient& c, const std::vector<uint64_t>& ids) {
  std::vector<std::vector<Digest>> reqs;
  for (uint64_t id : ids) {
    reqs.push_back({block_digest(id)});
  }
  auto r = c.batch_lookup(bench_namespace(), reqs, 0);
  if (!r) {
    return make_error(BenchError::kTarget, "BatchLookup: " + r.error().message);
  }
  std::vector<uint64_t> out;
  for (size_t i = 0; i < ids.size() && i < r->runs.size(); ++i) {
    if (r->runs[i].size() == 1 && r->runs[i][0] == kvcache::Tier::kSsd) {
      out.push_back(ids[i]);
    }
  }
  return out;
}

Status<BenchError> run_ssd(const BenchOptions& o, uint64_t first_id, std::ostream& out) {
  auto control = kvcached::KvClient::connect(o.ssd_grpc, config::TlsConfig{});
  if (!control) {
    return make_error(BenchError::kTarget, o.ssd_grpc + ": " + control.error().message);
  }
  // Fill: more bytes than the RAM tier holds, so the least recently used spill to the SSD tier.
  const uint64_t n = std::max<uint64_t>(1, (o.ssd_mib << 20) / o.ssd_block_bytes);
  ConnFactory writer = o.ssd_socket.empty() ? grpc_conns(o.ssd_grpc) : local_conns(o.ssd_socket);
  BandwidthSpec fill{o.ssd_block_bytes, 1, n, 0, first_id};
  if (auto r = measure_bandwidth(writer, fill); !r) {
    return make_error(r.error().code, "filling the SSD daemon: " + r.error().message);
  }
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < n; ++i) {
    ids.push_back(first_id + i);
  }
  // Connections kept for the whole section and used once before measuring (a read of the
  // newest block, in RAM), so no connection set-up is timed.
  ConnPool grpc_pool(grpc_conns(o.ssd_grpc));
  ConnPool local_pool(local_conns(o.ssd_socket));
  std::vector<std::pair<std::string, ConnFactory>> paths{{"ssd-grpc", grpc_pool.factory()}};
  if (!o.ssd_socket.empty()) {
    paths.emplace_back("ssd-local", local_pool.factory());
  }
  const uint32_t max_threads = *std::max_element(o.threads.begin(), o.threads.end());
  const std::vector<uint64_t> newest(max_threads, ids.back());
  for (const auto& [name, conns] : paths) {
    if (auto r = measure_reads(conns, newest, o.ssd_block_bytes, max_threads); !r) {
      return make_error(r.error().code, name + ": " + r.error().message);
    }
  }
  for (uint32_t t : o.threads) {
    for (const auto& [name, conns] : paths) {
      auto ssd = on_ssd(**control, ids);  // again each time: a read may promote a block to RAM
      if (!ssd) {
        return ssd.error();
      }
      if (ssd->empty()) {
        return make_error(BenchError::kTarget, "no block of " + std::to_string(n) +
                                                   " is on the SSD tier (is the RAM tier small?)");
      }
      drop_file_cache(o.ssd_dir);
      auto r = measure_reads(conns, *ssd, o.ssd_block_bytes, t);
      if (!r) {
        return make_error(r.error().code, name + ": " + r.error().message);
      }
      emit(out, o.ssd_block_bytes, name, "get", t, *r, static_cast<int64_t>(ssd->size()));
    }
  }
  auto seq = sequential_read(o.ssd_dir, o.ssd_block_bytes, false);
  if (!seq) {
    return make_error(seq.error().code, "sequential read: " + seq.error().message);
  }
  emit(out, o.ssd_block_bytes, "ssd-seqread", "get", 1, *seq);
  // The same with O_DIRECT where the filesystem takes it (the daemon's own reads do).
  if (auto direct = sequential_read(o.ssd_dir, o.ssd_block_bytes, true); direct) {
    emit(out, o.ssd_block_bytes, "ssd-seqread-direct", "get", 1, *direct);
  }
  return Ok{};
}

using Pools = std::vector<std::pair<std::string, std::unique_ptr<ConnPool>>>;

// One connection per thread for the whole run.
Pools open_pools(const BenchOptions& o) {
  Pools pools;
  if (!o.socket.empty()) {
    pools.emplace_back("local", std::make_unique<ConnPool>(local_conns(o.socket, o.prefault)));
    if (o.batch > 1) {
      pools.emplace_back("local-batch", std::make_unique<ConnPool>(local_conns(o.socket, o.prefault)));
    }
  }
  if (!o.grpc.empty()) {
    pools.emplace_back("grpc", std::make_unique<ConnPool>(grpc_conns(o.grpc)));
  }
  if (!o.redis_tcp.empty()) {
    const auto [h, p] = host_port(o.redis_tcp);
    pools.emplace_back("redis-tcp", std::make_unique<ConnPool>(redis_conns(h, p, "")));
  }
  if (!o.redis_unix.empty()) {
    pools.emplace_back("redis-unix", std::make_unique<ConnPool>(redis_conns("", 0, o.redis_unix)));
  }
  return pools;
}

// Every fast-path connection, one at a time and alone, writes warm_mib once, unmeasured, so its
// own mapping of the arena is faulted in, as a long-running engine's is.
Status<BenchError> warm_fast_path(const BenchOptions& o, ConnPool& pool, uint64_t& next_id) {
  const uint64_t warm_block = std::min<uint64_t>(16ull << 20, static_cast<uint64_t>(o.warm_mib) << 20);
  const ConnFactory conns = pool.factory();
  const uint32_t max_threads = *std::max_element(o.threads.begin(), o.threads.end());
  for (uint32_t c = 0; c < max_threads; ++c) {
    BandwidthSpec warm{warm_block, 1, (static_cast<uint64_t>(o.warm_mib) << 20) / warm_block + 1, 0, next_id};
    next_id += warm.blocks_per_thread;
    if (auto r = measure_bandwidth([&](uint32_t) { return conns(c); }, warm); !r) {
      return make_error(r.error().code, "warming the fast path: " + r.error().message);
    }
  }
  return Ok{};
}

// One block size at one concurrency: one unmeasured round, then `repeats` rounds over every path
// in alternating order; each path's median round is reported with all rounds' GiB/s.
Status<BenchError> measure_cell(const BenchOptions& o, const Pools& pools, uint64_t size, uint32_t t,
                                uint64_t& next_id, std::ostream& out) {
  const uint64_t blocks = std::max<uint64_t>(1, (o.working_set_mib << 20) / size);
  std::vector<std::pair<std::string, ConnFactory>> paths{{"memcpy", memcpy_conns(size, blocks)}};
  for (const auto& [name, pool] : pools) {
    paths.emplace_back(name, pool->factory());
  }
  std::map<std::pair<std::string, std::string>, std::vector<Rate>> rounds;
  for (uint32_t rep = 0; rep <= o.repeats; ++rep) {
    auto order = paths;
    if (rep % 2 == 1) {
      std::reverse(order.begin(), order.end());
    }
    for (const auto& [name, conns] : order) {
      if (name.starts_with("redis")) {  // empty it: each measurement holds only its own blocks
        const auto [h, p] = o.redis_tcp.empty() ? std::pair<std::string, int>{"", 0} : host_port(o.redis_tcp);
        if (auto st = redis_flushall(h, p, o.redis_unix); !st) {
          return st;
        }
      }
      BandwidthSpec spec{size, t, blocks, o.get_rounds, next_id, name == "local-batch" ? o.batch : 1};
      next_id += static_cast<uint64_t>(t) * blocks;
      auto r = measure_bandwidth(conns, spec);
      if (!r) {
        return make_error(r.error().code, name + ", " + std::to_string(size) + " B, " + std::to_string(t) +
                                              " threads: " + r.error().message);
      }
      if (rep > 0) {
        rounds[{name, "put"}].push_back(r->put);
        rounds[{name, "get"}].push_back(r->get);
      }
    }
  }
  for (const auto& [name, conns] : paths) {
    for (const char* op : {"put", "get"}) {
      emit_median(out, size, name, op, t, rounds[{name, op}]);
    }
  }
  return Ok{};
}

}  // namespace

Status<BenchError> run_bandwidth_bench(const BenchOptions& o, std::ostream& out) {
  if (o.threads.empty() || std::find(o.threads.begin(), o.threads.end(), 0u) != o.threads.end()) {
    return make_error(BenchError::kInput, "--threads: at least one, each >= 1");
  }
  if (std::any_of(o.sizes.begin(), o.sizes.end(), [](uint64_t s) { return s < 8; })) {
    return make_error(BenchError::kInput, "--sizes: every block size must be at least 8 bytes");
  }
  if (!o.ssd_grpc.empty() && o.ssd_dir.empty()) {
    return make_error(BenchError::kInput, "--ssd-grpc needs --ssd-dir");
  }
  if (o.repeats == 0) {
    return make_error(BenchError::kInput, "--repeats must be >= 1");
  }
  uint64_t next_id = 1;
  const Pools pools = open_pools(o);
  if (o.warm_mib > 0 && !o.socket.empty()) {
    for (const auto& [name, pool] : pools) {
      if (!name.starts_with("local")) {
        continue;
      }
      if (auto st = warm_fast_path(o, *pool, next_id); !st) {
        return st;
      }
    }
  }
  for (uint64_t size : o.sizes) {
    for (uint32_t t : o.threads) {
      if (auto st = measure_cell(o, pools, size, t, next_id, out); !st) {
        return st;
      }
    }
  }
  if (!o.ssd_grpc.empty()) {
    return run_ssd(o, next_id, out);
  }
  return Ok{};
}

}  // namespace cgn::kvbench
