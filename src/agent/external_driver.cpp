// external: an engine someone else runs at [engine] url (default 127.0.0.1:[engine] port).
// Nothing is spawned; the agent probes, scrapes and proxies to it. LaunchOptions::attach_kind names the
// engine whose health and metrics semantics apply ("vllm", "llamacpp", ...); empty means GET /health == 200
// and no scrape.
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class ExternalDriver final : public EngineDriver {
 public:
  std::string_view name() const override { return "external"; }

  Result<LaunchCommand, DriverError> launch_command(const config::EngineConfig& engine,
                                                    const LaunchOptions& options) const override {
    if (engine.port == 0) {
      return make_error(DriverError::kInvalidConfig,
                        "external: [engine] port must be the running engine's port");
    }
    if (auto d = delegate(options); !d) {
      return d.error();
    }
    return LaunchCommand{};
  }

  HealthSpec health(const LaunchOptions& options) const override {
    auto d = delegate(options);
    return d.ok() && *d != nullptr ? (*d)->health(options) : HealthSpec{};
  }
  std::optional<std::string> metrics_path(const LaunchOptions& options) const override {
    auto d = delegate(options);
    return d.ok() && *d != nullptr ? (*d)->metrics_path(options) : std::nullopt;
  }
  std::optional<routing::EngineKind> metrics_kind(const LaunchOptions& options) const override {
    auto d = delegate(options);
    return d.ok() && *d != nullptr ? (*d)->metrics_kind(options) : std::nullopt;
  }
  bool spawns() const override { return false; }
  bool publishes_kv_events() const override { return true; }

 private:
  static Result<const EngineDriver*, DriverError> delegate(const LaunchOptions& options) {
    if (options.attach_kind.empty()) {
      return static_cast<const EngineDriver*>(nullptr);
    }
    if (options.attach_kind == "external") {
      return make_error(DriverError::kInvalidConfig, "external: attach kind cannot be \"external\"");
    }
    return builtin_drivers().find(options.attach_kind);
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_external_driver() {
  return std::make_unique<ExternalDriver>();
}

}  // namespace cgn::agent
