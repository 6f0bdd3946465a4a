// cgn-kvcached-bench: block put/get bandwidth of memcpy, cgn-kvcached (fast path, gRPC), Redis
// (TCP, Unix socket) and the SSD tier against a sequential read (bandwidth_run.h). Prints one
// JSON object per row on stdout.
#include <CLI/CLI.hpp>
#include <iostream>

#include "bench/kvcached/bandwidth_run.h"

int main(int argc, char** argv) {
  CLI::App app{"cgn-kvcached-bench: KV block bandwidth of memcpy, cgn-kvcached, Redis and the SSD tier"};
  cgn::kvbench::BenchOptions o;
  app.add_option("--sizes", o.sizes, "block sizes in bytes")->delimiter(',');
  app.add_option("--threads", o.threads, "concurrencies (threads, one connection each)")->delimiter(',');
  app.add_option("--working-set-mib", o.working_set_mib, "MiB each thread puts and reads per measurement");
  app.add_option("--get-rounds", o.get_rounds, "times each block is read back")->check(CLI::PositiveNumber);
  app.add_option("--repeats", o.repeats, "rounds over every path per size and concurrency (median reported)");
  app.add_option("--warm-mib", o.warm_mib,
                 "fast path: each connection first writes this many MiB, unmeasured");
  app.add_option("--batch", o.batch,
                 "blocks per put_many/get_many call in the local-batch row (0 or 1: no such row)");
  bool no_prefault = false;
  app.add_flag("--no-prefault", no_prefault,
               "fast path: map the arena without MAP_POPULATE (first touch of each page faults)");
  app.add_option("--grpc", o.grpc, "cgn-kvcached gRPC address (host:port)");
  app.add_option("--socket", o.socket, "cgn-kvcached fast-path Unix socket");
  app.add_option("--redis-tcp", o.redis_tcp, "redis-server host:port");
  app.add_option("--redis-unix", o.redis_unix, "redis-server Unix socket");
  app.add_option("--ssd-grpc", o.ssd_grpc,
                 "gRPC address of a cgn-kvcached with a small RAM tier and an SSD tier");
  app.add_option("--ssd-socket", o.ssd_socket, "that daemon's fast-path socket");
  app.add_option("--ssd-dir", o.ssd_dir, "that daemon's SSD directory (for the sequential-read baselines)");
  app.add_option("--ssd-block-bytes", o.ssd_block_bytes, "block size of the SSD rows");
  app.add_option("--ssd-mib", o.ssd_mib, "MiB written to the SSD daemon (more than its RAM tier)");
  CLI11_PARSE(app, argc, argv);
  o.prefault = !no_prefault;
  if (auto st = cgn::kvbench::run_bandwidth_bench(o, std::cout); !st) {
    std::cerr << "cgn-kvcached-bench: " << st.error().message << "\n";
    return st.error().code == cgn::kvbench::BenchError::kInput ? 2 : 1;
  }
  return 0;
}
