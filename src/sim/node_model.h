// The timing and capacity model of one simulated engine replica.
//
// One scheduler step (a forward pass over the batch) takes
//   step = overhead
//        + prefill_tokens * prefill_per_token
//        + sum over prefill chunks of chunk * (context_before + chunk / 2) * prefill_attention_per_pair
//        + decode_seqs * decode_per_seq
//        + sum over decode seqs of context * decode_attention_per_context_token
// so TTFT = queueing + the steps that prefill the uncached prompt tokens, and
// the inter-token latency is the step time, which grows with the batch size
// and with the contexts the batch attends over.
//
// default_node_model() is Llama-3.1-8B (bf16) on one H100 SXM 80GB under vLLM
// V1; docs/sim.md derives every number and cites its sources. The benchmarks
// use it unchanged.
#pragma once

#include <cstdint>
#include <string>

#include "core/clock.h"

namespace cgn::sim {

struct NodeModel {
  std::string name;
  // Capacity.
  uint32_t block_size = 16;                // tokens per KV block
  uint32_t num_gpu_blocks = 27'500;        // KV blocks in the pool
  uint32_t max_num_seqs = 256;             // running requests per step
  uint32_t max_num_batched_tokens = 8192;  // token budget per step (chunked prefill)
  uint32_t max_model_len = 131'072;        // prompt + completion tokens
  // Step-time coefficients, in nanoseconds.
  double step_overhead_ns = 6.0e6;             // weights read once per step + launch/sampling
  double prefill_ns_per_token = 65'000.0;      // linear (GEMM) cost of one prefill token
  double prefill_attention_ns_per_pair = 1.5;  // causal attention of one prefill token over one earlier token
  double decode_ns_per_seq = 60'000.0;         // linear cost of one decode token
  double decode_attention_ns_per_context_token = 50.0;  // KV read per context token per decode step
  // P/D: the decode side pulls KV instead of prefilling it.
  double kv_transfer_fixed_ns = 2.0e6;        // handshake + first-byte latency of one pull
  double kv_transfer_ns_per_token = 5'000.0;  // 128 KiB per token at ~26 GB/s
  // KV bytes per token (documentation and transfer sizing only).
  uint64_t kv_bytes_per_token = 131'072;
  // KV offload tiers (offload_tier.h): loading a resident run back into HBM. RAM: host to GPU
  // over PCIe 5.0 x16 (~50 GB/s effective); SSD: an NVMe Gen4 read (~7 GB/s) then the same
  // PCIe copy. Per token = kv_bytes_per_token / bandwidth; docs/sim.md cites the figures.
  double tier_ram_fixed_ns = 50'000.0;      // one lookup + the first copy's latency
  double tier_ram_ns_per_token = 2'621.0;   // 128 KiB / 50 GB/s
  double tier_ssd_fixed_ns = 150'000.0;     // + NVMe read latency
  double tier_ssd_ns_per_token = 21'346.0;  // 128 KiB / 7 GB/s + 128 KiB / 50 GB/s
  // Power (docs/sim.md "Power model"): the GPU draws idle_watts with nothing to do, prefill_watts
  // while a step prefills (compute-bound) and decode_watts while it decodes (memory-bound); a
  // mixed step draws the token-share-weighted mix. power_limit_watts is the enforced board limit.
  std::string gpu_name = "NVIDIA H100 80GB HBM3";
  double idle_watts = 75.0;
  double prefill_watts = 650.0;
  double decode_watts = 450.0;
  double power_limit_watts = 700.0;

  // The step time (unscaled) of a step with these totals.
  // prefill_pairs = sum over prefill chunks of chunk * (context_before + chunk / 2).
  Nanos step_time(uint64_t prefill_tokens, double prefill_pairs, uint32_t decode_seqs,
                  uint64_t decode_context_tokens) const;

  // Closed forms used by the calibration benchmark and by tests.
  // TTFT of a lone request on an idle engine: the chunked prefill of
  // uncached = prompt - cached tokens (cached >= 0), one chunk per step.
  Nanos idle_ttft(uint64_t prompt_tokens, uint64_t cached_tokens) const;
  // Inter-token latency of a steady decode batch of batch seqs, each attending
  // over context tokens.
  Nanos decode_itl(uint32_t batch, uint64_t context) const;
  // Time to pull n tokens of KV from a prefill instance.
  Nanos kv_transfer_time(uint64_t tokens) const;
  // Time to load ram_tokens from the RAM tier and ssd_tokens from the SSD tier (0 for none).
  Nanos tier_load_time(uint64_t ram_tokens, uint64_t ssd_tokens) const;
  // Energy (J) over `elapsed` of which prefill_busy / decode_busy were spent in steps (the
  // engine's prefill_ns / decode_ns): idle power all along plus the busy excess.
  double energy_joules(Nanos elapsed, uint64_t prefill_busy_ns, uint64_t decode_busy_ns) const;
};

// Llama-3.1-8B bf16 on one H100 SXM 80GB, vLLM V1 defaults (see docs/sim.md).
NodeModel default_node_model();

}  // namespace cgn::sim
