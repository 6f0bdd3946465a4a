#include "power/daemon_source.h"

#include "power/power_grpc.h"

namespace cgn::power {

namespace {

class DaemonSource final : public Source {
 public:
  DaemonSource(const config::PowerSourceConfig& cfg, std::unique_ptr<PowerClient> client)
      : Source(cfg.name, cfg.kind), client_(std::move(client)), timeout_(cfg.timeout_ms) {}

  SourceResult read() override {
    auto got = client_->read(timeout_);
    if (!got) {
      return make_error(SourceError::kUnavailable, got.error().message);
    }
    std::vector<PowerSample> out;
    out.reserve(got->devices.size());
    for (const DeviceReading& d : got->devices) {
      PowerSample s = sample(d.latest.source + "/" + d.latest.device);
      s.watts = d.latest.watts;
      s.window = d.latest.window;
      s.window_length = d.latest.window_length;
      s.counter_uj = d.energy_uj;
      s.power_limit_watts = d.latest.power_limit_watts;
      s.gpu = d.latest.gpu;
      out.push_back(std::move(s));
    }
    return out;
  }

 private:
  std::unique_ptr<PowerClient> client_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

Result<std::unique_ptr<Source>, SourceError> make_daemon_source(const config::PowerSourceConfig& cfg,
                                                                const config::TlsConfig& tls) {
  if (cfg.target.empty()) {
    return make_error(SourceError::kConfig, "needs `target`");
  }
  auto client = PowerClient::connect(cfg.target, tls);
  if (!client) {
    return make_error(SourceError::kConfig, client.error().message);
  }
  return std::unique_ptr<Source>(std::make_unique<DaemonSource>(cfg, std::move(*client)));
}

}  // namespace cgn::power
