// Which GPU-tool parser a gpu_identity fuzz input goes to: its first byte selects, the rest is
// the tool's output. The corpus seeds (tests/fuzz/corpus/gpu_identity/) start with an explicit
// 'n' (nvidia-smi CSV, files nv_*) or 'r' (rocm-smi JSON, files rocm_*); any other byte goes by
// its lowest bit, so mutated inputs still reach both parsers.
#pragma once

#include <cstdint>

namespace cgn::agent {

enum class GpuToolParser { kNvidiaSmiCsv, kRocmSmiJson };

inline GpuToolParser gpu_fuzz_parser(uint8_t selector) {
  if (selector == 'n') {
    return GpuToolParser::kNvidiaSmiCsv;
  }
  if (selector == 'r') {
    return GpuToolParser::kRocmSmiJson;
  }
  return selector % 2 == 0 ? GpuToolParser::kNvidiaSmiCsv : GpuToolParser::kRocmSmiJson;
}

}  // namespace cgn::agent
