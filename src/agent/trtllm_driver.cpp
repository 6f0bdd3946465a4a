// TensorRT-LLM: `trtllm-serve M --host H --port N --tp_size T [extra args]`. Prometheus text is at
// /prometheus/metrics (its /metrics is JSON iteration stats).
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class TrtllmDriver final : public SpawningDriver {
 public:
  TrtllmDriver() : SpawningDriver({.metrics_kind = routing::EngineKind::kTrtLlm, .plain = true}) {}
  std::string_view name() const override { return "trtllm"; }

  std::optional<std::string> metrics_path(const LaunchOptions& /*options*/) const override {
    return std::string("/prometheus/metrics");
  }

 protected:
  Status<DriverError> engine_line(const config::EngineConfig& engine, const LaunchOptions& /*options*/,
                                  LaunchCommand& cmd) const override {
    cmd.argv = {"trtllm-serve", engine.model};
    detail::add_host_port(engine, cmd.argv);
    cmd.argv.insert(cmd.argv.end(), {"--tp_size", std::to_string(engine.tensor_parallel)});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_trtllm_driver() {
  return std::make_unique<TrtllmDriver>();
}

}  // namespace cgn::agent
