// vLLM: `vllm serve MODEL --host H --port N --served-model-name X --tensor-parallel-size T
// [--kv-transfer-config JSON] [extra args]`. Prefill, decode (and kv_offload = nixl) nodes run the
// NixlConnector with kv_role kv_both, as vLLM's own P/D launch lines do for both sides
// (tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh; docs/design/engines.md): which
// side a request plays is decided per request by its kv_transfer_params, not by kv_role. The
// side-channel host VLLM_NIXL_SIDE_CHANNEL_HOST is always exported (127.0.0.1 unless configured);
// the port VLLM_NIXL_SIDE_CHANNEL_PORT when configured.
#include <fmt/format.h>

#include "agent/driver.h"

namespace cgn::agent {
namespace {

class VllmDriver final : public EngineDriver {
 public:
  std::string_view name() const override { return "vllm"; }

  Result<LaunchCommand, DriverError> launch_command(const config::EngineConfig& engine,
                                                    const LaunchOptions& options) const override {
    if (auto st = detail::check_common(engine, name()); !st) {
      return st.error();
    }
    LaunchCommand cmd;
    cmd.argv = {"vllm",
                "serve",
                engine.model,
                "--host",
                engine.host,
                "--port",
                std::to_string(engine.port),
                "--served-model-name",
                detail::served_name_or_model(engine),
                "--tensor-parallel-size",
                std::to_string(engine.tensor_parallel)};
    const bool disaggregated = options.role != routing::NodeRole::kBoth;
    std::string kv_transfer;
    switch (options.kv_offload) {
      case KvOffload::kNone:
      case KvOffload::kNixl:
        if (disaggregated || options.kv_offload == KvOffload::kNixl) {
          if (options.pd_transfer_backend != "nixl") {
            return detail::unsupported(name(), fmt::format("pd_transfer_backend = \"{}\" (the router speaks "
                                                           "vLLM's NixlConnector flow; use nixl)",
                                                           options.pd_transfer_backend));
          }
          kv_transfer = R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})";
          // Always explicit: the side channel is the one engine socket other nodes must reach, so it
          // binds loopback (vLLM's own default is "localhost") unless configured to this node's
          // address (docs/security.md).
          cmd.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] =
              options.nixl_side_channel_host.empty() ? "127.0.0.1" : options.nixl_side_channel_host;
          if (options.nixl_side_channel_port != 0) {
            cmd.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = std::to_string(options.nixl_side_channel_port);
          }
        }
        break;
      case KvOffload::kLmcache:
        if (disaggregated) {
          return detail::unsupported(name(),
                                     "kv_offload = \"lmcache\" with a prefill or decode role "
                                     "(needs a MultiConnector line this driver does not build)");
        }
        kv_transfer = R"({"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"})";
        break;
      case KvOffload::kHicache:
        return detail::unsupported(name(), "kv_offload = \"hicache\" (an SGLang feature)");
      case KvOffload::kKvbm:
        return detail::unsupported(name(), "kv_offload = \"kvbm\" (Dynamo's connector; not wired yet)");
      case KvOffload::kCgn:
        return detail::unsupported(name(),
                                   "kv_offload = \"cgn\" (the cgn-kvcached connector does not exist yet)");
    }
    if (!kv_transfer.empty()) {
      cmd.argv.push_back("--kv-transfer-config");
      cmd.argv.push_back(kv_transfer);
    }
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

std::unique_ptr<EngineDriver> make_vllm_driver() {
  return std::make_unique<VllmDriver>();
}

}  // namespace cgn::agent
