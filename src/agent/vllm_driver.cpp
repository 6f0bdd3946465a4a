// vLLM: `vllm serve MODEL --host H --port N --served-model-name X --tensor-parallel-size T
// [--kv-transfer-config JSON] [extra args]`. --kv-transfer-config per role and kv_offload
// (docs/agent.md "kv_offload and roles" has the whole matrix); every connector runs with kv_role
// kv_both (driver.cpp, vllm_kv_transfer_json). Facts, each from the file named:
//   - vLLM (vllm-project/vllm): registered connector names NixlConnector, LMCacheConnectorV1,
//     MultiConnector and the out-of-tree load through kv_connector_module_path
//     (vllm/distributed/kv_transfer/kv_connector/factory.py at a4cd9d0d28bd); MultiConnector loads a
//     request's KV from the first child reporting matched tokens and saves to all, children listed
//     in kv_connector_extra_config "connectors", each a full KVTransferConfig with its own kv_role
//     (kv_connector/v1/multi_connector.py at 00f4240ee645; config/kv_transfer.py at 007c643b4abb
//     requires kv_role whenever kv_connector is set); the MultiConnector line with NixlConnector
//     first (docs/features/disagg_prefill.md at 0047fb9dad17); prefill and decode both run the
//     NixlConnector with kv_both (tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh).
//   - Dynamo KVBM (ai-dynamo/dynamo): DynamoConnector from module kvbm.vllm_integration.connector,
//     sized by DYN_KVBM_CPU_CACHE_GB (lib/bindings/kvbm/README.md at 250cdc899087); with NIXL, its
//     PdConnector from the same module over [DynamoConnector, NixlConnector]
//     (components/src/dynamo/vllm/args.py, create_kv_transfer_config, at b6d5e48722e4), run on
//     prefill workers while decode runs the NixlConnector alone
//     (examples/backends/vllm/launch/disagg_kvbm.sh at e225d482979f).
//   - CognitoraConnector: ours, class CognitoraConnector in module cgn_kv_connector.connector (the
//     Python package cgn-kv-connector), given the node's cgn-kvcached in kv_connector_extra_config.
// LMCache reads LMCACHE_CONFIG_FILE or LMCACHE_* variables (LMCache/LMCache
// lmcache/integration/vllm/utils.py at c08e52d06553) and KVBM DYN_KVBM_CPU_CACHE_GB from the
// environment the engine inherits from the agent; the driver sets neither.
// The side-channel host VLLM_NIXL_SIDE_CHANNEL_HOST is exported wherever the NixlConnector runs
// (127.0.0.1 unless configured); the port VLLM_NIXL_SIDE_CHANNEL_PORT when configured.
#include <fmt/format.h>

#include "agent/driver.h"

namespace cgn::agent {
namespace {

using detail::VllmConnector;

VllmConnector nixl_connector() {
  return {"NixlConnector", "", {}};
}

// The offload tier's connector for kv_offload, or the reason vLLM cannot run it. nixl and none
// have no tier (nullopt).
Result<std::optional<VllmConnector>, DriverError> offload_tier(const LaunchOptions& options) {
  switch (options.kv_offload) {
    case KvOffload::kNone:
    case KvOffload::kNixl:
      return std::optional<VllmConnector>();
    case KvOffload::kLmcache:
      return std::optional<VllmConnector>(VllmConnector{"LMCacheConnectorV1", "", {}});
    case KvOffload::kHicache:
      return detail::unsupported_offload(
          "vllm", options, "HiCache is SGLang's hierarchical cache; vLLM has no such connector");
    case KvOffload::kKvbm:
      if (options.role == routing::NodeRole::kDecode) {
        return detail::unsupported_offload("vllm", options,
                                           "Dynamo runs KVBM on prefill workers only (its PdConnector takes "
                                           "cache hits from KVBM, not NIXL); use kv_offload = \"none\" on "
                                           "decode nodes");
      }
      return std::optional<VllmConnector>(
          VllmConnector{"DynamoConnector", "kvbm.vllm_integration.connector", {}});
    case KvOffload::kCgn:
      return std::optional<VllmConnector>(VllmConnector{
          "CognitoraConnector",
          "cgn_kv_connector.connector",
          {{"kvcached_target", options.kvcached_target}, {"kvcached_socket", options.kvcached_socket}}});
  }
  return std::optional<VllmConnector>();
}

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
  // variables where the NixlConnector runs: on a prefill or decode node, or with kv_offload nixl.
  Result<std::string, DriverError> kv_transfer_config(const LaunchOptions& options,
                                                      std::map<std::string, std::string>& env) const {
    auto tier = offload_tier(options);
    if (!tier) {
      return tier.error();
    }
    const bool uses_nixl = options.role != routing::NodeRole::kBoth || options.kv_offload == KvOffload::kNixl;
    if (!uses_nixl) {
      return *tier ? detail::vllm_kv_transfer_json(**tier) : std::string();
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
    if (!*tier) {
      return detail::vllm_kv_transfer_json(nixl_connector());
    }
    if (options.kv_offload == KvOffload::kKvbm) {
      return detail::vllm_kv_transfer_json({"PdConnector", "kvbm.vllm_integration.connector", {}},
                                           {**tier, nixl_connector()});
    }
    return detail::vllm_kv_transfer_json({"MultiConnector", "", {}}, {nixl_connector(), **tier});
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_vllm_driver() {
  return std::make_unique<VllmDriver>();
}

}  // namespace cgn::agent
