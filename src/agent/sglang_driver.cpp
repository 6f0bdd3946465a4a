// SGLang: `python3 -m sglang.launch_server --model-path M --host H --port N --enable-metrics --tp T
// [--served-model-name X] [--page-size P] [--disaggregation-mode prefill|decode
// --disaggregation-transfer-backend nixl|mooncake] [--enable-hierarchical-cache | --enable-lmcache]
// [extra args]`. Metrics are off without --enable-metrics, so the driver always passes it. SGLang's PD mode
// pairs prefill and decode through bootstrap rooms sent to both at once (docs/design/
// engines.md), not vLLM's P-then-D flow the router speaks: the line is right for SGLang's own router.
// kv_offload (docs/agent.md "kv_offload and roles"), facts from sgl-project/sglang:
//   - hicache: --enable-hierarchical-cache (host tier sized by SGLang's default --hicache-ratio);
//     with disaggregation HiCache runs on prefill nodes, while a decode node offloads only into a
//     shared L3 storage backend (--disaggregation-decode-enable-offload-kvcache with
//     --hicache-storage-backend) (docs/advanced_features/hicache_best_practices.md at 0d57f2c1df18).
//   - lmcache: --enable-lmcache, LMCache configured by LMCACHE_CONFIG_FILE or LMCACHE_* variables
//     (python/sglang/srt/mem_cache/storage/lmcache/README.md at a84e339e5302); documented for an
//     aggregated server only.
//   - cgn: SGLang could load an out-of-tree L3 backend (--hicache-storage-backend dynamic with
//     backend_name, module_path, class_name in --hicache-storage-backend-extra-config;
//     python/sglang/srt/mem_cache/storage/backend_factory.py at 001067fffe33), but none for
//     cgn-kvcached exists yet.
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
    if (auto st = offload_flags(options, cmd.argv); !st) {
      return st;
    }
    detail::add_kv_events(options, /*with_enable_key=*/false, cmd.argv);
    return Ok{};
  }

 private:
  Status<DriverError> offload_flags(const LaunchOptions& options, std::vector<std::string>& argv) const {
    const bool aggregated = options.role == routing::NodeRole::kBoth;
    switch (options.kv_offload) {
      case KvOffload::kNone:
        return Ok{};
      case KvOffload::kNixl:
        // NIXL is SGLang's prefill/decode transfer backend, nothing else.
        if (aggregated || options.pd_transfer_backend != "nixl") {
          return detail::unsupported_offload(name(), options,
                                             "SGLang uses NIXL only to move KV between prefill and decode "
                                             "nodes: use role prefill or decode with pd_transfer_backend = "
                                             "\"nixl\"");
        }
        return Ok{};
      case KvOffload::kHicache:
        if (options.role == routing::NodeRole::kDecode) {
          return detail::unsupported_offload(
              name(), options,
              "SGLang runs HiCache on prefill nodes; a decode node offloads only "
              "into a shared L3 storage backend, which this driver does not "
              "configure");
        }
        argv.push_back("--enable-hierarchical-cache");
        return Ok{};
      case KvOffload::kLmcache:
        if (!aggregated) {
          return detail::unsupported_offload(
              name(), options, "SGLang documents --enable-lmcache for an aggregated server only");
        }
        argv.push_back("--enable-lmcache");
        return Ok{};
      case KvOffload::kKvbm:
        return detail::unsupported_offload(name(), options,
                                           "sglang.launch_server has no flag that loads Dynamo's KVBM (its "
                                           "documented launch lines are vLLM's and TensorRT-LLM's)");
      case KvOffload::kCgn:
        return detail::unsupported_offload(name(), options,
                                           "not yet: no HiCache storage backend for cgn-kvcached exists "
                                           "(cgn-kv-connector implements vLLM's connector interface)");
    }
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_sglang_driver() {
  return std::make_unique<SglangDriver>();
}

}  // namespace cgn::agent
