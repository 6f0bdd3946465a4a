// cgn-loadgen: the HTTP/1.1 load generator of the proxy benchmarks (bench/proxy/README.md).
// One thread, one io_context, raw keep-alive sockets and a minimal response parser, so that on
// one core it outruns the proxy it measures. Four modes:
//   closed  N connections, each sends the next request as soon as its response is complete;
//   open    requests scheduled at a fixed rate over a pool of connections; latency counts from
//           the scheduled send time (queueing included: no coordinated omission);
//   stream  closed loop of SSE requests; every event carries the upstream's CLOCK_MONOTONIC send
//           time ("cgn_bench_ns"), so the event's one-way latency is measured on arrival;
//   hold    opens N streams, waits for each one's first event, samples a process's RSS, holds.
// Not thread-safe; run() owns the calling thread until the load is done.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace cgn::bench {

enum class LoadMode { kClosed, kOpen, kStream, kHold };
enum class LoadError { kSpec, kConnect, kTimeout };

struct LoadSpec {
  LoadMode mode = LoadMode::kClosed;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string path = "/v1/chat/completions";
  std::string body;  // sent as is (see chat_body)
  std::vector<std::pair<std::string, std::string>> headers;
  size_t connections = 32;
  double warmup_s = 1.0;       // requests completed before this are not recorded
  double duration_s = 5.0;     // recording window after the warm-up
  uint64_t max_requests = 0;   // > 0: stop issuing after this many (closed/stream), warm-up included
  double rate = 0;             // open: requests per second
  uint64_t expect_events = 0;  // stream: events (the [DONE] excluded) each stream must carry
  double hold_s = 2.0;         // hold: how long all streams stay open once established
  int rss_pid = 0;             // hold: whose VmRSS to sample before and while holding
  size_t connect_batch = 256;  // hold: connections being opened at once
  double timeout_s = 60.0;     // whole run bound (a stuck proxy fails the run, never hangs it)
};

struct LoadResult {
  uint64_t requests = 0;  // responses completed inside the recording window
  uint64_t ok = 0;        // ... with a 2xx status
  uint64_t non2xx = 0;
  uint64_t errors = 0;           // connect/read/parse failures and streams with a wrong event count
  uint64_t total_responses = 0;  // every completed response, warm-up included
  double window_s = 0;
  double rps = 0;
  std::vector<uint64_t> latency_ns;  // per request (closed/open) or per event (stream)
  uint64_t events = 0;               // stream: events recorded
  std::vector<uint64_t> stream_ns;   // stream: whole-stream times
  uint64_t held = 0;                 // hold: streams that got their first event
  uint64_t rss_before_kb = 0;
  uint64_t rss_held_kb = 0;
  std::string first_error;
};

// A chat completion request of exactly `bytes` bytes (padding in the user message); at least
// the size of the unpadded JSON.
std::string chat_body(size_t bytes, bool stream, const std::string& model);

// Percentile (0..100) of the values, nearest-rank; 0 for none. Sorts a copy.
uint64_t percentile(std::vector<uint64_t> values, double pct);

// The result as one JSON object (percentiles in microseconds).
std::string to_json(const LoadSpec& spec, const LoadResult& r);

// Fails when the spec is invalid, no connection could be opened, or timeout_s passed.
Result<LoadResult, LoadError> run_load(const LoadSpec& spec);

// VmRSS of a process in KiB (0 when unreadable).
uint64_t rss_kb(int pid);

}  // namespace cgn::bench
