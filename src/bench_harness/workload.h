// Benchmark workloads: what arrives when, and the prompt text each request carries.
//
// A request is a list of segments, each a prefix of one deterministic text block named by an id
// (block_text()). Mooncake traces map every hash_id to one ~512-token block, so requests that
// share leading hash_ids share a byte prefix that the router's digests and the simulator's KV
// blocks both see. The synthetic shared-prefix presets build their prompts from the same kind
// of blocks (system prompt, questions, earlier answers).
//
// Pure functions and plain data; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/result.h"

namespace cgn::bench {

// One block of prompt text: kBlockBytes bytes (512 tokens at the simulator's 4 bytes/token),
// three-letter lowercase words and spaces, ending with '\n' so the simulator's tokenizer, which cuts per
// line, tokenises a shared prefix identically whatever follows it.
inline constexpr uint32_t kBlockBytes = 2048;
inline constexpr uint32_t kBytesPerToken = 4;
inline constexpr uint32_t kBlockTokens = kBlockBytes / kBytesPerToken;

// The text of block `id` in namespace `salt` (each workload has its own salt, so ids of two
// workloads never alias). Always the same bytes for the same (salt, id).
void block_text(uint64_t salt, uint64_t id, std::string& out);

struct Segment {
  uint64_t block_id = 0;
  uint32_t bytes = kBlockBytes;  // a prefix of the block; a multiple of kBytesPerToken
};

struct WorkRequest {
  Nanos arrival = 0;  // relative to the workload's start, before rate scaling
  std::vector<Segment> segments;
  uint32_t output_tokens = 1;
  std::string session_key;  // the session policy's key
  uint32_t input_tokens() const;
};

struct Workload {
  std::string name;
  uint64_t salt = 0;
  std::vector<WorkRequest> requests;  // non-decreasing arrival
};

// The completions prompt of a request: its segments' text, concatenated.
void build_prompt(const Workload& w, const WorkRequest& r, std::string& out);

// --- Mooncake FAST'25 traces (JSON Lines, plain or gzip; bench/traces/README.md) ---
enum class TraceError { kIo, kParse, kLimit };

struct TraceLimits {
  size_t max_bytes = 64u << 20;
  size_t max_lines = 1'000'000;
  size_t max_line_bytes = 1u << 20;
  uint32_t max_input_tokens = 1u << 20;
  uint32_t max_output_tokens = 1u << 20;
};

// Parses a trace. Each line: {"timestamp": ms, "input_length": n, "output_length": m,
// "hash_ids": [..]} with len(hash_ids) == ceil(n / 512). Blank lines are skipped; anything
// else malformed is an error naming the line. The trace carries no user or conversation id; the
// session key is the first two hash_ids ("0-17"), since in the conversation trace every request
// starts with block 0 and the second block is the first that tells conversations apart.
Result<Workload, TraceError> parse_mooncake_trace(std::string_view text, std::string name,
                                                  const TraceLimits& limits = {});
Result<Workload, TraceError> load_mooncake_trace(const std::string& path, const TraceLimits& limits = {});

// --- synthetic shared-prefix presets ---
struct SharedPrefixPreset {
  std::string name;
  uint32_t tenants = 150;
  uint32_t system_tokens = 6000;  // per tenant, shared by its users
  uint32_t users_per_tenant = 5;
  uint32_t question_tokens = 1200;
  uint32_t turns = 3;  // each turn appends the previous answer and a new question
  uint32_t output_tokens = 1000;
};

// "llmd" (llm-d's "KV-Cache Wins You Can See" shape), "small" (for tests).
Result<SharedPrefixPreset, TraceError> shared_prefix_preset(std::string_view name);

// Requests in rounds: round k holds every user's turn k in a seeded shuffled order, so a
// user's next turn comes one round later. Arrivals are Poisson at 1 request/s (seeded); the
// harness rescales them to the load level.
Workload make_shared_prefix(const SharedPrefixPreset& preset, uint64_t seed);

// The first n requests (all when n is 0 or larger than the workload).
Workload take_first(const Workload& w, size_t n);

// The held-out split, defined here once. Sessions (session_key) are numbered 0, 1, 2, ... in
// the order of their first request; kEven keeps the requests of even-numbered sessions, kOdd
// those of odd-numbered ones, so a session never straddles the halves. Routing defaults are
// chosen on the even half (scripts/bench-tune.sh) and reported on the odd half beside the whole
// trace (scripts/bench-report.sh). Arrival times are kept; the name says which half.
enum class SessionHalf { kAll, kEven, kOdd };
Result<SessionHalf, TraceError> parse_session_half(std::string_view name);  // all | even | odd
Workload session_half(const Workload& w, SessionHalf half);

}  // namespace cgn::bench

namespace cgn::bench {
// The folder holding the traces: $CGN_TRACE_DIR, else <source tree>/bench/traces (fixed at build
// time).
std::string trace_dir();
// trace_dir() + "/" + name + "_trace.jsonl.gz" (name: "conversation", "synthetic").
std::string trace_path(std::string_view name);
}  // namespace cgn::bench
