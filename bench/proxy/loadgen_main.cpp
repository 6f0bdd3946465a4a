// cgn-loadgen: command line over run_load (loadgen.h). Prints one JSON object on stdout.
#include <CLI/CLI.hpp>
#include <iostream>

#include "bench/proxy/loadgen.h"

int main(int argc, char** argv) {
  CLI::App app{"cgn-loadgen: HTTP/1.1 load generator for the proxy benchmarks"};
  cgn::bench::LoadSpec spec;
  std::string mode = "closed";
  std::string url_host = "127.0.0.1";
  size_t body_bytes = 1024;
  std::string model = "bench-model";
  app.add_option("--mode", mode, "closed, open, stream or hold")
      ->check(CLI::IsMember({"closed", "open", "stream", "hold"}));
  app.add_option("--host", spec.host, "IP address of the target");
  app.add_option("--port", spec.port, "port of the target")->required();
  app.add_option("--path", spec.path, "request path");
  app.add_option("--body-bytes", body_bytes, "size of the chat completion request body");
  app.add_option("--model", model, "model named in the body");
  app.add_option("--connections,-c", spec.connections, "connections (hold: streams)");
  app.add_option("--warmup", spec.warmup_s, "seconds not recorded at the start");
  app.add_option("--duration,-d", spec.duration_s, "recording window in seconds");
  app.add_option("--requests", spec.max_requests, "stop after this many requests (records all)");
  app.add_option("--rate", spec.rate, "open loop: requests per second");
  app.add_option("--expect-events", spec.expect_events, "stream: events every stream must carry");
  app.add_option("--hold", spec.hold_s, "hold: seconds to keep every stream open");
  app.add_option("--rss-pid", spec.rss_pid, "hold: process whose RSS to sample");
  app.add_option("--connect-batch", spec.connect_batch, "hold: connections opened at once");
  app.add_option("--timeout", spec.timeout_s, "give up after this many seconds");
  CLI11_PARSE(app, argc, argv);
  if (mode == "open") {
    spec.mode = cgn::bench::LoadMode::kOpen;
  } else if (mode == "stream") {
    spec.mode = cgn::bench::LoadMode::kStream;
  } else if (mode == "hold") {
    spec.mode = cgn::bench::LoadMode::kHold;
  }
  const bool stream = spec.mode == cgn::bench::LoadMode::kStream || spec.mode == cgn::bench::LoadMode::kHold;
  spec.body = cgn::bench::chat_body(body_bytes, stream, model);
  auto r = cgn::bench::run_load(spec);
  if (!r) {
    std::cerr << "cgn-loadgen: " << r.error().message << "\n";
    return 1;
  }
  std::cout << cgn::bench::to_json(spec, *r) << std::endl;
  return 0;
}
