// MLX: `mlx_lm.server --model M --host H --port N [extra args]`. GET /health is 200 {"status":"ok"}; there
// is no metrics endpoint, so the node record carries no load figures from the engine. The server
// has no served-name flag: it serves under the model path.
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class MlxDriver final : public EngineDriver {
 public:
  std::string_view name() const override { return "mlx"; }

  Result<LaunchCommand, DriverError> launch_command(const config::EngineConfig& engine,
                                                    const LaunchOptions& options) const override {
    if (auto st = detail::check_common(engine, name()); !st) {
      return st.error();
    }
    if (auto st = detail::require_plain(options, name()); !st) {
      return st.error();
    }
    if (auto st = detail::require_single_tp(engine, name()); !st) {
      return st.error();
    }
    if (!engine.served_name.empty() && engine.served_name != engine.model) {
      return detail::unsupported(name(),
                                 "served_name different from model (mlx_lm.server has no alias flag)");
    }
    LaunchCommand cmd;
    cmd.argv = {"mlx_lm.server",
                "--model",
                engine.model,
                "--host",
                engine.host,
                "--port",
                std::to_string(engine.port)};
    cmd.argv.insert(cmd.argv.end(), engine.extra_args.begin(), engine.extra_args.end());
    detail::pin_gpus(engine.gpus, cmd.env);
    return cmd;
  }

  std::optional<std::string> metrics_path(const LaunchOptions& /*options*/) const override {
    return std::nullopt;
  }
  std::optional<routing::EngineKind> metrics_kind(const LaunchOptions& /*options*/) const override {
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_mlx_driver() {
  return std::make_unique<MlxDriver>();
}

}  // namespace cgn::agent
