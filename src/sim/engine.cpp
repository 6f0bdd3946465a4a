#include "sim/engine.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace cgn::sim {

namespace {
constexpr size_t kExpiredMemory = 4096;
constexpr double kNanosToSeconds = 1e-9;
}  // namespace

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
  }
  return "stop";
}

int http_status(EngineError e) {
  return e == EngineError::kQueueFull ? 429 : 400;
}

std::string_view claim_status_name(ClaimStatus s) {
  switch (s) {
    case ClaimStatus::kOk:
      return "ok";
    case ClaimStatus::kExpired:
      return "expired";
    case ClaimStatus::kUnknown:
      return "unknown";
    case ClaimStatus::kMismatch:
      return "mismatch";
  }
  return "unknown";
}

enum class ReqState : uint8_t { kWaiting, kPulling, kRunning, kFinished };
enum class PullState : uint8_t { kNone, kWanted, kPending, kTransferring, kDone, kFailed };

struct Engine::Req {
  RequestHandle handle = 0;
  Request in;
  std::vector<TokenId> tokens;  // prompt, then generated tokens
  uint32_t prompt_len = 0;
  std::vector<BlockHash> hashes;  // chained hashes of full blocks of tokens (as far as known)
  std::vector<BlockId> blocks;
  uint32_t registered_blocks = 0;  // leading blocks registered in the prefix cache
  uint32_t num_computed = 0;
  uint32_t cached_tokens = 0;
  uint32_t transferred_tokens = 0;
  uint32_t loaded_ram = 0;  // tokens loaded from the offload tier at the first schedule (of cached_tokens)
  uint32_t loaded_ssd = 0;
  uint32_t load_ram = 0;  // tokens loaded at the latest schedule (a preempted request loads again)
  uint32_t load_ssd = 0;
  Nanos load_ns = 0;  // unscaled load time still to charge to the next step
  uint32_t generated = 0;
  uint32_t eos_at = 0;  // 0 = never
  uint64_t seed = 0;
  std::vector<uint32_t> echo_ends;
  uint32_t echo_tokens = 0;
  ReqState state = ReqState::kWaiting;
  PullState pull = PullState::kNone;
  uint32_t pull_target_tokens = 0;  // tokens computed once the pull lands
  bool counted_first_schedule = false;
  uint32_t preemptions = 0;
  RequestTiming timing;
  Nanos last_token = -1;
  std::string text;
};

Engine::Engine(EngineConfig config)
    : config_(std::move(config)), pool_(config_.model.num_gpu_blocks), stats_(config_.model.max_model_len) {
  step_.reserve(config_.model.max_num_seqs);
  pool_.set_record_events(config_.record_kv_events);
  if (config_.offload != nullptr) {
    pool_.set_evicted_sink(&evicted_);
  }
}

Engine::~Engine() = default;

Nanos Engine::scaled(Nanos model_ns) const {
  const double v = static_cast<double>(model_ns) * config_.time_scale;
  return std::max<Nanos>(1, static_cast<Nanos>(std::llround(v)));
}

Result<RequestHandle, EngineError> Engine::add_request(Request request, Nanos now) {
  const NodeModel& m = config_.model;
  if (request.prompt.empty()) {
    return make_error(EngineError::kInvalidRequest, "The prompt must contain at least one token.");
  }
  if (request.max_tokens == 0) {
    return make_error(EngineError::kInvalidRequest, "max_tokens must be at least 1.");
  }
  const bool prefill_leg = request.kv_transfer && request.kv_transfer->do_remote_decode;
  if (prefill_leg && request.stream) {
    return make_error(
        EngineError::kInvalidRequest,
        "Streaming is not supported for a prefill request (kv_transfer_params.do_remote_decode).");
  }
  const uint64_t total = static_cast<uint64_t>(request.prompt.size()) + request.max_tokens;
  if (total > m.max_model_len) {
    return make_error(EngineError::kContextLength,
                      "This model's maximum context length is " + std::to_string(m.max_model_len) +
                          " tokens. However, you requested " + std::to_string(total) + " tokens (" +
                          std::to_string(request.prompt.size()) + " in the messages, " +
                          std::to_string(request.max_tokens) +
                          " in the completion). Please reduce the length of the messages or completion.");
  }
  if ((total + m.block_size - 1) / m.block_size > m.num_gpu_blocks) {
    return make_error(EngineError::kContextLength,
                      "The request needs " + std::to_string(total) +
                          " tokens of KV cache but the pool holds " +
                          std::to_string(static_cast<uint64_t>(m.num_gpu_blocks) * m.block_size) + ".");
  }
  if (waiting_.size() + num_pulling_ >= config_.max_waiting) {
    return make_error(EngineError::kQueueFull, "Failed to enqueue request, waiting requests queue is full.");
  }

  catch_up(now);  // never schedule a request before it arrived
  auto r = std::make_unique<Req>();
  r->handle = next_handle_++;
  r->in = std::move(request);
  r->tokens = std::move(r->in.prompt);
  r->in.prompt.clear();
  r->prompt_len = static_cast<uint32_t>(r->tokens.size());
  r->tokens.reserve(r->tokens.size() + std::min<uint32_t>(r->in.max_tokens, 4096));
  if (r->in.external_id.empty()) {
    r->in.external_id = "sim-req-" + std::to_string(r->handle);
  }
  r->seed = r->in.seed ? *r->in.seed : prompt_seed(r->tokens);
  if (r->in.reply_mode == ReplyMode::kEcho) {
    std::vector<TokenId> ids;
    encode(r->in.echo_text, ids, &r->echo_ends);
    r->echo_tokens = static_cast<uint32_t>(ids.size());
  }
  if (r->in.eos_at > 0) {
    r->eos_at = r->in.eos_at;
  } else if (!r->in.ignore_eos) {
    r->eos_at = r->in.reply_mode == ReplyMode::kEcho
                    ? r->echo_tokens + 1
                    : 1 + static_cast<uint32_t>(mix64(r->seed ^ 0x454f53ULL) %
                                                std::max<uint32_t>(1, config_.random_reply_max_tokens));
  }
  if (r->in.kv_transfer && r->in.kv_transfer->do_remote_prefill) {
    r->pull = r->in.kv_transfer->complete_for_pull() ? PullState::kWanted : PullState::kFailed;
    if (r->pull == PullState::kFailed) {
      ++stats_.kv_pulls_failed;  // vLLM: "Got invalid KVTransferParams", recompute
    }
  }
  extend_block_hashes(r->tokens, config_.model.block_size, r->hashes);
  r->timing.arrival = now;
  ++stats_.requests_received;

  Req* raw = r.get();
  requests_.emplace(raw->handle, std::move(r));
  waiting_.push_back(raw);
  wake(now);
  return raw->handle;
}

void Engine::wake(Nanos now) {
  if (!busy_ && has_schedulable_work()) {
    wake_at_ = std::min(wake_at_, now);
  }
}

bool Engine::has_schedulable_work() const {
  return !waiting_.empty() || !running_.empty();
}

Nanos Engine::next_event_time() const {
  Nanos t = busy_ ? step_end_ : wake_at_;
  if (!kv_ready_.empty()) {
    t = std::min(t, kv_ready_.begin()->first);
  }
  if (!hold_deadlines_.empty()) {
    t = std::min(t, hold_deadlines_.begin()->first);
  }
  return t;
}

void Engine::advance_to(Nanos now) {
  for (;;) {
    const Nanos t = next_event_time();
    if (t > now) {
      return;
    }
    process_timers(t);
    if (busy_ && step_end_ <= t) {
      complete_step();
    }
    if (!busy_) {
      wake_at_ = kNever;
      start_step(t);
    }
  }
}

void Engine::catch_up(Nanos now) {
  // Everything strictly before now happens first; what is due exactly at now
  // waits for advance_to(now), so simultaneous arrivals share one step.
  while (next_event_time() < now) {
    advance_to(next_event_time());
  }
}

void Engine::process_timers(Nanos t) {
  while (!kv_ready_.empty() && kv_ready_.begin()->first <= t) {
    const RequestHandle h = kv_ready_.begin()->second;
    kv_ready_.erase(kv_ready_.begin());
    auto it = requests_.find(h);
    if (it == requests_.end()) {
      continue;
    }
    Req& r = *it->second;
    if (r.state != ReqState::kPulling) {
      continue;
    }
    // The pulled blocks now hold the prompt's KV (vLLM: num_computed =
    // blocks * block_size, minus one if that is the whole prompt).
    r.pull = PullState::kDone;
    r.num_computed = std::min<uint32_t>(r.pull_target_tokens, static_cast<uint32_t>(r.tokens.size()) - 1);
    r.transferred_tokens = r.num_computed > r.cached_tokens ? r.num_computed - r.cached_tokens : 0;
    // Delayed registration: pulled blocks enter the prefix cache only now that their KV has
    // landed (vLLM allocates them with delay_cache_blocks and caches them after the transfer).
    cache_full_blocks(r, r.num_computed);
    ++stats_.kv_pulls_ok;
    --num_pulling_;
    r.state = ReqState::kWaiting;
    waiting_.push_front(&r);
  }
  while (!hold_deadlines_.empty() && hold_deadlines_.begin()->first <= t) {
    const std::string id = hold_deadlines_.begin()->second;
    hold_deadlines_.erase(hold_deadlines_.begin());
    auto it = holds_.find(id);
    if (it == holds_.end() || it->second.deadline > t) {
      continue;
    }
    pool_.release(it->second.blocks);
    holds_.erase(it);
    ++stats_.kv_handoffs_expired;
    remember_expired(id);
  }
}

void Engine::remember_expired(const std::string& id) {
  expired_ids_.push_back(id);
  if (expired_ids_.size() > kExpiredMemory) {
    expired_ids_.pop_front();
  }
}

bool Engine::ensure_blocks(Req& r, uint64_t total_tokens) {
  const uint32_t bs = config_.model.block_size;
  const uint64_t need_total = (total_tokens + bs - 1) / bs;
  if (need_total <= r.blocks.size()) {
    return true;
  }
  return pool_.allocate(static_cast<uint32_t>(need_total - r.blocks.size()), r.blocks);
}

void Engine::drop_blocks(Req& r) {
  pool_.release(r.blocks);
  r.blocks.clear();
  r.registered_blocks = 0;
  r.num_computed = 0;
}

void Engine::preempt(Req& r) {
  // vLLM V1 preempts by recompute: free everything (its computed blocks stay
  // prefix-cached), requeue at the front.
  pool_.release(r.blocks);
  r.blocks.clear();
  r.registered_blocks = 0;
  r.num_computed = 0;
  r.state = ReqState::kWaiting;
  ++r.preemptions;
  ++stats_.preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), &r));
  waiting_.push_front(&r);
}

void Engine::cache_full_blocks(Req& r, uint64_t num_tokens) {
  if (!config_.enable_prefix_caching) {
    return;
  }
  const uint32_t bs = config_.model.block_size;
  const uint64_t n = std::min<uint64_t>(num_tokens, r.tokens.size());
  const uint32_t full = static_cast<uint32_t>(std::min<uint64_t>(n / bs, r.blocks.size()));
  if (full <= r.registered_blocks) {
    return;
  }
  if (r.hashes.size() < full) {
    extend_block_hashes(std::span<const TokenId>(r.tokens.data(), n), bs, r.hashes);
  }
  for (uint32_t b = r.registered_blocks; b < full; ++b) {
    pool_.cache_block(r.blocks[b], r.hashes[b], b == 0 ? nullptr : &r.hashes[b - 1],
                      std::span<const TokenId>(r.tokens.data() + static_cast<size_t>(b) * bs, bs), bs);
  }
  r.registered_blocks = full;
}

void Engine::start_pull(Req& r, Nanos t) {
  const uint32_t bs = config_.model.block_size;
  const auto& p = *r.in.kv_transfer;
  const uint32_t remote_tokens = static_cast<uint32_t>(p.remote_block_ids->size()) * bs;
  r.pull_target_tokens = std::min<uint32_t>(remote_tokens, r.prompt_len);
  r.pull = PullState::kPending;
  r.state = ReqState::kPulling;
  ++num_pulling_;
  Event e;
  e.kind = EventKind::kKvPull;
  e.handle = r.handle;
  e.time = t;
  KvPull pull;
  pull.remote_engine_id = *p.remote_engine_id;
  pull.remote_host = *p.remote_host;
  pull.remote_port = *p.remote_port;
  pull.remote_request_id = *p.remote_request_id;
  pull.remote_block_ids = *p.remote_block_ids;
  pull.tokens = r.pull_target_tokens > r.cached_tokens ? r.pull_target_tokens - r.cached_tokens : 0;
  e.pull = std::move(pull);
  events_.push_back(std::move(e));
}

void Engine::complete_kv_pull(RequestHandle handle, ClaimStatus status, Nanos now) {
  catch_up(now);
  auto it = requests_.find(handle);
  if (it == requests_.end() || it->second->state != ReqState::kPulling ||
      it->second->pull != PullState::kPending) {
    return;
  }
  Req& r = *it->second;
  if (status == ClaimStatus::kOk) {
    r.pull = PullState::kTransferring;
    const uint32_t tokens =
        r.pull_target_tokens > r.cached_tokens ? r.pull_target_tokens - r.cached_tokens : 0;
    kv_ready_.emplace(now + scaled(config_.model.kv_transfer_time(tokens)), handle);
    return;
  }
  // kv_load_failure_policy=recompute: keep the local cache hits, prefill the rest.
  r.pull = PullState::kFailed;
  ++stats_.kv_pulls_failed;
  --num_pulling_;
  r.state = ReqState::kWaiting;
  waiting_.push_front(&r);
  wake(now);
}

void Engine::flush_evicted() {
  if (config_.offload != nullptr && !evicted_.empty()) {
    config_.offload->put(evicted_,
                         static_cast<uint64_t>(config_.model.block_size) * config_.model.kv_bytes_per_token);
    evicted_.clear();
  }
}

uint32_t Engine::load_from_tier(Req& r, uint32_t hit_blocks, uint32_t max_blocks) {
  const size_t end = std::min<size_t>(r.hashes.size(), max_blocks);
  if (config_.offload == nullptr || hit_blocks >= end) {
    return 0;
  }
  flush_evicted();
  tier_run_.clear();
  config_.offload->lookup(std::span<const BlockHash>(r.hashes).subspan(hit_blocks, end - hit_blocks),
                          config_.offload_lease, tier_run_);
  const auto n = static_cast<uint32_t>(std::min(tier_run_.size(), end - hit_blocks));
  const uint32_t bs = config_.model.block_size;
  for (uint32_t i = 0; i < n; ++i) {
    (tier_run_[i] == OffloadTierKind::kRam ? r.load_ram : r.load_ssd) += bs;
  }
  r.load_ns = config_.model.tier_load_time(r.load_ram, r.load_ssd);
  return n;
}

bool Engine::try_schedule_waiting(Req& r, uint32_t& budget, Nanos t) {
  const uint32_t bs = config_.model.block_size;
  const uint32_t num_tokens = static_cast<uint32_t>(r.tokens.size());
  const bool fresh = r.blocks.empty();
  uint32_t hit_blocks = 0;
  if (fresh) {
    // Local prefix-cache hit, leaving at least one token to compute.
    const uint32_t max_hit = (num_tokens - 1) / bs;
    if (config_.enable_prefix_caching) {
      hit_blocks = pool_.acquire_cached_prefix(
          std::span<const BlockHash>(r.hashes).first(std::min<size_t>(r.hashes.size(), max_hit)), max_hit,
          r.blocks);
    }
    r.load_ram = r.load_ssd = 0;
    r.load_ns = 0;
    if (config_.enable_prefix_caching) {
      // A decode leg too: what its own tier holds beyond the HBM hit is loaded here and only the
      // rest is pulled from the prefill node (a pull whose params were invalid recomputes the rest).
      hit_blocks += load_from_tier(r, hit_blocks, max_hit);
    }
    r.num_computed = hit_blocks * bs;
  }
  if (r.pull == PullState::kWanted) {
    // Decode leg: allocate room for the remote blocks, then ask for them.
    r.cached_tokens = r.num_computed;
    const uint32_t remote_tokens = std::min<uint32_t>(
        static_cast<uint32_t>(r.in.kv_transfer->remote_block_ids->size()) * bs, r.prompt_len);
    if (remote_tokens > r.num_computed) {
      if (!ensure_blocks(r, remote_tokens)) {
        pool_.release(r.blocks);
        r.blocks.clear();
        r.num_computed = 0;
        return false;
      }
      stats_.prefix_cache_queries += num_tokens;
      stats_.prefix_cache_hits += r.cached_tokens;
      r.loaded_ram = r.load_ram;
      r.loaded_ssd = r.load_ssd;
      r.counted_first_schedule = true;
      start_pull(r, t);
      return true;
    }
    r.pull = PullState::kDone;  // nothing to pull (short prompt or all cached)
  }
  const uint32_t new_tokens = std::min(num_tokens - r.num_computed, budget);
  if (!ensure_blocks(r, static_cast<uint64_t>(r.num_computed) + new_tokens)) {
    if (fresh) {
      pool_.release(r.blocks);
      r.blocks.clear();
      r.num_computed = 0;
      r.load_ram = r.load_ssd = 0;
      r.load_ns = 0;
    }
    return false;
  }
  cache_full_blocks(r, static_cast<uint64_t>(r.num_computed) + new_tokens);
  if (!r.counted_first_schedule || (fresh && r.preemptions > 0)) {
    if (!r.counted_first_schedule) {
      r.cached_tokens = r.num_computed;
      r.loaded_ram = r.load_ram;  // reported like cached_tokens: as first scheduled
      r.loaded_ssd = r.load_ssd;
      const uint32_t full_prompt_blocks = r.prompt_len / bs;
      stats_.blocks_reused += std::min(hit_blocks, full_prompt_blocks);
      stats_.blocks_missed += full_prompt_blocks - std::min(hit_blocks, full_prompt_blocks);
    }
    stats_.prefix_cache_queries += num_tokens;
    stats_.prefix_cache_hits += r.num_computed;
    r.counted_first_schedule = true;
  }
  if (r.timing.scheduled < 0) {
    r.timing.scheduled = t;
  }
  r.state = ReqState::kRunning;
  running_.push_back(&r);
  step_.push_back({&r, new_tokens, false});
  budget -= new_tokens;
  return true;
}

void Engine::start_step(Nanos t) {
  const NodeModel& m = config_.model;
  step_.clear();
  uint32_t budget = m.max_num_batched_tokens;
  bool preempted = false;

  // 1. Running requests: decode tokens and the next chunks of partial prefills.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Req* r = running_[i];
    const uint32_t new_tokens = std::min(static_cast<uint32_t>(r->tokens.size()) - r->num_computed, budget);
    if (new_tokens == 0) {
      continue;
    }
    bool self_preempted = false;
    while (!ensure_blocks(*r, static_cast<uint64_t>(r->num_computed) + new_tokens)) {
      Req* victim = running_.back();  // lowest priority: the most recently admitted (FCFS)
      preempt(*victim);
      preempted = true;
      if (victim == r) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) {
      break;
    }
    cache_full_blocks(*r, static_cast<uint64_t>(r->num_computed) + new_tokens);
    const bool decode = r->generated > 0 && r->num_computed + 1 == r->tokens.size();
    step_.push_back({r, new_tokens, decode});
    budget -= new_tokens;
  }

  // 2. Waiting requests, FCFS, while seats, budget and blocks allow (vLLM
  // admits none in a step that preempted, unless the step would be empty).
  if (!preempted || step_.empty()) {
    bool retried = false;
    while (!waiting_.empty() && running_.size() < m.max_num_seqs && budget > 0) {
      Req* r = waiting_.front();
      waiting_.pop_front();
      if (try_schedule_waiting(*r, budget, t)) {
        continue;
      }
      waiting_.push_front(r);
      if (running_.empty() && step_.empty() && !retried) {
        // Nothing running will ever free blocks: waiting requests that hold
        // KV (pulled or partially recomputed) give it back to the prefix
        // cache, so the queue cannot deadlock on its own reservations.
        retried = true;
        bool freed = false;
        for (Req* w : waiting_) {
          if (!w->blocks.empty()) {
            drop_blocks(*w);
            freed = true;
          }
        }
        if (freed) {
          continue;
        }
      }
      break;
    }
  }

  if (step_.empty()) {
    return;  // idle, or blocked on KV space until something frees blocks
  }
  uint64_t prefill_tokens = 0;
  double pairs = 0.0;
  uint32_t decode_seqs = 0;
  uint64_t decode_ctx = 0;
  for (const auto& s : step_) {
    if (s.decode) {
      ++decode_seqs;
      decode_ctx += s.req->num_computed + 1;
    } else {
      prefill_tokens += s.new_tokens;
      pairs += static_cast<double>(s.new_tokens) *
               (static_cast<double>(s.req->num_computed) + static_cast<double>(s.new_tokens) / 2.0);
    }
  }
  Nanos load_ns = 0;  // offload-tier loads of the requests this step starts (before their prefill)
  for (const auto& s : step_) {
    load_ns += s.req->load_ns;
    s.req->load_ns = 0;
  }
  flush_evicted();
  const Nanos model_ns = m.step_time(prefill_tokens, pairs, decode_seqs, decode_ctx) + load_ns;
  const Nanos dur = scaled(model_ns);
  busy_ = true;
  step_start_ = t;
  step_end_ = t + dur;

  if (config_.on_step) {
    config_.on_step(StepInfo{t, step_end_, static_cast<uint32_t>(step_.size()),
                             static_cast<uint32_t>(prefill_tokens), decode_seqs, decode_ctx});
  }
  ++stats_.steps;
  stats_.busy_seqs_sum += step_.size();
  stats_.iteration_tokens.observe(static_cast<double>(prefill_tokens + decode_seqs));
  const double prefill_cost =
      static_cast<double>(prefill_tokens) * m.prefill_ns_per_token + pairs * m.prefill_attention_ns_per_pair;
  const double decode_cost = static_cast<double>(decode_seqs) * m.decode_ns_per_seq +
                             static_cast<double>(decode_ctx) * m.decode_attention_ns_per_context_token;
  const double share = prefill_cost + decode_cost > 0 ? prefill_cost / (prefill_cost + decode_cost) : 0.0;
  stats_.prefill_ns += static_cast<uint64_t>(static_cast<double>(dur) * share);
  stats_.decode_ns += static_cast<uint64_t>(static_cast<double>(dur) * (1.0 - share));
  stats_.last_step_gen_throughput =
      static_cast<double>(decode_seqs) / (static_cast<double>(dur) * kNanosToSeconds);
  if (decode_seqs > 0) {
    stats_.itl.observe(static_cast<double>(dur) * kNanosToSeconds, decode_seqs);
  }
}

void Engine::complete_step() {
  const Nanos t = step_end_;
  busy_ = false;
  finished_scratch_.clear();
  for (const auto& s : step_) {
    Req& r = *s.req;
    if (r.state != ReqState::kRunning) {
      continue;  // aborted while the step ran
    }
    r.num_computed += s.new_tokens;  // its blocks were cached when the step was scheduled
    if (r.num_computed < r.tokens.size()) {
      continue;  // a prefill chunk; more to come
    }
    if (r.generated == 0 && r.in.fail_before_first_token != 0) {
      finished_scratch_.push_back(&r);
      finish(r, FinishReason::kError, t, r.in.fail_before_first_token);
      continue;
    }
    emit_token(r, t);
    if (r.state == ReqState::kFinished) {
      finished_scratch_.push_back(&r);
    }
  }
  if (!finished_scratch_.empty()) {
    running_.erase(std::remove_if(running_.begin(), running_.end(),
                                  [](const Req* r) { return r->state == ReqState::kFinished; }),
                   running_.end());
    for (Req* r : finished_scratch_) {
      requests_.erase(r->handle);
    }
  }
  step_.clear();
  // The step is done: what its scheduling and completion recorded may be published now.
  pool_.take_events(kv_events_);
}

void Engine::take_kv_events(std::vector<KvCacheEvent>& out) {
  std::move(kv_events_.begin(), kv_events_.end(), std::back_inserter(out));
  kv_events_.clear();
  if (!busy_) {
    pool_.take_events(out);  // recorded outside any step (admin evictions, an idle engine)
  }
}

void Engine::emit_token(Req& r, Nanos t) {
  const uint32_t k = r.generated;
  TokenId id;
  std::string_view text;
  const bool is_eos = r.eos_at != 0 && k + 1 == r.eos_at;
  if (is_eos) {
    id = kEosToken;
  } else if (r.in.reply_mode == ReplyMode::kEcho && k < r.echo_tokens) {
    const uint32_t begin = k == 0 ? 0 : r.echo_ends[k - 1];
    text = std::string_view(r.in.echo_text).substr(begin, r.echo_ends[k] - begin);
    id = piece_id(text);
  } else {
    const GeneratedPiece p = generated_piece(r.seed, k);
    id = p.id;
    text = p.text;
  }
  r.tokens.push_back(id);
  ++r.generated;
  ++stats_.generation_tokens;
  if (r.in.want_text) {
    r.text.append(text);
  }
  if (k == 0) {
    r.timing.first_token = t;
    stats_.prompt_tokens += r.prompt_len;
    stats_.prompt_tokens_cached += std::min(r.cached_tokens, r.prompt_len);
    stats_.prompt_tokens_transferred += r.transferred_tokens;
    stats_.prompt_tokens_loaded_ram += r.loaded_ram;
    stats_.prompt_tokens_loaded_ssd += r.loaded_ssd;
    stats_.prompt_tokens_computed +=
        r.prompt_len - std::min(r.prompt_len, r.cached_tokens + r.transferred_tokens);
    const double ttft = static_cast<double>(t - r.timing.arrival) * kNanosToSeconds;
    stats_.ttft.observe(ttft);
    stats_.sglang_ttft.observe(ttft);
  } else {
    stats_.sglang_tpot.observe(static_cast<double>(t - r.last_token) * kNanosToSeconds);
  }
  r.last_token = t;
  stats_.max_seq_tokens = std::max<uint64_t>(stats_.max_seq_tokens, r.tokens.size());
  const bool length_cap = r.generated >= r.in.max_tokens || r.tokens.size() >= config_.model.max_model_len;
  if (r.in.want_token_events) {
    Event e;
    e.kind = EventKind::kToken;
    e.handle = r.handle;
    e.time = t;
    e.token_index = k;
    e.token_id = id;
    e.text.assign(text);
    e.last = is_eos || length_cap;
    e.finish_reason = is_eos ? FinishReason::kStop : FinishReason::kLength;
    if (k == 0) {
      e.timing = r.timing;
      e.cached_tokens = std::min(r.prompt_len, r.cached_tokens + r.transferred_tokens);
      e.transferred_tokens = r.transferred_tokens;
    }
    events_.push_back(std::move(e));
  }
  if (is_eos) {
    finish(r, FinishReason::kStop, t);
  } else if (length_cap) {
    finish(r, FinishReason::kLength, t);
  }
}

void Engine::finish(Req& r, FinishReason reason, Nanos t, int error_status) {
  const ReqState prev = r.state;
  r.state = ReqState::kFinished;
  r.timing.finished = t;
  Completion c;
  c.reason = reason;
  c.error_status = error_status;
  c.usage.prompt_tokens = r.prompt_len;
  c.usage.completion_tokens = r.generated;
  c.usage.cached_tokens = std::min(r.prompt_len, r.cached_tokens + r.transferred_tokens);
  c.timing = r.timing;
  c.transferred_tokens = r.transferred_tokens;
  c.usage.loaded_ram_tokens = r.loaded_ram;
  c.usage.loaded_ssd_tokens = r.loaded_ssd;
  c.kv_pull_failed = r.pull == PullState::kFailed;
  c.preemptions = r.preemptions;
  c.text = std::move(r.text);

  const bool hold = reason == FinishReason::kLength && r.in.kv_transfer &&
                    r.in.kv_transfer->do_remote_decode && prev == ReqState::kRunning;
  if (hold) {
    // NixlConnector.request_finished: only full computed blocks travel; the
    // prefill side keeps them (delay_free) until claimed or timed out.
    const uint32_t full =
        std::min<uint32_t>(r.num_computed / config_.model.block_size, static_cast<uint32_t>(r.blocks.size()));
    KvTransferParams p;
    p.do_remote_prefill = true;
    p.do_remote_decode = false;
    p.remote_block_ids.emplace(r.blocks.begin(), r.blocks.begin() + full);
    p.remote_engine_id = config_.engine_id;
    p.remote_request_id = r.in.external_id;
    p.remote_host = config_.side_channel_host;
    p.remote_port = config_.side_channel_port;
    p.tp_size = config_.tp_size;
    if (full > 0) {
      if (auto old = holds_.find(r.in.external_id); old != holds_.end()) {
        pool_.release(old->second.blocks);  // a reused request id: the newest handoff wins
        holds_.erase(old);
      }
      Hold h;
      h.blocks = std::move(r.blocks);
      h.remote_ids = *p.remote_block_ids;
      h.deadline = t + config_.kv_abort_timeout;
      auto [it, inserted] = holds_.insert_or_assign(r.in.external_id, std::move(h));
      hold_deadlines_.emplace(it->second.deadline, r.in.external_id);
      (void)inserted;
    } else {
      pool_.release(r.blocks);
    }
    c.kv_transfer_params = std::move(p);
  } else {
    pool_.release(r.blocks);
  }
  r.blocks.clear();
  observe_finished(r, c);

  Event e;
  e.kind = EventKind::kFinished;
  e.handle = r.handle;
  e.time = t;
  e.completion = std::move(c);
  events_.push_back(std::move(e));
}

void Engine::observe_finished(const Req& r, const Completion& c) {
  if (c.reason == FinishReason::kError) {
    return;
  }
  stats_.finished[static_cast<size_t>(c.reason)] += 1;
  const auto sec = [](Nanos n) { return static_cast<double>(n) * kNanosToSeconds; };
  const RequestTiming& tm = r.timing;
  const double e2e = sec(tm.finished - tm.arrival);
  stats_.e2e.observe(e2e);
  stats_.sglang_e2e.observe(e2e);
  if (tm.scheduled >= 0) {
    stats_.queue_time.observe(sec(tm.scheduled - tm.arrival));
    stats_.inference_time.observe(sec(tm.finished - tm.scheduled));
  } else {
    stats_.queue_time.observe(sec(tm.finished - tm.arrival));
  }
  if (tm.first_token >= 0) {
    stats_.prefill_time.observe(sec(tm.first_token - (tm.scheduled >= 0 ? tm.scheduled : tm.arrival)));
    stats_.decode_time.observe(sec(tm.finished - tm.first_token));
    if (r.generated > 1) {
      stats_.time_per_output_token.observe(sec(tm.finished - tm.first_token) /
                                           static_cast<double>(r.generated - 1));
    }
  }
  stats_.prompt_tokens_hist.observe(r.prompt_len);
  stats_.generation_tokens_hist.observe(r.generated);
  stats_.max_generation_tokens_hist.observe(r.in.max_tokens);
  stats_.params_max_tokens.observe(r.in.max_tokens);
  stats_.params_n.observe(1);
}

void Engine::abort(RequestHandle handle, Nanos now) {
  catch_up(now);
  auto it = requests_.find(handle);
  if (it == requests_.end()) {
    return;
  }
  Req& r = *it->second;
  switch (r.state) {
    case ReqState::kWaiting:
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &r));
      break;
    case ReqState::kPulling:
      --num_pulling_;  // a late complete_kv_pull / kv_ready finds no request
      break;
    case ReqState::kRunning:
      running_.erase(std::find(running_.begin(), running_.end(), &r));
      break;
    case ReqState::kFinished:
      return;
  }
  finish(r, FinishReason::kAbort, now);
  // A step in flight may still point at r: drop it from the step first.
  step_.erase(std::remove_if(step_.begin(), step_.end(), [&r](const Scheduled& s) { return s.req == &r; }),
              step_.end());
  requests_.erase(it);
  wake(now);
}

void Engine::take_events(std::vector<Event>& out) {
  if (out.empty()) {
    out.swap(events_);
    return;
  }
  std::move(events_.begin(), events_.end(), std::back_inserter(out));
  events_.clear();
}

ClaimStatus Engine::claim_blocks(std::string_view remote_request_id, std::span<const int64_t> block_ids,
                                 Nanos now) {
  catch_up(now);
  process_timers(now);  // a claim at or after the deadline sees the expiry
  auto it = holds_.find(std::string(remote_request_id));
  if (it == holds_.end()) {
    const bool expired =
        std::find(expired_ids_.begin(), expired_ids_.end(), remote_request_id) != expired_ids_.end();
    return expired ? ClaimStatus::kExpired : ClaimStatus::kUnknown;
  }
  const auto& held = it->second.remote_ids;
  if (!std::equal(held.begin(), held.end(), block_ids.begin(), block_ids.end())) {
    return ClaimStatus::kMismatch;
  }
  pool_.release(it->second.blocks);
  holds_.erase(it);
  ++stats_.kv_handoffs_claimed;
  wake(now);  // freed blocks may unblock waiting requests
  return ClaimStatus::kOk;
}

size_t Engine::evict_all(Nanos now) {
  catch_up(now);
  return pool_.evict_all();
}

size_t Engine::evict_prefix(std::span<const TokenId> prefix_tokens, Nanos now) {
  catch_up(now);
  std::vector<BlockHash> hashes;
  extend_block_hashes(prefix_tokens, config_.model.block_size, hashes);
  return pool_.evict_hashes(hashes);
}

uint32_t Engine::cached_prefix_blocks(std::span<const TokenId> tokens) const {
  std::vector<BlockHash> hashes;
  extend_block_hashes(tokens, config_.model.block_size, hashes);
  return pool_.count_cached_prefix(hashes);
}

EngineGauges Engine::gauges() const {
  EngineGauges g;
  g.running = static_cast<uint32_t>(running_.size());
  g.waiting_for_kv = static_cast<uint32_t>(num_pulling_);
  g.waiting = static_cast<uint32_t>(waiting_.size() + num_pulling_);
  g.held_handoffs = static_cast<uint32_t>(holds_.size());
  g.used_blocks = pool_.num_used();
  g.total_blocks = pool_.num_blocks();
  g.block_size = config_.model.block_size;
  g.cached_blocks = pool_.num_cached();
  g.kv_usage = pool_.usage();
  return g;
}

}  // namespace cgn::sim
