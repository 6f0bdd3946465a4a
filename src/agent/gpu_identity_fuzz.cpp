// Fuzz target for the GPU tool parsers: the first byte picks nvidia-smi CSV or rocm-smi JSON
// (gpu_identity_fuzz.h).
#include "agent/gpu_identity_fuzz.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/gpu_identity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (cgn::agent::gpu_fuzz_parser(data[0]) == cgn::agent::GpuToolParser::kNvidiaSmiCsv) {
    auto r = cgn::agent::parse_nvidia_smi_csv(text);
    if (r.ok()) {
      (void)cgn::agent::summarize_gpus(*r, {0, 1});
    }
  } else {
    auto r = cgn::agent::parse_rocm_smi_json(text);
    if (r.ok()) {
      (void)cgn::agent::summarize_gpus(*r, {});
    }
  }
  return 0;
}
