// The stream assembler's cost per event against a plain relay of the same stream, in one run:
//   BM_Relay             parse the upstream's SSE bytes and re-render each event for the client
//                        (what Dispatcher::relay_sse does per event, without the sockets);
//   BM_RelayAndAssemble  the same plus StreamAssembler::add for every event and finish() at the end.
// The difference of the per-event times is the assembler's added latency per event. Two streams:
// text deltas (a chat answer with logprobs) and tool-call argument fragments.
#include <benchmark/benchmark.h>

#include <string>

#include "core/http/sse.h"
#include "router/stream_assembler.h"

namespace {

constexpr int kEvents = 512;

std::string text_stream() {
  std::string out;
  for (int i = 0; i < kEvents; ++i) {
    cgn::http::append_sse_data(
        out, R"({"id":"chatcmpl-d0c68c86be0641129cffa5053c0c217e","object":"chat.completion.chunk",)"
             R"("created":1744513664,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,)"
             R"("delta":{"content":" token)" +
                 std::to_string(i) +
                 R"("},"logprobs":{"content":[{"token":" token","logprob":-0.25,"bytes":[32,116],)"
                 R"("top_logprobs":[]}]},"finish_reason":null}]})");
  }
  cgn::http::append_sse_data(out, "[DONE]");
  return out;
}

std::string tool_stream() {
  std::string out;
  for (int i = 0; i < kEvents; ++i) {
    cgn::http::append_sse_data(
        out, R"({"id":"chatcmpl-d0c68c86be0641129cffa5053c0c217e","object":"chat.completion.chunk",)"
             R"("created":1744513664,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":)" +
                 std::to_string(i % 2) + R"(,"function":{"arguments":"\"k)" + std::to_string(i) +
                 R"(\": 1, "}}]},"logprobs":null,"finish_reason":null}]})");
  }
  cgn::http::append_sse_data(out, "[DONE]");
  return out;
}

void run(benchmark::State& state, const std::string& sse, bool assemble) {
  for (auto _ : state) {
    cgn::http::SseParser parser;
    cgn::router::StreamAssembler assembler;
    std::string client;
    client.reserve(sse.size() + 64);
    (void)parser.feed(sse);
    cgn::http::SseEvent e;
    while (parser.pop(e)) {
      cgn::http::append_sse_event(client, e);
      if (assemble) {
        (void)assembler.add(e);
      }
    }
    if (assemble) {
      auto body = assembler.finish();
      benchmark::DoNotOptimize(body);
    }
    benchmark::DoNotOptimize(client);
  }
  state.SetItemsProcessed(state.iterations() * (kEvents + 1));
}

void BM_Relay_Text(benchmark::State& s) {
  run(s, text_stream(), false);
}
void BM_RelayAndAssemble_Text(benchmark::State& s) {
  run(s, text_stream(), true);
}
void BM_Relay_ToolCalls(benchmark::State& s) {
  run(s, tool_stream(), false);
}
void BM_RelayAndAssemble_ToolCalls(benchmark::State& s) {
  run(s, tool_stream(), true);
}
BENCHMARK(BM_Relay_Text);
BENCHMARK(BM_RelayAndAssemble_Text);
BENCHMARK(BM_Relay_ToolCalls);
BENCHMARK(BM_RelayAndAssemble_ToolCalls);

}  // namespace

BENCHMARK_MAIN();
