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

class VllmDriver final : public SpawningDriver {
 public:
  VllmDriver() : SpawningDriver({routing::EngineKind::kVllm}) {}
  std::string_view name() const override { return "vllm"; }

  bool publishes_kv_events() const override { return true; }

 protected:
  Status<DriverError> engine_line(const config::EngineConfig& engine, const LaunchOptions& options,
                                  LaunchCommand& cmd) const override {
    cmd.argv = {"vllm", "serve", engine.model};
    detail::add_host_port(engine, cmd.argv);
    cmd.argv.insert(cmd.argv.end(), {"--served-model-name", detail::served_name_or_model(engine),
                                     "--tensor-parallel-size", std::to_string(engine.tensor_parallel)});
    auto kv_transfer = kv_transfer_config(options, cmd.env);
    if (!kv_transfer) {
      return kv_transfer.error();
    }
    if (!kv_transfer->empty()) {
      cmd.argv.push_back("--kv-transfer-config");
      cmd.argv.push_back(*kv_transfer);
    }
    detail::add_kv_events(options, /*with_enable_key=*/true, cmd.argv);
    return Ok{};
  }

 private:
  // --kv-transfer-config for the role and kv_offload (empty: none), and the NIXL side channel's
  // variables where the NixlConnector runs.
  Result<std::string, DriverError> kv_transfer_config(const LaunchOptions& options,
                                                      std::map<std::string, std::string>& env) const {
    const bool disaggregated = options.role != routing::NodeRole::kBoth;
    switch (options.kv_offload) {
      case KvOffload::kNone:
      case KvOffload::kNixl:
        if (!disaggregated && options.kv_offload != KvOffload::kNixl) {
          return std::string();
        }
        if (options.pd_transfer_backend != "nixl") {
          return detail::unsupported(name(), fmt::format("pd_transfer_backend = \"{}\" (the router speaks "
                                                         "vLLM's NixlConnector flow; use nixl)",
                                                         options.pd_transfer_backend));
        }
        // Always explicit: the side channel is the one engine socket other nodes must reach, so it
        // binds loopback (vLLM's own default is "localhost") unless configured to this node's
        // address (docs/security.md).
        env["VLLM_NIXL_SIDE_CHANNEL_HOST"] =
            options.nixl_side_channel_host.empty() ? "127.0.0.1" : options.nixl_side_channel_host;
        if (options.nixl_side_channel_port != 0) {
          env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = std::to_string(options.nixl_side_channel_port);
        }
        return std::string(R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})");
      case KvOffload::kLmcache:
        if (disaggregated) {
          return detail::unsupported(name(),
                                     "kv_offload = \"lmcache\" with a prefill or decode role "
                                     "(needs a MultiConnector line this driver does not build)");
        }
        return std::string(R"({"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"})");
      case KvOffload::kHicache:
        return detail::unsupported(name(), "kv_offload = \"hicache\" (an SGLang feature)");
      case KvOffload::kKvbm:
        return detail::unsupported(name(), "kv_offload = \"kvbm\" (Dynamo's connector; not wired yet)");
      case KvOffload::kCgn:
        return detail::unsupported(name(),
                                   "kv_offload = \"cgn\" (the cgn-kvcached connector does not exist yet)");
    }
    return std::string();
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_vllm_driver() {
  return std::make_unique<VllmDriver>();
}

}  // namespace cgn::agent
