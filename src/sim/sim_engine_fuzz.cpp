// Fuzz target: random operation sequences against two engines (prefill and
// decode), checking the KV pool's invariants after every operation. Each
// input byte pair is one operation.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/engine.h"
#include "sim/sim_testing.h"

namespace {

void check(const cgn::sim::Engine& e) {
  const auto g = e.gauges();
  if (g.used_blocks > g.total_blocks || g.running > e.config().model.max_num_seqs || g.kv_usage < 0.0 ||
      g.kv_usage > 1.0) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cgn::sim;
  if (size > 4096) {
    return 0;
  }
  EngineConfig pc;
  pc.engine_id = "p";
  pc.model.num_gpu_blocks = 96;
  pc.model.max_num_seqs = 4;
  pc.model.max_num_batched_tokens = 256;
  pc.model.max_model_len = 1024;
  pc.kv_abort_timeout = 3 * cgn::kNanosPerSecond;
  EngineConfig dc = pc;
  dc.engine_id = "d";
  Engine p(pc), d(dc);
  testing::VirtualCluster cluster;
  cluster.add(p);
  cluster.add(d);
  std::vector<RequestHandle> handles;
  std::vector<KvTransferParams> params;
  cgn::Nanos now = 0;
  for (size_t i = 0; i + 1 < size; i += 2) {
    const uint8_t op = data[i] % 8;
    const uint8_t arg = data[i + 1];
    Engine& e = (arg & 1) ? d : p;
    switch (op) {
      case 0:
      case 1: {
        Request r;
        r.prompt = testing::make_prompt(1 + arg * 3, arg % 5);
        r.max_tokens = 1 + arg % 40;
        r.eos_at = arg % 7 == 0 ? 1 : 0;
        if (op == 1 && &e == &p) {
          r.kv_transfer = KvTransferParams{};
          r.kv_transfer->do_remote_decode = true;
          r.max_tokens = 1;
          r.external_id = "r" + std::to_string(arg % 4);
        } else if (op == 1 && !params.empty()) {
          r.kv_transfer = params[arg % params.size()];
        }
        auto h = e.add_request(std::move(r), now);
        if (h.ok()) {
          handles.push_back(*h);
        }
        break;
      }
      case 2:
        now += static_cast<cgn::Nanos>(arg) * 10 * cgn::kNanosPerMilli;
        for (const auto& ev : cluster.run_until(now)) {
          if (ev.kind == EventKind::kFinished && ev.completion->kv_transfer_params) {
            params.push_back(*ev.completion->kv_transfer_params);
          }
        }
        break;
      case 3:
        if (!handles.empty()) {
          e.abort(handles[arg % handles.size()], now);
        }
        break;
      case 4:
        e.evict_all(now);
        break;
      case 5:
        e.evict_prefix(testing::make_prompt(1 + arg * 3, arg % 5), now);
        break;
      case 6:
        if (!params.empty()) {
          const auto& k = params[arg % params.size()];
          (void)p.claim_blocks(k.remote_request_id.value_or(""),
                               k.remote_block_ids.value_or(std::vector<int64_t>{}), now);
        }
        break;
      default:
        now += cgn::kNanosPerSecond;
        cluster.run_until(now);
        break;
    }
    check(p);
    check(d);
  }
  // Drain everything: in the end only unclaimed handoffs may hold blocks.
  cluster.run_to_idle();
  if (d.gauges().used_blocks != 0 || p.gauges().held_handoffs != 0 || p.gauges().used_blocks != 0 ||
      d.gauges().running != 0 || d.gauges().waiting != 0) {
    __builtin_trap();
  }
  return 0;
}
