// SGLang: `python3 -m sglang.launch_server --model-path M --host H --port N --enable-metrics --tp T
// [--served-model-name X] [--page-size P] [--disaggregation-mode prefill|decode
// --disaggregation-transfer-backend nixl|mooncake] [--enable-hierarchical-cache] [extra args]`.
// Metrics are off without --enable-metrics, so the driver always passes it. SGLang's PD mode
// pairs prefill and decode through bootstrap rooms sent to both at once (docs/design/
// engines.md), not vLLM's P-then-D flow the router speaks: the line is right for SGLang's own router.
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class SglangDriver final : public EngineDriver {
 public:
  std::string_view name() const override { return "sglang"; }

  Result<LaunchCommand, DriverError> launch_command(const config::EngineConfig& engine,
                                                    const LaunchOptions& options) const override {
    if (auto st = detail::check_common(engine, name()); !st) {
      return st.error();
    }
    if (options.pd_transfer_backend != "nixl" && options.pd_transfer_backend != "mooncake") {
      return make_error(DriverError::kInvalidConfig,
                        "sglang: pd_transfer_backend must be nixl or mooncake, not \"" +
                            options.pd_transfer_backend + "\"");
    }
    LaunchCommand cmd;
    cmd.argv = {"python3",          "-m",         "sglang.launch_server",
                "--model-path",     engine.model, "--host",
                engine.host,        "--port",     std::to_string(engine.port),
                "--enable-metrics", "--tp",       std::to_string(engine.tensor_parallel)};
    if (!engine.served_name.empty()) {
      cmd.argv.push_back("--served-model-name");
      cmd.argv.push_back(engine.served_name);
    }
    if (options.page_size != 0) {
      cmd.argv.push_back("--page-size");
      cmd.argv.push_back(std::to_string(options.page_size));
    }
    if (options.role != routing::NodeRole::kBoth) {
      cmd.argv.push_back("--disaggregation-mode");
      cmd.argv.push_back(options.role == routing::NodeRole::kPrefill ? "prefill" : "decode");
      cmd.argv.push_back("--disaggregation-transfer-backend");
      cmd.argv.push_back(options.pd_transfer_backend);
    }
    switch (options.kv_offload) {
      case KvOffload::kNone:
        break;
      case KvOffload::kHicache:
        cmd.argv.push_back("--enable-hierarchical-cache");
        break;
      default:
        return detail::unsupported(name(),
                                   "kv_offload = \"" + std::string(to_string(options.kv_offload)) + "\"");
    }
    if (options.kv_events) {
      cmd.argv.push_back("--kv-events-config");
      cmd.argv.push_back(detail::kv_events_config_json(options, /*with_enable_key=*/false));
    }
    cmd.argv.insert(cmd.argv.end(), engine.extra_args.begin(), engine.extra_args.end());
    detail::pin_gpus(engine.gpus, cmd.env);
    return cmd;
  }

  bool publishes_kv_events() const override { return true; }

  std::optional<routing::EngineKind> metrics_kind(const LaunchOptions& /*options*/) const override {
    return routing::EngineKind::kSglang;
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_sglang_driver() {
  return std::make_unique<SglangDriver>();
}

}  // namespace cgn::agent
