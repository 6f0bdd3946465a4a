// sim: the project's engine simulator (cgn-engine-sim) in its vLLM flavour: `cgn-engine-sim
// --flavour vllm --model M --host H --port N --served-model-name X [extra args]`. Health and metrics are
// vLLM's. [engine] kind = "sim" in cognitora.toml. Every role runs the same line (the simulator
// answers the router's prefill and decode legs itself). kv_offload = "cgn" adds
// `--kvcached-target T` (LaunchOptions::kvcached_target): the simulator puts the blocks it evicts
// into the node's cgn-kvcached and loads them back on a prefix miss, in every role; every other
// kv_offload is rejected (the simulator models no other offload backend).
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class SimDriver final : public SpawningDriver {
 public:
  SimDriver() : SpawningDriver({.metrics_kind = routing::EngineKind::kVllm}) {}
  std::string_view name() const override { return "sim"; }

  bool publishes_kv_events() const override { return true; }

 protected:
  Status<DriverError> engine_line(const config::EngineConfig& engine, const LaunchOptions& options,
                                  LaunchCommand& cmd) const override {
    if (options.kv_offload != KvOffload::kNone && options.kv_offload != KvOffload::kCgn) {
      return detail::unsupported_offload(
          name(), options, "cgn-engine-sim offloads only to cgn-kvcached (kv_offload = \"cgn\")");
    }
    cmd.argv = {"cgn-engine-sim", "--flavour", "vllm", "--model", engine.model};
    detail::add_host_port(engine, cmd.argv);
    cmd.argv.insert(cmd.argv.end(), {"--served-model-name", detail::served_name_or_model(engine)});
    detail::add_kv_events(options, /*with_enable_key=*/true, cmd.argv);
    if (options.kv_offload == KvOffload::kCgn) {
      cmd.argv.insert(cmd.argv.end(), {"--kvcached-target", options.kvcached_target});
    }
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_sim_driver() {
  return std::make_unique<SimDriver>();
}

}  // namespace cgn::agent
