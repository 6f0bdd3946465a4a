// llama.cpp: `llama-server -m FILE --host H --port N --parallel K --metrics [--alias X] [extra args]`.
// /health answers 503 {"error":{..."message":"Loading model"...}} while loading, then 200.
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class LlamacppDriver final : public SpawningDriver {
 public:
  LlamacppDriver()
      : SpawningDriver({.metrics_kind = routing::EngineKind::kLlamaCpp,
                        .no_pd_reason = "llama.cpp has no prefill/decode split",
                        .no_offload_reason = "llama.cpp has no KV connector interface",
                        .single_tp = true}) {}
  std::string_view name() const override { return "llamacpp"; }

  HealthSpec health(const LaunchOptions& /*options*/) const override {
    HealthSpec spec;
    spec.loading_status = 503;
    spec.loading_marker = "Loading model";
    return spec;
  }

 protected:
  Status<DriverError> engine_line(const config::EngineConfig& engine, const LaunchOptions& options,
                                  LaunchCommand& cmd) const override {
    if (options.parallel_slots == 0) {
      return make_error(DriverError::kInvalidConfig,
                        "llamacpp: parallel slots (--parallel) must be at least 1");
    }
    cmd.argv = {"llama-server", "-m", engine.model};
    detail::add_host_port(engine, cmd.argv);
    cmd.argv.insert(cmd.argv.end(), {"--parallel", std::to_string(options.parallel_slots), "--metrics"});
    if (!engine.served_name.empty()) {
      cmd.argv.insert(cmd.argv.end(), {"--alias", engine.served_name});
    }
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_llamacpp_driver() {
  return std::make_unique<LlamacppDriver>();
}

}  // namespace cgn::agent
