// Simulator benchmarks:
//  - Calibration: TTFT and ITL measured from the engine (virtual time) beside
//    the configured node model's closed forms; the ratio must stay in
//    [0.95, 1.05] (counters ttft_ratio / itl_ratio; the run fails otherwise).
//  - CPU cost of one simulated request through its whole lifecycle.
//  - Replay throughput: 16 engines in virtual time over the Mooncake
//    conversation trace (12,031 requests, ~12k-token prompts), the shape of
//    the routing benchmark.
//  - Tokenizer throughput.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "bench_harness/workload.h"
#include "sim/engine.h"
#include "sim/sim_testing.h"
#include "sim/tokenizer.h"

namespace cgn::sim {
namespace {

using testing::find_completion;
using testing::make_prompt;
using testing::VirtualCluster;

Request bench_request(std::vector<TokenId> prompt, uint32_t max_tokens, bool token_events) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.want_token_events = token_events;
  r.want_text = token_events;
  return r;
}

void check_ratio(benchmark::State& state, double ratio, const char* what) {
  if (ratio < 0.95 || ratio > 1.05) {
    state.SkipWithError(what);
  }
}

// TTFT of a lone request with arg0 prompt tokens, cold and then fully cached.
void BM_CalibrationTtft(benchmark::State& state) {
  const uint32_t n = static_cast<uint32_t>(state.range(0));
  double measured = 0, model = 0, measured_hit = 0, model_hit = 0;
  for (auto _ : state) {
    Engine e({});
    VirtualCluster c;
    c.add(e);
    const auto prompt = make_prompt(n, 1);
    auto h1 = *e.add_request(bench_request(prompt, 2, false), 0);
    const Completion first = *find_completion(c.run_to_idle(), h1);
    auto h2 = *e.add_request(bench_request(prompt, 2, false), 1000 * kNanosPerSecond);
    const Completion second = *find_completion(c.run_to_idle(), h2);
    measured = static_cast<double>(first.timing.ttft());
    model = static_cast<double>(e.config().model.idle_ttft(n, 0));
    measured_hit = static_cast<double>(second.timing.ttft());
    model_hit = static_cast<double>(e.config().model.idle_ttft(n, second.usage.cached_tokens));
  }
  state.counters["ttft_ms_measured"] = measured / 1e6;
  state.counters["ttft_ms_model"] = model / 1e6;
  state.counters["ttft_ratio"] = measured / model;
  state.counters["cached_ttft_ms_measured"] = measured_hit / 1e6;
  state.counters["cached_ttft_ms_model"] = model_hit / 1e6;
  state.counters["prefill_tok_per_s"] = static_cast<double>(n) / (measured / 1e9);
  check_ratio(state, measured / model, "TTFT off the configured model by more than 5%");
  check_ratio(state, measured_hit / model_hit, "cached TTFT off the configured model by more than 5%");
}
BENCHMARK(BM_CalibrationTtft)->Arg(1024)->Arg(4096)->Arg(12000)->Arg(32000)->Unit(benchmark::kMicrosecond);

// Client-visible ITL of a steady decode batch of arg0 sequences with
// 1,000-token prompts (token gaps whose step decoded the whole batch and no
// prefill), beside the model's step time for the same batch and contexts.
void BM_CalibrationItl(benchmark::State& state) {
  const uint32_t batch = static_cast<uint32_t>(state.range(0));
  constexpr uint32_t kPrompt = 1000, kOut = 64;
  double measured = 0, model = 0;
  for (auto _ : state) {
    EngineConfig cfg;
    std::map<Nanos, StepInfo> steps;
    cfg.on_step = [&steps](const StepInfo& s) { steps[s.end] = s; };
    Engine e(std::move(cfg));
    VirtualCluster c;
    c.add(e);
    for (uint32_t i = 0; i < batch; ++i) {
      (void)e.add_request(bench_request(make_prompt(kPrompt, 10 + i), kOut, true), 0);
    }
    const auto events = c.run_to_idle();
    std::map<RequestHandle, Nanos> last;
    double gap_sum = 0, model_sum = 0;
    uint64_t n = 0;
    for (const auto& ev : events) {
      if (ev.kind != EventKind::kToken) {
        continue;
      }
      auto prev = last.find(ev.handle);
      const auto step = steps.find(ev.time);
      if (prev != last.end() && step != steps.end() && step->second.decode_seqs == batch &&
          step->second.prefill_tokens == 0) {
        gap_sum += static_cast<double>(ev.time - prev->second);
        model_sum += static_cast<double>(
            e.config().model.decode_itl(batch, step->second.decode_context_tokens / batch));
        ++n;
      }
      last[ev.handle] = ev.time;
    }
    measured = n ? gap_sum / static_cast<double>(n) : 0;
    model = n ? model_sum / static_cast<double>(n) : 1;
  }
  state.counters["itl_ms_measured"] = measured / 1e6;
  state.counters["itl_ms_model"] = model / 1e6;
  state.counters["itl_ratio"] = measured / model;
  check_ratio(state, measured / model, "ITL off the configured model by more than 5%");
}
BENCHMARK(BM_CalibrationItl)->Arg(1)->Arg(8)->Arg(32)->Arg(128)->Arg(256)->Unit(benchmark::kMicrosecond);

// CPU per simulated request: arrive, queue, prefill 1,000 tokens, decode 64,
// finish, with or without per-token events. Requests overlap (one every 50 ms).
void BM_RequestLifecycle(benchmark::State& state) {
  const bool token_events = state.range(0) != 0;
  Engine e({});
  VirtualCluster c;
  c.add(e);
  std::vector<std::vector<TokenId>> prompts;
  for (uint64_t i = 0; i < 64; ++i) {
    prompts.push_back(make_prompt(1000, 1000 + i));
  }
  Nanos t = 0;
  uint64_t i = 0;
  for (auto _ : state) {
    (void)e.add_request(bench_request(prompts[i++ % prompts.size()], 64, token_events), t);
    t += 50 * kNanosPerMilli;
    benchmark::DoNotOptimize(c.run_until(t));
  }
  c.run_to_idle();
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(token_events ? "token events" : "finish events only");
}
BENCHMARK(BM_RequestLifecycle)->Arg(0)->Arg(1)->Unit(benchmark::kNanosecond);

struct TraceRow {
  Nanos arrival;
  uint32_t input;
  uint32_t output;
  std::vector<uint32_t> hash_ids;
};

std::vector<TraceRow> load_trace() {
  std::vector<TraceRow> rows;
  auto w = cgn::bench::load_mooncake_trace(cgn::bench::trace_path("conversation"));
  if (!w.ok()) {
    return rows;
  }
  for (const auto& r : w->requests) {
    TraceRow row{r.arrival, r.input_tokens(), r.output_tokens, {}};
    for (const auto& seg : r.segments) {
      row.hash_ids.push_back(static_cast<uint32_t>(seg.block_id));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// Tokens of a trace request: each hash id is a 512-token block whose tokens
// derive from the id, so shared ids give shared prefixes.
std::vector<TokenId> trace_prompt(const TraceRow& r) {
  std::vector<TokenId> out;
  out.reserve(r.input);
  for (uint32_t b = 0; b < r.hash_ids.size() && out.size() < r.input; ++b) {
    for (uint32_t k = 0; k < 512 && out.size() < r.input; ++k) {
      out.push_back(
          static_cast<TokenId>(mix64((static_cast<uint64_t>(r.hash_ids[b]) << 9) + k) % kTextVocab));
    }
  }
  return out;
}

// 16 engines, the whole conversation trace (or its first arg0 requests),
// least-outstanding routing, virtual time.
void BM_ReplayTrace16Engines(benchmark::State& state) {
  static const std::vector<TraceRow> rows = load_trace();
  if (rows.empty()) {
    state.SkipWithError(("cannot read " + cgn::bench::trace_path("conversation")).c_str());
    return;
  }
  const size_t n = std::min<size_t>(rows.size(), static_cast<size_t>(state.range(0)));
  double makespan = 0, mean_ttft = 0, hit = 0;
  uint64_t steps = 0;
  for (auto _ : state) {
    std::vector<std::unique_ptr<Engine>> engines;
    VirtualCluster c;
    for (int i = 0; i < 16; ++i) {
      EngineConfig cfg;
      cfg.engine_id = "e";
      cfg.engine_id.append(std::to_string(i));
      engines.push_back(std::make_unique<Engine>(std::move(cfg)));
      c.add(*engines.back());
    }
    std::vector<std::pair<Engine*, RequestHandle>> handles;
    double ttft_sum = 0;
    uint64_t done = 0, prompt_tokens = 0, cached = 0;
    auto collect = [&](const std::vector<Event>& evs) {
      for (const auto& ev : evs) {
        if (ev.kind == EventKind::kFinished) {
          ttft_sum += static_cast<double>(ev.completion->timing.ttft()) / 1e9;
          prompt_tokens += ev.completion->usage.prompt_tokens;
          cached += ev.completion->usage.cached_tokens;
          ++done;
        }
      }
    };
    for (size_t i = 0; i < n; ++i) {
      const TraceRow& r = rows[i];
      collect(c.run_until(r.arrival - 1));
      Engine* best = engines[0].get();
      uint32_t best_load = UINT32_MAX;
      for (auto& e : engines) {
        const auto g = e->gauges();
        if (g.running + g.waiting < best_load) {
          best_load = g.running + g.waiting;
          best = e.get();
        }
      }
      (void)best->add_request(bench_request(trace_prompt(r), std::max<uint32_t>(1, r.output), false),
                              r.arrival);
    }
    collect(c.run_to_idle());
    makespan = static_cast<double>(c.now()) / 1e9;
    mean_ttft = done ? ttft_sum / static_cast<double>(done) : 0;
    hit = prompt_tokens ? static_cast<double>(cached) / static_cast<double>(prompt_tokens) : 0;
    steps = 0;
    for (auto& e : engines) {
      steps += e->stats().steps;
    }
  }
  state.counters["requests"] = static_cast<double>(n);
  state.counters["sim_seconds"] = makespan;
  state.counters["mean_ttft_s"] = mean_ttft;
  state.counters["cache_hit_ratio"] = hit;
  state.counters["steps"] = static_cast<double>(steps);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_ReplayTrace16Engines)->Arg(1000)->Arg(20000)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_Tokenize(benchmark::State& state) {
  std::string text;
  while (text.size() < (1 << 20)) {
    text += "Cognitora routes each request to the replica holding the longest cached prefix.\n";
  }
  std::vector<TokenId> ids;
  for (auto _ : state) {
    ids.clear();
    encode(text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_Tokenize)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace cgn::sim

BENCHMARK_MAIN();
