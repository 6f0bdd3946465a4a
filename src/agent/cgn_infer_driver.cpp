// cgn-infer (our own engine, not written yet): the launch line only, provisional until the
// engine defines its flags: `cgn-infer --model M --host H --port N --served-model-name X --tp T
// [extra args]`. Health is GET /health; metrics are not scraped until a mapping exists.
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class CgnInferDriver final : public EngineDriver {
 public:
  std::string_view name() const override { return "cgn-infer"; }

  Result<LaunchCommand, DriverError> launch_command(const config::EngineConfig& engine,
                                                    const LaunchOptions& options) const override {
    if (auto st = detail::check_common(engine, name()); !st) {
      return st.error();
    }
    if (auto st = detail::require_plain(options, name()); !st) {
      return st.error();
    }
    LaunchCommand cmd;
    cmd.argv = {"cgn-infer",
                "--model",
                engine.model,
                "--host",
                engine.host,
                "--port",
                std::to_string(engine.port),
                "--served-model-name",
                detail::served_name_or_model(engine),
                "--tp",
                std::to_string(engine.tensor_parallel)};
    cmd.argv.insert(cmd.argv.end(), engine.extra_args.begin(), engine.extra_args.end());
    detail::pin_gpus(engine.gpus, cmd.env);
    return cmd;
  }

  std::optional<routing::EngineKind> metrics_kind(const LaunchOptions& /*options*/) const override {
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_cgn_infer_driver() {
  return std::make_unique<CgnInferDriver>();
}

}  // namespace cgn::agent
