// GPU identity from the vendor tools: nvidia-smi --query-gpu CSV and rocm-smi --json (AMD and the
// Hygon DCU variant). Absent when no tool is on PATH or the tool fails: an identity is never
// invented. Parsers are pure and bounded; the probe runs the tool with a timeout. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/node_record.h"
#include "core/result.h"
#include "routing/node_state.h"

namespace cgn::agent {

enum class GpuError : uint8_t {
  kNoTool,      // neither nvidia-smi nor rocm-smi is on PATH
  kToolFailed,  // the tool ran but failed, timed out, or listed no device
  kParse,       // the tool's output is not what the parser understands
};

std::string_view to_string(GpuError e);

// One device as a tool lists it. vram_total_mb is 0 when the tool does not report it.
struct GpuDevice {
  uint32_t index = 0;
  std::string name;
  std::string vendor;  // "nvidia", "amd", "hygon", or the tool's vendor string lower-cased
  uint64_t vram_total_mb = 0;
};

struct GpuParseLimits {
  size_t max_bytes = 1 << 20;
  size_t max_devices = 256;
  size_t max_fields = 1024;  // CSV columns
  size_t max_depth = 16;     // JSON nesting
};

// The columns the probe asks nvidia-smi for, and those assumed for output without a header.
inline const std::vector<std::string> kNvidiaProbeColumns = {"index", "name", "memory.total"};

// `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`. With a header (detected by a
// first line naming the "name" column), columns are found by name and units ("143771 MiB",
// "[MiB]" in the header) are stripped; without one, the columns are `noheader_columns`.
// "[N/A]" and friends mean unknown. Needs at least the name column.
Result<std::vector<GpuDevice>, GpuError> parse_nvidia_smi_csv(
    std::string_view text, const std::vector<std::string>& noheader_columns = kNvidiaProbeColumns,
    const GpuParseLimits& limits = {});

// `rocm-smi ... --json`: one "cardN" object per device. Name from "Card Series" (else "Device
// Name"), vendor from "Card Vendor", VRAM from "VRAM Total Memory (B)" or the Hygon variant
// "vram Total Memory (MiB)" (keys matched case-insensitively). Other top-level keys are ignored.
Result<std::vector<GpuDevice>, GpuError> parse_rocm_smi_json(std::string_view text,
                                                             const GpuParseLimits& limits = {});

// The identity over the devices whose index is in `selected` (all when empty); nullopt when no
// device matches.
std::optional<cluster::GpuIdentity> summarize_gpus(const std::vector<GpuDevice>& devices,
                                                   const std::vector<uint32_t>& selected);

struct GpuProbeOptions {
  std::string path_env;  // where to look for the tools; empty: the agent's PATH
  std::chrono::milliseconds timeout{5000};
  std::vector<uint32_t> gpus;  // [engine] gpus; empty: every device
};

// Runs nvidia-smi, then rocm-smi when nvidia-smi is absent or gives nothing. The error says why
// there is no identity (the caller leaves the record's GPU fields absent).
Result<cluster::GpuIdentity, GpuError> probe_gpu_identity(const GpuProbeOptions& options = {});

}  // namespace cgn::agent
