#include "sim/node_model.h"

#include <algorithm>
#include <cmath>

namespace cgn::sim {

Nanos NodeModel::step_time(uint64_t prefill_tokens, double prefill_pairs, uint32_t decode_seqs,
                           uint64_t decode_context_tokens) const {
  const double ns = step_overhead_ns + static_cast<double>(prefill_tokens) * prefill_ns_per_token +
                    prefill_pairs * prefill_attention_ns_per_pair +
                    static_cast<double>(decode_seqs) * decode_ns_per_seq +
                    static_cast<double>(decode_context_tokens) * decode_attention_ns_per_context_token;
  return static_cast<Nanos>(std::llround(ns));
}

Nanos NodeModel::idle_ttft(uint64_t prompt_tokens, uint64_t cached_tokens) const {
  // vLLM always computes at least the last prompt token (to get logits).
  uint64_t done = std::min(cached_tokens, prompt_tokens == 0 ? 0 : prompt_tokens - 1);
  Nanos total = 0;
  while (done < prompt_tokens) {
    const uint64_t chunk = std::min<uint64_t>(max_num_batched_tokens, prompt_tokens - done);
    const double pairs =
        static_cast<double>(chunk) * (static_cast<double>(done) + static_cast<double>(chunk) / 2.0);
    total += step_time(chunk, pairs, 0, 0);
    done += chunk;
  }
  return total;
}

Nanos NodeModel::decode_itl(uint32_t batch, uint64_t context) const {
  return step_time(0, 0.0, batch, static_cast<uint64_t>(batch) * context);
}

Nanos NodeModel::kv_transfer_time(uint64_t tokens) const {
  if (tokens == 0) {
    return 0;
  }
  return static_cast<Nanos>(
      std::llround(kv_transfer_fixed_ns + static_cast<double>(tokens) * kv_transfer_ns_per_token));
}

Nanos NodeModel::tier_load_time(uint64_t ram_tokens, uint64_t ssd_tokens) const {
  double ns = 0.0;
  if (ram_tokens > 0) {
    ns += tier_ram_fixed_ns + static_cast<double>(ram_tokens) * tier_ram_ns_per_token;
  }
  if (ssd_tokens > 0) {
    ns += tier_ssd_fixed_ns + static_cast<double>(ssd_tokens) * tier_ssd_ns_per_token;
  }
  return static_cast<Nanos>(std::llround(ns));
}

double NodeModel::energy_joules(Nanos elapsed, uint64_t prefill_busy_ns, uint64_t decode_busy_ns) const {
  constexpr double kPerNs = 1e-9;
  return idle_watts * static_cast<double>(std::max<Nanos>(elapsed, 0)) * kPerNs +
         (prefill_watts - idle_watts) * static_cast<double>(prefill_busy_ns) * kPerNs +
         (decode_watts - idle_watts) * static_cast<double>(decode_busy_ns) * kPerNs;
}

NodeModel default_node_model() {
  NodeModel m;
  m.name = "llama-3.1-8b-bf16-h100-sxm-80gb-vllm-v1";
  return m;
}

}  // namespace cgn::sim
