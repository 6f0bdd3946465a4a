#include "power/static_source.h"

namespace cgn::power {

namespace {

class StaticSource final : public Source {
 public:
  explicit StaticSource(const config::PowerSourceConfig& cfg)
      : Source(cfg.name, cfg.kind), device_(cfg.device.empty() ? "node" : cfg.device), watts_(cfg.watts) {}

  SourceResult read() override {
    PowerSample s = sample(device_);
    s.watts = watts_;
    return std::vector<PowerSample>{std::move(s)};
  }

 private:
  std::string device_;
  double watts_;
};

}  // namespace

Result<std::unique_ptr<Source>, SourceError> make_static_source(const config::PowerSourceConfig& cfg) {
  return std::unique_ptr<Source>(std::make_unique<StaticSource>(cfg));
}

}  // namespace cgn::power
