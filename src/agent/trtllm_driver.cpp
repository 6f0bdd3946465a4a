// TensorRT-LLM: `trtllm-serve M --host H --port N --tp_size T [extra args]`. Prometheus text is at
// /prometheus/metrics (its /metrics is JSON iteration stats).
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class TrtllmDriver final : public EngineDriver {
 public:
  std::string_view name() const override { return "trtllm"; }

  Result<LaunchCommand, DriverError> launch_command(const config::EngineConfig& engine,
                                                    const LaunchOptions& options) const override {
    if (auto st = detail::check_common(engine, name()); !st) {
      return st.error();
    }
    if (auto st = detail::require_plain(options, name()); !st) {
      return st.error();
    }
    LaunchCommand cmd;
    cmd.argv = {"trtllm-serve", engine.model,
                "--host",       engine.host,
                "--port",       std::to_string(engine.port),
                "--tp_size",    std::to_string(engine.tensor_parallel)};
    cmd.argv.insert(cmd.argv.end(), engine.extra_args.begin(), engine.extra_args.end());
    detail::pin_gpus(engine.gpus, cmd.env);
    return cmd;
  }

  std::optional<std::string> metrics_path(const LaunchOptions& /*options*/) const override {
    return std::string("/prometheus/metrics");
  }
  std::optional<routing::EngineKind> metrics_kind(const LaunchOptions& /*options*/) const override {
    return routing::EngineKind::kTrtLlm;
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_trtllm_driver() {
  return std::make_unique<TrtllmDriver>();
}

}  // namespace cgn::agent
