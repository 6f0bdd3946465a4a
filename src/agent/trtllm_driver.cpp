// TensorRT-LLM: `trtllm-serve M --host H --port N --tp_size T [extra args]`. Prometheus text is at
// /prometheus/metrics (its /metrics is JSON iteration stats). kv_offload and roles (docs/agent.md
// "kv_offload and roles"): TensorRT-LLM takes both its KV connector (kv_connector_config:
// connector_module, connector_scheduler_class, connector_worker_class; Dynamo's KVBM is
// kvbm.trtllm_integration.connector with DynamoKVBMConnectorLeader / DynamoKVBMConnectorWorker,
// ai-dynamo/dynamo lib/bindings/kvbm/README.md at 250cdc899087) and its P/D transfer
// (cache_transceiver_config, served through `trtllm-serve disaggregated`, NVIDIA/TensorRT-LLM
// examples/disaggregated/README.md at c3c3d76e28c5) only from the YAML file named by
// --extra_llm_api_options. The driver writes no files, so every cell but none/both is a named
// error for now.
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class TrtllmDriver final : public SpawningDriver {
 public:
  TrtllmDriver()
      : SpawningDriver({.metrics_kind = routing::EngineKind::kTrtLlm,
                        .no_pd_reason = "TensorRT-LLM's prefill/decode split is cache_transceiver_config in "
                                        "an --extra_llm_api_options YAML file behind `trtllm-serve "
                                        "disaggregated`, not the router's NIXL flow"}) {}
  std::string_view name() const override { return "trtllm"; }

  std::optional<std::string> metrics_path(const LaunchOptions& /*options*/) const override {
    return std::string("/prometheus/metrics");
  }

 protected:
  Status<DriverError> engine_line(const config::EngineConfig& engine, const LaunchOptions& options,
                                  LaunchCommand& cmd) const override {
    if (auto st = offload(options); !st) {
      return st;
    }
    cmd.argv = {"trtllm-serve", engine.model};
    detail::add_host_port(engine, cmd.argv);
    cmd.argv.insert(cmd.argv.end(), {"--tp_size", std::to_string(engine.tensor_parallel)});
    return Ok{};
  }

 private:
  Status<DriverError> offload(const LaunchOptions& options) const {
    switch (options.kv_offload) {
      case KvOffload::kNone:
        return Ok{};
      case KvOffload::kNixl:
        return detail::unsupported_offload(name(), options,
                                           "TensorRT-LLM moves KV over NIXL only between the context and "
                                           "generation servers of `trtllm-serve disaggregated`");
      case KvOffload::kHicache:
        return detail::unsupported_offload(name(), options,
                                           "HiCache is SGLang's hierarchical cache; TensorRT-LLM has no such "
                                           "option");
      case KvOffload::kLmcache:
      case KvOffload::kKvbm:
        return detail::unsupported_offload(name(), options,
                                           "not yet: TensorRT-LLM loads a KV connector only from "
                                           "kv_connector_config in an --extra_llm_api_options YAML file, "
                                           "which this driver does not write");
      case KvOffload::kCgn:
        return detail::unsupported_offload(name(), options,
                                           "cgn-kv-connector implements vLLM's connector interface, not "
                                           "TensorRT-LLM's");
    }
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_trtllm_driver() {
  return std::make_unique<TrtllmDriver>();
}

}  // namespace cgn::agent
