#include "power/dcgm_exporter_source.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "power/http_fetch.h"
#include "routing/prometheus.h"

namespace cgn::power {

namespace {

constexpr std::string_view kPower = "DCGM_FI_DEV_POWER_USAGE";
constexpr std::string_view kEnergy = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION";
constexpr std::string_view kLimit = "DCGM_FI_DEV_POWER_MGMT_LIMIT";
constexpr std::string_view kFbFree = "DCGM_FI_DEV_FB_FREE";
constexpr std::string_view kFbUsed = "DCGM_FI_DEV_FB_USED";
constexpr std::string_view kFbReserved = "DCGM_FI_DEV_FB_RESERVED";
constexpr double kMaxWatts = 1e6;         // above any device: a garbage value, not a reading
constexpr double kMaxMillijoules = 1e18;  // µJ must fit uint64_t

struct Gpu {
  PowerSample s;
  std::optional<double> fb_mib;
};

std::string device_key(const routing::PromSample& p) {
  if (const std::string* uuid = p.label("UUID"); uuid && !uuid->empty()) {
    return *uuid;
  }
  if (const std::string* idx = p.label("gpu"); idx && !idx->empty()) {
    return *idx;
  }
  return {};
}

bool usable(double v, double max) {
  return std::isfinite(v) && v >= 0 && v <= max;
}

void apply_series(Gpu& g, const routing::PromSample& p) {
  if (p.name == kPower && usable(p.value, kMaxWatts)) {
    g.s.watts = p.value;
  } else if (p.name == kEnergy && usable(p.value, kMaxMillijoules)) {
    g.s.counter_uj = mj_to_uj(static_cast<uint64_t>(std::llround(p.value)));
  } else if (p.name == kLimit && usable(p.value, kMaxWatts) && p.value > 0) {
    g.s.power_limit_watts = p.value;
  } else if ((p.name == kFbFree || p.name == kFbUsed || p.name == kFbReserved) && usable(p.value, 1e12)) {
    g.fb_mib = g.fb_mib.value_or(0) + p.value;
  }
}

}  // namespace

Result<std::vector<PowerSample>, SourceError> parse_dcgm_page(std::string_view page,
                                                              const PowerSample& proto) {
  routing::PromLimits limits;
  limits.max_bytes = size_t{4} << 20;
  auto doc = routing::parse_prometheus_text(page, limits);
  if (!doc.ok()) {
    return make_error(SourceError::kBadData, fmt::format("dcgm-exporter page: {}", doc.error().message));
  }
  std::map<std::string, Gpu> gpus;
  for (const auto& p : doc.value().samples) {
    if (!p.name.starts_with("DCGM_FI_DEV_")) {
      continue;
    }
    std::string key = device_key(p);
    if (key.empty()) {
      continue;
    }
    auto [it, fresh] = gpus.try_emplace(key);
    Gpu& g = it->second;
    if (fresh) {
      g.s = proto;
      g.s.device = key;
      g.s.window = Window::kAverage;
      g.s.window_length = std::chrono::milliseconds(1000);
      GpuInfo info;
      info.uuid = p.label("UUID") ? *p.label("UUID") : "";
      info.name = p.label("modelName") ? *p.label("modelName") : "";
      g.s.gpu = info;
    }
    apply_series(g, p);
  }
  std::vector<PowerSample> out;
  for (auto& [_, g] : gpus) {
    if (g.fb_mib) {
      g.s.gpu->memory_bytes = static_cast<uint64_t>(*g.fb_mib) << 20;
    }
    if (g.s.watts || g.s.counter_uj) {
      out.push_back(std::move(g.s));
    }
  }
  return out;
}

namespace {

class DcgmExporterSource final : public Source {
 public:
  DcgmExporterSource(const config::PowerSourceConfig& cfg, HttpTarget target)
      : Source(cfg.name, cfg.kind),
        target_(std::move(target)),
        http_(std::chrono::milliseconds(cfg.timeout_ms)) {
    if (target_.path.empty()) {
      target_.path = "/metrics";
    }
  }

  SourceResult read() override {
    http::Request req{http::Verb::get, target_.path, 11};
    req.set(http::Field::accept, "text/plain");
    auto got = http_.send(target_.upstream, std::move(req));
    if (!got.ok()) {
      return got.error();
    }
    if (got.value().result_int() != 200) {
      return make_error(SourceError::kUnavailable,
                        fmt::format("GET {} answered {}", target_.path, got.value().result_int()));
    }
    return parse_dcgm_page(got.value().body(), sample(""));
  }

 private:
  HttpTarget target_;
  BlockingHttp http_;
};

}  // namespace

Result<std::unique_ptr<Source>, SourceError> make_dcgm_exporter_source(const config::PowerSourceConfig& cfg) {
  auto target = parse_http_url(cfg.url);
  if (!target.ok()) {
    return target.error();
  }
  return std::unique_ptr<Source>(std::make_unique<DcgmExporterSource>(cfg, std::move(target.value())));
}

}  // namespace cgn::power
