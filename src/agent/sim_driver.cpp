// sim: the project's engine simulator (cgn-engine-sim) in its vLLM flavour: `cgn-engine-sim
// --flavour vllm --model M --host H --port N --served-model-name X [extra args]`. Health and metrics are
// vLLM's. [engine] kind = "sim" in cognitora.toml.
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class SimDriver final : public EngineDriver {
 public:
  std::string_view name() const override { return "sim"; }

  Result<LaunchCommand, DriverError> launch_command(const config::EngineConfig& engine,
                                                    const LaunchOptions& options) const override {
    if (auto st = detail::check_common(engine, name()); !st) {
      return st.error();
    }
    if (options.kv_offload != KvOffload::kNone) {
      return detail::unsupported(name(), "kv_offload");
    }
    LaunchCommand cmd;
    cmd.argv = {"cgn-engine-sim",
                "--flavour",
                "vllm",
                "--model",
                engine.model,
                "--host",
                engine.host,
                "--port",
                std::to_string(engine.port),
                "--served-model-name",
                detail::served_name_or_model(engine)};
    if (options.kv_events) {
      cmd.argv.push_back("--kv-events-config");
      cmd.argv.push_back(detail::kv_events_config_json(options, /*with_enable_key=*/true));
    }
    cmd.argv.insert(cmd.argv.end(), engine.extra_args.begin(), engine.extra_args.end());
    detail::pin_gpus(engine.gpus, cmd.env);
    return cmd;
  }

  bool publishes_kv_events() const override { return true; }

  std::optional<routing::EngineKind> metrics_kind(const LaunchOptions& /*options*/) const override {
    return routing::EngineKind::kVllm;
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_sim_driver() {
  return std::make_unique<SimDriver>();
}

}  // namespace cgn::agent
