// `cgn-bench load`, the live load generator (the second benchmark instrument): replays a Workload
// (workload.h: Mooncake traces, shared-prefix presets) over HTTP against a running router,
// open loop, and measures from the client side what `cgn-bench sim` measures in virtual time:
// TTFT, inter-token latency, end-to-end latency, goodput, errors, shed (429) requests, and the
// prefix hit rate from the engine-reported `usage.prompt_tokens_details.cached_tokens` of each
// stream's final usage chunk (`stream_options.include_usage`). The result is a PolicyResult,
// so the report has the same shape as the simulator's and the two can be compared column by
// column.
//
// Every request is `POST /v1/completions` with the workload's prompt text (build_prompt()),
// `max_tokens` = the request's output length, `ignore_eos`, `stream`, and `X-Session-Id` = its
// session key: the same prompt bytes, digests and session keys the simulator routes.
//
// Time: a request is due at start + offset; TTFT and end-to-end latency are measured from that
// due time (open loop: a late client does not hide queueing), then divided by
// LoadOptions::engine_time_scale so that, against cgn-engine-sim --time-scale S, the numbers
// are engine-model seconds like the simulator's.
//
// Threads: run_load() blocks the calling thread and runs one io_context on it; everything it
// creates lives and dies inside the call. The other functions are pure and reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench_harness/cluster_sim.h"
#include "bench_harness/workload.h"
#include "core/clock.h"
#include "core/result.h"

namespace cgn::bench {

enum class LoadError { kBadTarget, kBadOptions, kBadChunk };

// Where to send, and the label (the router's policy) the result is reported under.
struct LoadTarget {
  std::string policy = "live";
  std::string host;  // an IP literal (the client resolves no names on the hot path)
  uint16_t port = 0;
};

// "kv=http://127.0.0.1:8080", or "http://127.0.0.1:8080" (label "live"). No path, no https.
Result<LoadTarget, LoadError> parse_target(std::string_view spec);

struct LoadOptions {
  std::string model = "meta-llama/Llama-3.1-8B-Instruct";
  // Arrivals. Request k is due at (arrival_k - arrival_0) * arrival_scale wall seconds after the
  // start, or, when rate_rps > 0, at k / rate_rps (evenly spaced).
  double arrival_scale = 1.0;
  double rate_rps = 0;
  // The engines' --time-scale (1 for real engines): client-side latencies, the makespan and the
  // rates derived from it are reported in engine-model seconds (wall / engine_time_scale).
  double engine_time_scale = 1.0;
  // Bounds: at most max_requests requests (0 = the whole workload); none is sent later than
  // duration_s after the start (0 = no bound); once the last one is sent, the ones still
  // running get drain_s more, then they are cut and counted as errors. All wall seconds.
  size_t max_requests = 0;
  double duration_s = 0;
  double drain_s = 120;
  // SLOs for goodput, engine-model seconds (as ClusterConfig's).
  double slo_ttft_s = 2.0;
  double slo_itl_s = 0.1;
  bool session_header = true;  // send X-Session-Id (the session policy's key)
};

Status<LoadError> validate(const LoadOptions& o);

// When each request is due, wall nanoseconds after the start: the first max_requests requests
// of the workload, cut at duration_s.
std::vector<Nanos> arrival_schedule(const Workload& w, const LoadOptions& o);

// What one SSE `data:` payload of a completions (or chat) stream carried.
struct StreamChunk {
  bool error = false;  // an `error` object (the router ends a failed stream with one)
  std::string error_message;
  uint32_t text_pieces = 0;  // choices carrying non-empty text / delta content
  bool has_usage = false;    // a non-null `usage`
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  bool has_cached = false;  // usage.prompt_tokens_details.cached_tokens present
  uint64_t cached_tokens = 0;
};

// Parses one event's data (not "[DONE]"). Malformed JSON or wrong types are errors naming the field.
Result<StreamChunk, LoadError> parse_stream_chunk(std::string_view data);

enum class Outcome {
  kCompleted,       // 200, tokens, usage, [DONE]
  kShed,            // 429 from the router (admission or load guard)
  kHttpError,       // any other non-200 status
  kTransportError,  // connect/timeout/closed before the end of the stream
  kStreamError,     // an error event in the stream, a malformed chunk, or no [DONE]
  kCut,             // still running when the drain bound passed
};
const char* to_string(Outcome o);

// What the client saw of one request. Times are wall nanoseconds after the start (-1 = never).
struct RequestRecord {
  size_t index = 0;  // into the workload
  Outcome outcome = Outcome::kCut;
  unsigned status = 0;
  Nanos due = 0;
  Nanos sent = -1;
  Nanos first_token = -1;
  Nanos last_token = -1;
  Nanos done = -1;
  uint32_t text_events = 0;
  bool usage_seen = false;
  bool cached_seen = false;
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  uint64_t cached_tokens = 0;
  std::string node;   // X-CGN-Node
  std::string error;  // why it failed
};

// Client-side facts with no counterpart in the simulator's PolicyResult.
struct LiveStats {
  uint64_t sent = 0;
  uint64_t completed = 0;
  uint64_t shed = 0;
  uint64_t http_errors = 0;
  uint64_t transport_errors = 0;
  uint64_t stream_errors = 0;
  uint64_t cut = 0;
  uint64_t usage_missing = 0;      // completed streams without a usage chunk
  uint64_t cached_missing = 0;     // usage without prompt_tokens_details.cached_tokens
  double max_send_lag_s = 0;       // wall: worst (sent - due), the client's own lateness
  double wall_s = 0;               // wall: start to the last request's end
  std::vector<std::string> nodes;  // X-CGN-Node names, sorted; PolicyResult::per_node_requests order
  std::string first_error;
};

struct LoadResult {
  PolicyResult result;  // busy, imbalance, utilisation and guarded are not observable live: 0
  LiveStats live;
  std::vector<RequestRecord> records;  // one per request sent, in workload order
};

// Turns records into the report's numbers (pure; what run_load() returns).
LoadResult summarise(std::string policy, std::vector<RequestRecord> records, const LoadOptions& o);

// Replays the workload against the target and blocks until every sent request has ended or
// been cut. Bad options are an error; everything the server does is a counted outcome.
Result<LoadResult, LoadError> run_load(const Workload& w, const LoadTarget& target, const LoadOptions& o);

}  // namespace cgn::bench
