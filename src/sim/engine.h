// The simulated inference engine: a discrete-event model of one vLLM-V1-like
// replica (continuous batching, chunked prefill, paged KV with prefix
// caching, preemption by recompute, NixlConnector-style P/D handoffs).
//
// Time is injected: every call takes `now` (any monotonic Nanos epoch), and
// nothing reads a clock. Drive it like this:
//
//   auto h = engine.add_request(std::move(req), now);      // may fail: queue full, too long
//   ...
//   while (engine.next_event_time() <= now) engine.advance_to(now);  // (one call suffices)
//   engine.take_events(events);                              // tokens, finishes, KV pulls
//
// The HTTP shell arms a timer for next_event_time() (real clock); the
// benchmark jumps virtual time to the earliest next_event_time() of all its
// engines. Work is per scheduler step (one batch iteration), O(batch) per
// step, with no per-token loops beyond the tokens a step produces.
//
// Thread safety: none. One owner (an Asio strand, or the benchmark loop)
// calls everything. Not copyable.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "sim/kv_cache.h"
#include "sim/kv_transfer.h"
#include "sim/node_model.h"
#include "sim/offload_tier.h"
#include "sim/stats.h"
#include "sim/tokenizer.h"

namespace cgn::sim {

using RequestHandle = uint64_t;
inline constexpr Nanos kNever = std::numeric_limits<Nanos>::max();

enum class FinishReason : uint8_t { kStop = 0, kLength = 1, kAbort = 2, kError = 3 };
std::string_view finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error"

enum class ReplyMode : uint8_t { kRandom, kEcho };

// One scheduler step, for observers (tests, traces).
struct StepInfo {
  Nanos start = 0;
  Nanos end = 0;
  uint32_t num_seqs = 0;
  uint32_t prefill_tokens = 0;
  uint32_t decode_seqs = 0;
  uint64_t decode_context_tokens = 0;  // sum of the decode seqs' contexts
};

struct EngineConfig {
  NodeModel model = default_node_model();
  // Every modelled duration is multiplied by this (0.1 = ten times faster).
  double time_scale = 1.0;
  // Requests waiting beyond this are refused (the shell answers 429).
  uint32_t max_waiting = 100'000;
  // Random mode: a reply without ignore_eos stops after 1..this tokens (from its seed).
  uint32_t random_reply_max_tokens = 512;
  bool enable_prefix_caching = true;
  // P/D (NixlConnector): who we are, as written into kv_transfer_params.
  std::string engine_id = "sim-engine-0";
  std::string side_channel_host = "localhost";
  int side_channel_port = 5600;
  int tp_size = 1;
  // VLLM_NIXL_ABORT_REQUEST_TIMEOUT: unclaimed prefill blocks are freed after this.
  Nanos kv_abort_timeout = 480 * kNanosPerSecond;
  // Record KV cache events (BlockStored/BlockRemoved/AllBlocksCleared) for take_kv_events().
  bool record_kv_events = false;
  // KV offload (offload_tier.h), not owned; must outlive the engine. nullptr: none. Blocks the
  // KV cache evicts are put there; a prefix miss beyond the HBM hit loads the tier's resident
  // run (leased for offload_lease) at NodeModel::tier_load_time instead of recomputing it.
  OffloadTier* offload = nullptr;
  Nanos offload_lease = 5 * kNanosPerSecond;
  // Called at the start of every step when set (tests, traces).
  std::function<void(const StepInfo&)> on_step;
};

// One generation request, already tokenised (see tokenizer.h, render_chat()).
struct Request {
  std::string external_id;      // X-Request-Id / the shell's id; remote_request_id in P/D
  std::vector<TokenId> prompt;  // must not be empty
  uint32_t max_tokens = 16;     // completion cap; the shell applies the API defaults
  bool stream = false;
  bool ignore_eos = false;
  std::optional<uint64_t> seed;  // default: prompt_seed(prompt)
  uint32_t eos_at = 0;           // >0: the eos_at-th generated token is a stop token (test hook)
  ReplyMode reply_mode = ReplyMode::kRandom;
  std::string echo_text;                        // echo mode: the reply's text (e.g. the last user message)
  bool want_token_events = true;                // emit a kToken event per generated token (streaming)
  bool want_text = true;                        // accumulate the reply text into the Completion
  std::optional<KvTransferParams> kv_transfer;  // P/D, either leg
  int fail_before_first_token = 0;  // fault: finish with this HTTP status instead of a first token
};

enum class EngineError { kInvalidRequest, kContextLength, kQueueFull };
// The HTTP status a shell answers for each (400, 400, 429).
int http_status(EngineError e);

struct Usage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_tokens = 0;      // local prefix-cache hits + tokens loaded from an offload tier
                                   // + tokens pulled from a prefill instance
  uint32_t loaded_ram_tokens = 0;  // of cached_tokens: loaded from the offload RAM tier
  uint32_t loaded_ssd_tokens = 0;  // of cached_tokens: loaded from the offload SSD tier
};

// Modelled timestamps of one request (engine time, already time-scaled).
struct RequestTiming {
  Nanos arrival = 0;
  Nanos scheduled = -1;  // first admitted into a batch (end of queueing)
  Nanos first_token = -1;
  Nanos finished = -1;
  Nanos queue_time() const { return scheduled < 0 ? 0 : scheduled - arrival; }
  Nanos ttft() const { return first_token < 0 ? -1 : first_token - arrival; }
  Nanos e2e() const { return finished - arrival; }
};

struct Completion {
  FinishReason reason = FinishReason::kStop;
  Usage usage;
  RequestTiming timing;
  std::string text;                                    // when Request::want_text
  std::optional<KvTransferParams> kv_transfer_params;  // prefill leg that finished "length"
  int error_status = 0;                                // reason kError: the HTTP status to answer
  uint32_t transferred_tokens = 0;                     // decode leg: tokens pulled instead of prefilled
  bool kv_pull_failed = false;                         // decode leg: handoff failed, prompt recomputed
  uint32_t preemptions = 0;
};

// The decode leg asks its owner to claim the blocks on the named prefill
// instance, then calls complete_kv_pull() with the answer.
struct KvPull {
  std::string remote_engine_id;
  std::string remote_host;
  int remote_port = 0;
  std::string remote_request_id;
  std::vector<int64_t> remote_block_ids;
  uint32_t tokens = 0;  // tokens the pull will move (beyond local cache hits)
};

enum class EventKind : uint8_t { kToken, kFinished, kKvPull };

struct Event {
  EventKind kind = EventKind::kToken;
  RequestHandle handle = 0;
  Nanos time = 0;
  // kToken
  uint32_t token_index = 0;  // 0 = first token
  TokenId token_id = 0;
  std::string text;   // the token's text ("" for a stop token)
  bool last = false;  // this token ends the request (a kFinished event follows at the same time)
  FinishReason finish_reason = FinishReason::kStop;  // when last
  // token_index 0 only: the request's modelled timing so far (arrival,
  // scheduled, first_token) and its prompt tokens served from the prefix
  // cache / pulled from a prefill instance, so a streaming shell can send the
  // modelled queue time and TTFT in the response headers at the first token.
  RequestTiming timing;
  uint32_t cached_tokens = 0;
  uint32_t transferred_tokens = 0;
  // kFinished
  std::optional<Completion> completion;
  // kKvPull
  std::optional<KvPull> pull;
};

enum class ClaimStatus { kOk, kExpired, kUnknown, kMismatch };
std::string_view claim_status_name(ClaimStatus s);

struct EngineGauges {
  uint32_t running = 0;
  uint32_t waiting = 0;  // includes requests waiting for remote KV (as vLLM)
  uint32_t waiting_for_kv = 0;
  uint32_t held_handoffs = 0;  // prefill-side blocks waiting to be claimed
  uint32_t used_blocks = 0;
  uint32_t total_blocks = 0;
  uint32_t block_size = 0;
  size_t cached_blocks = 0;
  double kv_usage = 0.0;
};

class Engine {
 public:
  explicit Engine(EngineConfig config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request arriving at now. Errors: kInvalidRequest (empty prompt,
  // streaming prefill leg), kContextLength (prompt + max_tokens over
  // max_model_len or over the whole KV pool), kQueueFull.
  Result<RequestHandle, EngineError> add_request(Request request, Nanos now);

  // Client went away: frees the request's blocks, emits kFinished (abort).
  // Unknown or finished handles are ignored.
  void abort(RequestHandle handle, Nanos now);

  // Runs every step and timer due at or before now, in time order.
  void advance_to(Nanos now);
  // When something next happens (kNever when idle).
  Nanos next_event_time() const;
  // Moves the events produced so far onto the end of out.
  void take_events(std::vector<Event>& out);

  // P/D, prefill side: a decode instance claims the blocks held for
  // remote_request_id. kOk frees them here (they stay prefix-cached).
  ClaimStatus claim_blocks(std::string_view remote_request_id, std::span<const int64_t> block_ids, Nanos now);
  // P/D, decode side: the answer to a kKvPull event. kOk charges the transfer
  // time; anything else recomputes the prompt locally.
  void complete_kv_pull(RequestHandle handle, ClaimStatus status, Nanos now);

  // Admin: drop unreferenced cached blocks (all, or one prefix's chain).
  size_t evict_all(Nanos now);
  size_t evict_prefix(std::span<const TokenId> prefix_tokens, Nanos now);
  // Blocks of tokens' full-block prefix present in the cache, including blocks the step in
  // flight is computing (routing tests).
  uint32_t cached_prefix_blocks(std::span<const TokenId> tokens) const;

  // KV cache events (config.record_kv_events) not yet taken, oldest first: everything up to
  // the end of the last completed step, plus, while no step is in flight, what happened since
  // (admin evictions). What a step's scheduling recorded (the blocks it will compute, the
  // hashes its allocations evicted) comes out only once that step has completed, as vLLM
  // publishes a step's events with its output.
  void take_kv_events(std::vector<KvCacheEvent>& out);

  EngineGauges gauges() const;
  const EngineStats& stats() const { return stats_; }
  const EngineConfig& config() const { return config_; }
  const BlockPool& pool() const { return pool_; }

 private:
  struct Req;
  struct Hold {
    std::vector<BlockId> blocks;
    std::vector<int64_t> remote_ids;
    Nanos deadline = 0;
  };

  Nanos scaled(Nanos model_ns) const;
  bool has_schedulable_work() const;
  void wake(Nanos now);
  void catch_up(Nanos now);
  void process_timers(Nanos t);
  void start_step(Nanos t);
  void complete_step();
  bool ensure_blocks(Req& r, uint64_t total_tokens);
  void preempt(Req& r);
  void drop_blocks(Req& r);
  // Registers r's full blocks among its first num_tokens tokens in the prefix cache. Called
  // when a step is scheduled, with the tokens r will have computed by the step's end (so a
  // request admitted after r, even in the same step, hits them), and when a P/D pull lands
  // (never before: pulled blocks hold nothing until then).
  void cache_full_blocks(Req& r, uint64_t num_tokens);
  bool try_schedule_waiting(Req& r, uint32_t& budget, Nanos t);
  // The offload tier's resident run of r's blocks [hit_blocks, max_blocks): how many blocks load
  // (r's loaded counts and load time set), 0 without a tier.
  uint32_t load_from_tier(Req& r, uint32_t hit_blocks, uint32_t max_blocks);
  void flush_evicted();
  void start_pull(Req& r, Nanos t);
  void emit_token(Req& r, Nanos t);
  void finish(Req& r, FinishReason reason, Nanos t, int error_status = 0);
  void observe_finished(const Req& r, const Completion& c);
  void remember_expired(const std::string& id);

  EngineConfig config_;
  BlockPool pool_;
  EngineStats stats_;
  RequestHandle next_handle_ = 1;

  std::unordered_map<RequestHandle, std::unique_ptr<Req>> requests_;
  std::deque<Req*> waiting_;
  std::vector<Req*> running_;
  size_t num_pulling_ = 0;
  std::multimap<Nanos, RequestHandle> kv_ready_;  // decode leg: pull finishes at

  // The step in flight.
  bool busy_ = false;
  Nanos step_start_ = 0;
  Nanos step_end_ = 0;
  Nanos wake_at_ = kNever;
  struct Scheduled {
    Req* req;
    uint32_t new_tokens;
    bool decode;
  };
  std::vector<Scheduled> step_;
  std::vector<Req*> finished_scratch_;

  // P/D prefill side.
  std::unordered_map<std::string, Hold> holds_;
  std::multimap<Nanos, std::string> hold_deadlines_;
  std::deque<std::string> expired_ids_;  // bounded memory of expired handoffs

  std::vector<Event> events_;
  std::vector<KvCacheEvent> kv_events_;  // recorded up to the end of the last completed step
  std::vector<BlockHash> evicted_;       // evicted from HBM, not yet put into the offload tier
  std::vector<OffloadTierKind> tier_run_;
};

}  // namespace cgn::sim
