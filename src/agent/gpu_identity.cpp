#include "agent/gpu_identity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/json_bounds.h"
#include "core/log.h"
#include "core/subprocess.h"
#include "core/text.h"

namespace cgn::agent {

std::string_view to_string(GpuError e) {
  switch (e) {
    case GpuError::kNoTool:
      return "no_tool";
    case GpuError::kToolFailed:
      return "tool_failed";
    case GpuError::kParse:
      return "parse";
  }
  return "unknown";
}

namespace {

std::string_view trim(std::string_view s) {
  return text::trim(s, " \t\r");
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
}

// "memory.total [MiB]" -> "memory.total".
std::string_view column_name(std::string_view header_field) {
  header_field = trim(header_field);
  if (auto b = header_field.find(" ["); b != std::string_view::npos) {
    header_field = header_field.substr(0, b);
  }
  return header_field;
}

// nvidia-smi's "[N/A]", "[Not Supported]", "[Insufficient Permissions]", ... and "N/A".
bool unknown_value(std::string_view v) {
  return v.empty() || v.front() == '[' || v == "N/A";
}

// Leading unsigned integer of "143771 MiB" / "143771".
std::optional<uint64_t> leading_uint(std::string_view v) {
  uint64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p == v.data()) {
    return std::nullopt;
  }
  std::string_view rest = trim(std::string_view(p, static_cast<size_t>(v.data() + v.size() - p)));
  if (!rest.empty() && rest != "MiB") {
    return std::nullopt;
  }
  return out;
}

Error<GpuError> parse_error(std::string message) {
  return make_error(GpuError::kParse, std::move(message));
}

std::string normalize_vendor(std::string_view raw) {
  std::string l = lower(trim(raw));
  if (l.find("advanced micro devices") != std::string::npos || l.find("amd") != std::string::npos) {
    return "amd";
  }
  if (l.find("haiguang") != std::string::npos || l.find("hygon") != std::string::npos) {
    return "hygon";
  }
  return l;
}

// A number given as a JSON string ("17163091968", "65520") or a JSON number.
std::optional<double> json_number(const nlohmann::json& v) {
  if (v.is_number()) {
    double d = v.get<double>();
    return std::isfinite(d) && d >= 0 ? std::optional<double>(d) : std::nullopt;
  }
  if (!v.is_string()) {
    return std::nullopt;
  }
  const auto& s = v.get_ref<const std::string&>();
  if (s.empty() || s.size() > 32) {
    return std::nullopt;
  }
  double d = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(d) || d < 0 || d > 1e18) {
    return std::nullopt;
  }
  return d;
}

}  // namespace

Result<std::vector<GpuDevice>, GpuError> parse_nvidia_smi_csv(
    std::string_view text, const std::vector<std::string>& noheader_columns, const GpuParseLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return parse_error(
        fmt::format("nvidia-smi output is {} bytes (limit {})", text.size(), limits.max_bytes));
  }
  std::vector<std::string_view> lines;
  for (auto line : split(text, '\n')) {
    if (!trim(line).empty()) {
      lines.push_back(line);
    }
  }
  if (lines.empty()) {
    return make_error(GpuError::kToolFailed, "nvidia-smi listed no device");
  }
  std::vector<std::string> columns;
  size_t first_row = 0;
  {
    auto fields = split(lines[0], ',');
    if (fields.size() > limits.max_fields) {
      return parse_error(
          fmt::format("nvidia-smi output has {} columns (limit {})", fields.size(), limits.max_fields));
    }
    bool header = std::any_of(fields.begin(), fields.end(), [](auto f) { return column_name(f) == "name"; });
    if (header) {
      for (auto f : fields) {
        columns.emplace_back(column_name(f));
      }
      first_row = 1;
    } else {
      columns = noheader_columns;
    }
  }
  auto col = [&](std::string_view name) -> std::optional<size_t> {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (columns[i] == name) {
        return i;
      }
    }
    return std::nullopt;
  };
  const auto name_col = col("name");
  if (!name_col) {
    return parse_error("nvidia-smi output has no name column");
  }
  const auto index_col = col("index");
  const auto mem_col = col("memory.total");
  if (lines.size() - first_row > limits.max_devices) {
    return parse_error(
        fmt::format("nvidia-smi lists {} devices (limit {})", lines.size() - first_row, limits.max_devices));
  }
  std::vector<GpuDevice> devices;
  for (size_t r = first_row; r < lines.size(); ++r) {
    auto fields = split(lines[r], ',');
    if (fields.size() != columns.size()) {
      return parse_error(
          fmt::format("nvidia-smi line {} has {} fields, expected {}", r + 1, fields.size(), columns.size()));
    }
    GpuDevice d;
    d.vendor = "nvidia";
    d.index = static_cast<uint32_t>(devices.size());
    std::string_view name = trim(fields[*name_col]);
    if (!unknown_value(name)) {
      d.name = std::string(name);
    }
    if (index_col) {
      auto idx = leading_uint(trim(fields[*index_col]));
      if (!idx || *idx > 0xFFFF) {
        return parse_error(
            fmt::format("nvidia-smi line {}: bad index '{}'", r + 1, trim(fields[*index_col])));
      }
      d.index = static_cast<uint32_t>(*idx);
    }
    if (mem_col) {
      std::string_view v = trim(fields[*mem_col]);
      if (!unknown_value(v)) {
        auto mb = leading_uint(v);
        if (!mb) {
          return parse_error(fmt::format("nvidia-smi line {}: bad memory.total '{}'", r + 1, v));
        }
        d.vram_total_mb = *mb;
      }
    }
    devices.push_back(std::move(d));
  }
  if (devices.empty()) {
    return make_error(GpuError::kToolFailed, "nvidia-smi listed no device");
  }
  return devices;
}

Result<std::vector<GpuDevice>, GpuError> parse_rocm_smi_json(std::string_view text,
                                                             const GpuParseLimits& limits) {
  if (!json_within_bounds(text, limits.max_bytes, limits.max_depth)) {
    return parse_error("rocm-smi output is too large or too deeply nested");
  }
  auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return parse_error("rocm-smi output is not a JSON object");
  }
  std::vector<GpuDevice> devices;
  for (const auto& [key, value] : doc.items()) {
    if (key.size() < 5 || key.size() > 13 || key.compare(0, 4, "card") != 0 ||
        !std::all_of(key.begin() + 4, key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;  // "system" and other non-device sections
    }
    if (!value.is_object()) {
      return parse_error(fmt::format("rocm-smi: {} is not an object", key));
    }
    if (devices.size() >= limits.max_devices) {
      return parse_error(fmt::format("rocm-smi lists more than {} devices", limits.max_devices));
    }
    GpuDevice d;
    d.index = static_cast<uint32_t>(std::strtoul(key.c_str() + 4, nullptr, 10));
    std::string series;
    std::string device_name;
    for (const auto& [k, v] : value.items()) {
      const std::string lk = lower(k);
      if (lk == "card series" && v.is_string()) {
        series = v.get<std::string>();
      } else if (lk == "device name" && v.is_string()) {
        device_name = v.get<std::string>();
      } else if (lk == "card vendor" && v.is_string()) {
        d.vendor = normalize_vendor(v.get<std::string>());
      } else if (lk == "vram total memory (b)") {
        auto n = json_number(v);
        if (!n) {
          return parse_error(fmt::format("rocm-smi: {}: bad '{}'", key, k));
        }
        d.vram_total_mb = static_cast<uint64_t>(*n / (1024.0 * 1024.0));
      } else if (lk == "vram total memory (mib)") {
        auto n = json_number(v);
        if (!n) {
          return parse_error(fmt::format("rocm-smi: {}: bad '{}'", key, k));
        }
        d.vram_total_mb = static_cast<uint64_t>(*n);
      }
    }
    d.name = !series.empty() && series != "N/A" ? series : device_name;
    devices.push_back(std::move(d));
  }
  if (devices.empty()) {
    return make_error(GpuError::kToolFailed, "rocm-smi listed no device");
  }
  std::sort(devices.begin(), devices.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  return devices;
}

std::optional<cluster::GpuIdentity> summarize_gpus(const std::vector<GpuDevice>& devices,
                                                   const std::vector<uint32_t>& selected) {
  std::optional<cluster::GpuIdentity> out;
  for (const auto& d : devices) {
    if (!selected.empty() && std::find(selected.begin(), selected.end(), d.index) == selected.end()) {
      continue;
    }
    if (!out) {
      out = cluster::GpuIdentity{d.name, d.vendor, d.vram_total_mb, 0};
    } else if (d.vram_total_mb != 0 && (out->vram_total_mb == 0 || d.vram_total_mb < out->vram_total_mb)) {
      out->vram_total_mb = d.vram_total_mb;
    }
    ++out->count;
  }
  return out;
}

Result<cluster::GpuIdentity, GpuError> probe_gpu_identity(const GpuProbeOptions& options) {
  static auto logger = log::get("agent");
  const std::string path = options.path_env.empty() ? current_path_env() : options.path_env;
  constexpr size_t kMaxOutput = 1 << 20;
  struct Tool {
    std::vector<std::string> argv;
    Result<std::vector<GpuDevice>, GpuError> (*parse)(std::string_view);
  };
  const Tool tools[] = {
      {{"nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv"},
       [](std::string_view t) { return parse_nvidia_smi_csv(t); }},
      {{"rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json"},
       [](std::string_view t) { return parse_rocm_smi_json(t); }},
  };
  std::optional<Error<GpuError>> last;
  for (const auto& tool : tools) {
    auto run = run_capture(tool.argv, options.timeout, kMaxOutput, path);
    if (!run.ok()) {
      if (run.error().code != RunError::kNotFound) {
        last = make_error(GpuError::kToolFailed, fmt::format("{}: {}", tool.argv[0], run.error().message));
        CGN_LOG_WARN(logger, "gpu probe failed", log::kv("error", last->message));
      }
      continue;
    }
    if (run->exit_code != 0) {
      last = make_error(GpuError::kToolFailed,
                        fmt::format("{} exited with status {}", tool.argv[0], run->exit_code));
      CGN_LOG_WARN(logger, "gpu probe failed", log::kv("error", last->message));
      continue;
    }
    if (run->truncated) {
      last = make_error(GpuError::kParse,
                        fmt::format("{} printed more than {} bytes", tool.argv[0], kMaxOutput));
      continue;
    }
    auto devices = tool.parse(run->output);
    if (!devices.ok()) {
      last = devices.error();
      CGN_LOG_WARN(logger, "gpu probe failed", log::kv("tool", tool.argv[0]),
                   log::kv("error", last->message));
      continue;
    }
    auto identity = summarize_gpus(*devices, options.gpus);
    if (!identity) {
      last = make_error(GpuError::kToolFailed,
                        fmt::format("{} lists no device with the configured indices", tool.argv[0]));
      continue;
    }
    return *identity;
  }
  if (last) {
    return *last;
  }
  return make_error(GpuError::kNoTool, "neither nvidia-smi nor rocm-smi is on PATH");
}

}  // namespace cgn::agent
