// MLX: `mlx_lm.server --model M --host H --port N [extra args]`. GET /health is 200 {"status":"ok"}; there
// is no metrics endpoint, so the node record carries no load figures from the engine. The server
// has no served-name flag: it serves under the model path.
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class MlxDriver final : public SpawningDriver {
 public:
  MlxDriver()
      : SpawningDriver({.metrics_kind = std::nullopt,
                        .no_pd_reason = "mlx_lm.server has no prefill/decode split",
                        .no_offload_reason = "mlx_lm.server has no KV connector interface",
                        .single_tp = true}) {}
  std::string_view name() const override { return "mlx"; }

  std::optional<std::string> metrics_path(const LaunchOptions& /*options*/) const override {
    return std::nullopt;
  }

 protected:
  Status<DriverError> engine_line(const config::EngineConfig& engine, const LaunchOptions& /*options*/,
                                  LaunchCommand& cmd) const override {
    if (!engine.served_name.empty() && engine.served_name != engine.model) {
      return detail::unsupported(name(),
                                 "served_name different from model (mlx_lm.server has no alias flag)");
    }
    cmd.argv = {"mlx_lm.server", "--model", engine.model};
    detail::add_host_port(engine, cmd.argv);
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_mlx_driver() {
  return std::make_unique<MlxDriver>();
}

}  // namespace cgn::agent
