// sim: the project's engine simulator (cgn-engine-sim) in its vLLM flavour: `cgn-engine-sim
// --flavour vllm --model M --host H --port N --served-model-name X [extra args]`. Health and metrics are
// vLLM's. [engine] kind = "sim" in cognitora.toml. Every role runs the same line (the simulator
// answers the router's prefill and decode legs itself); every kv_offload but none is rejected
// until the simulator offloads.
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class SimDriver final : public SpawningDriver {
 public:
  SimDriver()
      : SpawningDriver({.metrics_kind = routing::EngineKind::kVllm,
                        .no_offload_reason = "not yet: cgn-engine-sim does not offload KV"}) {}
  std::string_view name() const override { return "sim"; }

  bool publishes_kv_events() const override { return true; }

 protected:
  Status<DriverError> engine_line(const config::EngineConfig& engine, const LaunchOptions& options,
                                  LaunchCommand& cmd) const override {
    cmd.argv = {"cgn-engine-sim", "--flavour", "vllm", "--model", engine.model};
    detail::add_host_port(engine, cmd.argv);
    cmd.argv.insert(cmd.argv.end(), {"--served-model-name", detail::served_name_or_model(engine)});
    detail::add_kv_events(options, /*with_enable_key=*/true, cmd.argv);
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_sim_driver() {
  return std::make_unique<SimDriver>();
}

}  // namespace cgn::agent
