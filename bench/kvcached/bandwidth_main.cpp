// cgn-kvcached-bench: block put/get bandwidth of memcpy, cgn-kvcached (fast path, gRPC), Redis
// (TCP, Unix socket) and the SSD tier against a sequential read (bandwidth.h). Prints one JSON
// object per measurement on stdout: {"block_bytes", "path", "op", "threads", "bytes", "seconds",
// "gib_s"}: the median of --repeats rounds, whose GiB/s are in "rounds" (SSD rows: one pass,
// with "blocks"). A path whose address is not given is left out.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/kvcached/bandwidth.h"
#include "bench/kvcached/targets.h"

namespace {

using cgn::kvbench::BenchError;
using cgn::kvbench::ConnFactory;
using cgn::kvbench::Rate;

struct Options {
  std::vector<uint64_t> sizes{64ull << 10, 1ull << 20, 4ull << 20, 16ull << 20};
  std::vector<uint32_t> threads{1, 4};
  uint64_t working_set_mib = 64;  // per thread and measurement
  uint32_t get_rounds = 4;
  uint32_t warm_mib = 0;  // fast path: each connection first writes this many MiB, unmeasured
  uint32_t repeats = 3;   // rounds over every path per block size and concurrency; the median is reported
  std::string grpc, socket, redis_tcp, redis_unix;
  std::string ssd_grpc, ssd_socket, ssd_dir;
  uint64_t ssd_block_bytes = 1ull << 20;
  uint64_t ssd_mib = 256;
};

void emit(uint64_t block_bytes, const std::string& path, const std::string& op, uint32_t threads,
          const Rate& r, int64_t blocks = -1) {
  nlohmann::json j = {{"block_bytes", block_bytes}, {"path", path},     {"op", op},
                      {"threads", threads},         {"bytes", r.bytes}, {"seconds", r.seconds},
                      {"gib_s", r.gib_s()}};
  if (blocks >= 0) {
    j["blocks"] = blocks;
  }
  std::cout << j.dump() << std::endl;
}

// The median of `rounds` by GiB/s (the lower middle of an even count), with every round's GiB/s.
void emit_median(uint64_t block_bytes, const std::string& path, const std::string& op, uint32_t threads,
                 std::vector<Rate> rounds) {
  std::sort(rounds.begin(), rounds.end(), [](const Rate& a, const Rate& b) { return a.gib_s() < b.gib_s(); });
  nlohmann::json all = nlohmann::json::array();
  for (const Rate& r : rounds) {
    all.push_back(r.gib_s());
  }
  const Rate& m = rounds[(rounds.size() - 1) / 2];
  nlohmann::json j = {{"block_bytes", block_bytes}, {"path", path},     {"op", op},
                      {"threads", threads},         {"bytes", m.bytes}, {"seconds", m.seconds},
                      {"gib_s", m.gib_s()},         {"rounds", all}};
  std::cout << j.dump() << std::endl;
}

std::pair<std::string, int> host_port(const std::string& hp) {
  const auto colon = hp.rfind(':');
  if (colon == std::string::npos) {
    return {hp, 6379};
  }
  return {hp.substr(0, colon), std::stoi(hp.substr(colon + 1))};
}

// The SSD-tier blocks among ids (one BatchLookup, one single-block request per id).
cgn::Result<std::vector<uint64_t>, BenchError> on_ssd(cgn::kvcached::KvClient& c,
                                                      const std::vector<uint64_t>& ids) {
  std::vector<std::vector<cgn::Digest>> reqs;
  for (uint64_t id : ids) {
    reqs.push_back({cgn::kvbench::block_digest(id)});
  }
  auto r = c.batch_lookup(cgn::kvbench::bench_namespace(), reqs, 0);
  if (!r) {
    return cgn::make_error(BenchError::kTarget, "BatchLookup: " + r.error().message);
  }
  std::vector<uint64_t> out;
  for (size_t i = 0; i < ids.size() && i < r->runs.size(); ++i) {
    if (r->runs[i].size() == 1 && r->runs[i][0] == cgn::kvcache::Tier::kSsd) {
      out.push_back(ids[i]);
    }
  }
  return out;
}

int run_ssd(const Options& o, uint64_t first_id) {
  auto control = cgn::kvcached::KvClient::connect(o.ssd_grpc, cgn::config::TlsConfig{});
  if (!control) {
    std::cerr << "cgn-kvcached-bench: " << o.ssd_grpc << ": " << control.error().message << "\n";
    return 1;
  }
  // Fill: more bytes than the RAM tier holds, so the least recently used spill to the SSD tier.
  const uint64_t n = std::max<uint64_t>(1, (o.ssd_mib << 20) / o.ssd_block_bytes);
  ConnFactory writer =
      o.ssd_socket.empty() ? cgn::kvbench::grpc_conns(o.ssd_grpc) : cgn::kvbench::local_conns(o.ssd_socket);
  cgn::kvbench::BandwidthSpec fill{o.ssd_block_bytes, 1, n, 0, first_id};
  if (auto r = cgn::kvbench::measure_bandwidth(writer, fill); !r) {
    std::cerr << "cgn-kvcached-bench: filling the SSD daemon: " << r.error().message << "\n";
    return 1;
  }
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < n; ++i) {
    ids.push_back(first_id + i);
  }
  // Connections kept for the whole section and used once before measuring (a read of the
  // newest block, in RAM), so no connection set-up is timed.
  cgn::kvbench::ConnPool grpc_pool(cgn::kvbench::grpc_conns(o.ssd_grpc));
  cgn::kvbench::ConnPool local_pool(cgn::kvbench::local_conns(o.ssd_socket));
  std::vector<std::pair<std::string, ConnFactory>> paths{{"ssd-grpc", grpc_pool.factory()}};
  if (!o.ssd_socket.empty()) {
    paths.emplace_back("ssd-local", local_pool.factory());
  }
  const uint32_t max_threads = *std::max_element(o.threads.begin(), o.threads.end());
  const std::vector<uint64_t> newest(max_threads, ids.back());
  for (const auto& [name, conns] : paths) {
    if (auto r = cgn::kvbench::measure_reads(conns, newest, o.ssd_block_bytes, max_threads); !r) {
      std::cerr << "cgn-kvcached-bench: " << name << ": " << r.error().message << "\n";
      return 1;
    }
  }
  for (uint32_t t : o.threads) {
    for (const auto& [name, conns] : paths) {
      auto ssd = on_ssd(**control, ids);  // again each time: a read may promote a block to RAM
      if (!ssd) {
        std::cerr << "cgn-kvcached-bench: " << ssd.error().message << "\n";
        return 1;
      }
      if (ssd->empty()) {
        std::cerr << "cgn-kvcached-bench: no block of " << n
                  << " is on the SSD tier (is the RAM tier small?)\n";
        return 1;
      }
      cgn::kvbench::drop_file_cache(o.ssd_dir);
      auto r = cgn::kvbench::measure_reads(conns, *ssd, o.ssd_block_bytes, t);
      if (!r) {
        std::cerr << "cgn-kvcached-bench: " << name << ": " << r.error().message << "\n";
        return 1;
      }
      emit(o.ssd_block_bytes, name, "get", t, *r, static_cast<int64_t>(ssd->size()));
    }
  }
  auto seq = cgn::kvbench::sequential_read(o.ssd_dir, o.ssd_block_bytes, false);
  if (!seq) {
    std::cerr << "cgn-kvcached-bench: sequential read: " << seq.error().message << "\n";
    return 1;
  }
  emit(o.ssd_block_bytes, "ssd-seqread", "get", 1, *seq);
  // The same with O_DIRECT where the filesystem takes it (the daemon's own reads do).
  if (auto direct = cgn::kvbench::sequential_read(o.ssd_dir, o.ssd_block_bytes, true); direct) {
    emit(o.ssd_block_bytes, "ssd-seqread-direct", "get", 1, *direct);
  } else {
    std::cerr << "cgn-kvcached-bench: no O_DIRECT sequential read: " << direct.error().message << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cgn-kvcached-bench: KV block bandwidth of memcpy, cgn-kvcached, Redis and the SSD tier"};
  Options o;
  app.add_option("--sizes", o.sizes, "block sizes in bytes")->delimiter(',');
  app.add_option("--threads", o.threads, "concurrencies (threads, one connection each)")->delimiter(',');
  app.add_option("--working-set-mib", o.working_set_mib, "MiB each thread puts and reads per measurement");
  app.add_option("--get-rounds", o.get_rounds, "times each block is read back")->check(CLI::PositiveNumber);
  app.add_option("--repeats", o.repeats, "rounds over every path per size and concurrency (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warm-mib", o.warm_mib,
                 "fast path: each connection first writes this many MiB (the daemon's RAM tier), unmeasured");
  app.add_option("--grpc", o.grpc, "cgn-kvcached gRPC address (host:port)");
  app.add_option("--socket", o.socket, "cgn-kvcached fast-path Unix socket");
  app.add_option("--redis-tcp", o.redis_tcp, "redis-server host:port");
  app.add_option("--redis-unix", o.redis_unix, "redis-server Unix socket");
  app.add_option("--ssd-grpc", o.ssd_grpc,
                 "gRPC address of a cgn-kvcached with a small RAM tier and an SSD tier");
  app.add_option("--ssd-socket", o.ssd_socket, "that daemon's fast-path socket");
  app.add_option("--ssd-dir", o.ssd_dir, "that daemon's SSD directory (for the sequential-read baseline)");
  app.add_option("--ssd-block-bytes", o.ssd_block_bytes, "block size of the SSD rows");
  app.add_option("--ssd-mib", o.ssd_mib, "MiB written to the SSD daemon (more than its RAM tier)");
  CLI11_PARSE(app, argc, argv);
  if (!o.ssd_grpc.empty() && o.ssd_dir.empty()) {
    std::cerr << "cgn-kvcached-bench: --ssd-grpc needs --ssd-dir\n";
    return 2;
  }

  uint64_t next_id = 1;
  // One connection per thread for the whole run (ConnPool).
  std::vector<std::pair<std::string, std::unique_ptr<cgn::kvbench::ConnPool>>> pools;
  if (!o.socket.empty()) {
    pools.emplace_back("local",
                       std::make_unique<cgn::kvbench::ConnPool>(cgn::kvbench::local_conns(o.socket)));
  }
  if (!o.grpc.empty()) {
    pools.emplace_back("grpc", std::make_unique<cgn::kvbench::ConnPool>(cgn::kvbench::grpc_conns(o.grpc)));
  }
  if (!o.redis_tcp.empty()) {
    const auto [h, p] = host_port(o.redis_tcp);
    pools.emplace_back("redis-tcp",
                       std::make_unique<cgn::kvbench::ConnPool>(cgn::kvbench::redis_conns(h, p, "")));
  }
  if (!o.redis_unix.empty()) {
    pools.emplace_back("redis-unix", std::make_unique<cgn::kvbench::ConnPool>(
                                         cgn::kvbench::redis_conns("", 0, o.redis_unix)));
  }
  const uint32_t max_threads = *std::max_element(o.threads.begin(), o.threads.end());
  if (o.warm_mib > 0 && !o.socket.empty()) {
    // Every fast-path connection writes the arena's size once, unmeasured, so its own mapping of
    // the arena is faulted in, as a long-running engine's is.
    const uint64_t warm_block = std::min<uint64_t>(16ull << 20, o.warm_mib << 20);
    // One connection at a time, each alone over the whole arena.
    const ConnFactory pool = pools.front().second->factory();
    for (uint32_t c = 0; c < max_threads; ++c) {
      cgn::kvbench::BandwidthSpec warm{warm_block, 1, (o.warm_mib << 20) / warm_block + 1, 0, next_id};
      next_id += warm.blocks_per_thread;
      auto r = cgn::kvbench::measure_bandwidth([&](uint32_t) { return pool(c); }, warm);
      if (!r) {
        std::cerr << "cgn-kvcached-bench: warming the fast path: " << r.error().message << "\n";
        return 1;
      }
    }
  }
  for (uint64_t size : o.sizes) {
    if (size < 8) {
      std::cerr << "cgn-kvcached-bench: block size " << size << " below 8 bytes\n";
      return 2;
    }
    const uint64_t blocks = std::max<uint64_t>(1, (o.working_set_mib << 20) / size);
    for (uint32_t t : o.threads) {
      std::vector<std::pair<std::string, ConnFactory>> paths{
          {"memcpy", cgn::kvbench::memcpy_conns(size, blocks)}};
      for (const auto& [name, pool] : pools) {
        paths.emplace_back(name, pool->factory());
      }
      // One unmeasured round, then `repeats` rounds over every path in alternating order; each
      // path's median round is reported with all rounds' GiB/s.
      std::map<std::pair<std::string, std::string>, std::vector<Rate>> rounds;
      for (uint32_t rep = 0; rep <= o.repeats; ++rep) {
        auto order = paths;
        if (rep % 2 == 1) {
          std::reverse(order.begin(), order.end());
        }
        for (const auto& [name, conns] : order) {
          if (name.starts_with("redis")) {  // empty it: each measurement holds only its own blocks
            const auto [h, p] =
                o.redis_tcp.empty() ? std::pair<std::string, int>{"", 0} : host_port(o.redis_tcp);
            if (auto st = cgn::kvbench::redis_flushall(h, p, o.redis_unix); !st) {
              std::cerr << "cgn-kvcached-bench: " << st.error().message << "\n";
              return 1;
            }
          }
          cgn::kvbench::BandwidthSpec spec{size, t, blocks, o.get_rounds, next_id};
          next_id += static_cast<uint64_t>(t) * blocks;
          auto r = cgn::kvbench::measure_bandwidth(conns, spec);
          if (!r) {
            std::cerr << "cgn-kvcached-bench: " << name << ", " << size << " B, " << t
                      << " threads: " << r.error().message << "\n";
            return 1;
          }
          if (rep > 0) {
            rounds[{name, "put"}].push_back(r->put);
            rounds[{name, "get"}].push_back(r->get);
          }
        }
      }
      for (const auto& [name, conns] : paths) {
        for (const char* op : {"put", "get"}) {
          emit_median(size, name, op, t, rounds[{name, op}]);
        }
      }
    }
  }
  if (!o.ssd_grpc.empty()) {
    return run_ssd(o, next_id);
  }
  return 0;
}
