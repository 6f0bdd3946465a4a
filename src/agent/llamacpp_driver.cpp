// llama.cpp: `llama-server -m FILE --host H --port N --parallel K --metrics [--alias X] [extra args]`.
// /health answers 503 {"error":{..."message":"Loading model"...}} while loading, then 200.
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class LlamacppDriver final : public EngineDriver {
 public:
  std::string_view name() const override { return "llamacpp"; }

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
    if (options.parallel_slots == 0) {
      return make_error(DriverError::kInvalidConfig,
                        "llamacpp: parallel slots (--parallel) must be at least 1");
    }
    LaunchCommand cmd;
    cmd.argv = {"llama-server",
                "-m",
                engine.model,
                "--host",
                engine.host,
                "--port",
                std::to_string(engine.port),
                "--parallel",
                std::to_string(options.parallel_slots),
                "--metrics"};
    if (!engine.served_name.empty()) {
      cmd.argv.push_back("--alias");
      cmd.argv.push_back(engine.served_name);
    }
    cmd.argv.insert(cmd.argv.end(), engine.extra_args.begin(), engine.extra_args.end());
    detail::pin_gpus(engine.gpus, cmd.env);
    return cmd;
  }

  HealthSpec health(const LaunchOptions& /*options*/) const override {
    HealthSpec spec;
    spec.loading_status = 503;
    spec.loading_marker = "Loading model";
    return spec;
  }
  std::optional<routing::EngineKind> metrics_kind(const LaunchOptions& /*options*/) const override {
    return routing::EngineKind::kLlamaCpp;
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_llamacpp_driver() {
  return std::make_unique<LlamacppDriver>();
}

}  // namespace cgn::agent
