// SGLang: `python3 -m sglang.launch_server --model-path M --host H --port N --enable-metrics --tp T
// [--served-model-name X] [--page-size P] [--disaggregation-mode prefill|decode
// --disaggregation-transfer-backend nixl|mooncake] [--enable-hierarchical-cache] [extra args]`.
// Metrics are off without --enable-metrics, so the driver always passes it. SGLang's PD mode
// pairs prefill and decode through bootstrap rooms sent to both at once (docs/design/
// engines.md), not vLLM's P-then-D flow the router speaks: the line is right for SGLang's own router.
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class SglangDriver final : public SpawningDriver {
 public:
  SglangDriver() : SpawningDriver({routing::EngineKind::kSglang}) {}
  std::string_view name() const override { return "sglang"; }

  bool publishes_kv_events() const override { return true; }

 protected:
  Status<DriverError> engine_line(const config::EngineConfig& engine, const LaunchOptions& options,
                                  LaunchCommand& cmd) const override {
    if (options.pd_transfer_backend != "nixl" && options.pd_transfer_backend != "mooncake") {
      return make_error(DriverError::kInvalidConfig,
                        "sglang: pd_transfer_backend must be nixl or mooncake, not \"" +
                            options.pd_transfer_backend + "\"");
    }
    cmd.argv = {"python3", "-m", "sglang.launch_server", "--model-path", engine.model};
    detail::add_host_port(engine, cmd.argv);
    cmd.argv.insert(cmd.argv.end(), {"--enable-metrics", "--tp", std::to_string(engine.tensor_parallel)});
    if (!engine.served_name.empty()) {
      cmd.argv.insert(cmd.argv.end(), {"--served-model-name", engine.served_name});
    }
    if (options.page_size != 0) {
      cmd.argv.insert(cmd.argv.end(), {"--page-size", std::to_string(options.page_size)});
    }
    if (options.role != routing::NodeRole::kBoth) {
      cmd.argv.insert(cmd.argv.end(), {"--disaggregation-mode",
                                       options.role == routing::NodeRole::kPrefill ? "prefill" : "decode",
                                       "--disaggregation-transfer-backend", options.pd_transfer_backend});
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
    detail::add_kv_events(options, /*with_enable_key=*/false, cmd.argv);
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_sglang_driver() {
  return std::make_unique<SglangDriver>();
}

}  // namespace cgn::agent
