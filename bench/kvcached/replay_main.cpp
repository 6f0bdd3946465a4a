// cgn-kvcached-replay: a Mooncake trace's blocks through a running cgn-kvcached (replay.h).
// Prints one JSON object on stdout.
#include <CLI/CLI.hpp>
#include <iostream>

#include "bench/kvcached/targets.h"

int main(int argc, char** argv) {
  CLI::App app{"cgn-kvcached-replay: replay a Mooncake trace's blocks through a running cgn-kvcached"};
  std::string trace = cgn::bench::trace_path("conversation");
  std::string grpc;
  std::string socket;
  cgn::kvbench::ReplayOptions opt;
  bool no_verify = false;
  app.add_option("--trace", trace, "Mooncake trace (JSON Lines, plain or gzip)");
  app.add_option("--grpc", grpc, "the daemon's gRPC address (host:port); always used for Stats")->required();
  app.add_option("--socket", socket, "the daemon's fast-path Unix socket: blocks go through LocalClient");
  app.add_option("--block-bytes", opt.block_bytes, "bytes of each synthetic block")
      ->check(CLI::Range(1u, 64u << 20));
  app.add_option("--limit", opt.limit, "replay only the first N requests (0: all)");
  app.add_flag("--no-verify", no_verify, "do not read back and check the last hit block of each request");
  CLI11_PARSE(app, argc, argv);
  opt.verify = !no_verify;

  auto w = cgn::bench::load_mooncake_trace(trace);
  if (!w) {
    std::cerr << "cgn-kvcached-replay: " << trace << ": " << w.error().message << "\n";
    return 2;
  }
  auto rep = cgn::kvbench::replay_daemon(*w, grpc, socket, opt);
  if (!rep) {
    std::cerr << "cgn-kvcached-replay: " << rep.error().message << "\n";
    return 1;
  }
  std::cout << *rep << std::endl;
  return 0;
}
