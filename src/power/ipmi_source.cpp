#include "power/ipmi_source.h"

#include <fmt/format.h>

#include <charconv>

#include "core/subprocess.h"
#include "core/text.h"

namespace cgn::power {

namespace {

constexpr size_t kMaxOutput = 64 << 10;

std::string_view trim(std::string_view s) {
  return text::trim(s, " \t\r");
}

// "     412 Watts" or "00000001 Seconds." -> 412 / 1.
std::optional<uint32_t> leading_number(std::string_view v, std::string_view unit) {
  v = trim(v);
  uint32_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || p == v.data()) {
    return std::nullopt;
  }
  std::string_view rest = trim(std::string_view(p, static_cast<size_t>(v.data() + v.size() - p)));
  if (!rest.starts_with(unit)) {
    return std::nullopt;
  }
  return n;
}

}  // namespace

Result<DcmiReading, SourceError> parse_dcmi_power_reading(std::string_view text) {
  if (text.size() > kMaxOutput) {
    return make_error(SourceError::kBadData, "ipmitool output is over 64 KiB");
  }
  std::optional<uint32_t> instant;
  DcmiReading r;
  bool deactivated = false;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      continue;
    }
    std::string_view key = trim(line.substr(0, colon));
    std::string_view value = line.substr(colon + 1);
    if (key == "Instantaneous power reading") {
      instant = leading_number(value, "Watts");
    } else if (key == "Average power reading over sample period") {
      r.average_watts = leading_number(value, "Watts");
    } else if (key == "Sampling period") {
      r.sampling_period_s = leading_number(value, "Seconds");
    } else if (key == "Power reading state is") {
      deactivated = trim(value) == "deactivated";
    }
  }
  if (deactivated) {
    return make_error(SourceError::kBadData, "the BMC's power reading is deactivated");
  }
  if (!instant) {
    return make_error(SourceError::kBadData, "no \"Instantaneous power reading: N Watts\" line");
  }
  r.instant_watts = *instant;
  return r;
}

namespace {

class IpmiSource final : public Source {
 public:
  explicit IpmiSource(const config::PowerSourceConfig& cfg)
      : Source(cfg.name, cfg.kind),
        tool_(cfg.path.empty() ? "ipmitool" : cfg.path),
        device_(cfg.device.empty() ? "chassis" : cfg.device),
        timeout_(cfg.timeout_ms) {}

  SourceResult read() override {
    auto run = run_capture({tool_, "dcmi", "power", "reading"}, timeout_, kMaxOutput + 1, current_path_env());
    if (!run.ok()) {
      SourceError code =
          run.error().code == RunError::kNotFound ? SourceError::kUnsupported : SourceError::kUnavailable;
      return make_error(code, fmt::format("{} dcmi power reading: {} ({})", tool_,
                                          to_string(run.error().code), run.error().message));
    }
    if (run.value().exit_code != 0) {
      return make_error(SourceError::kUnavailable,
                        fmt::format("{} dcmi power reading exited {}", tool_, run.value().exit_code));
    }
    auto got = parse_dcmi_power_reading(run.value().output);
    if (!got.ok()) {
      return got.error();
    }
    PowerSample s = sample(device_);
    s.watts = got.value().instant_watts;
    return std::vector<PowerSample>{std::move(s)};
  }

 private:
  std::string tool_;
  std::string device_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

Result<std::unique_ptr<Source>, SourceError> make_ipmi_source(const config::PowerSourceConfig& cfg) {
  return std::unique_ptr<Source>(std::make_unique<IpmiSource>(cfg));
}

}  // namespace cgn::power
