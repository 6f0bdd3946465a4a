// cgn-infer (our own engine, not written yet): the launch line only, provisional until the
// engine defines its flags: `cgn-infer --model M --host H --port N --served-model-name X --tp T
// [extra args]`. Health is GET /health; metrics are not scraped until a mapping exists.
#include "agent/driver.h"

namespace cgn::agent {
namespace {

class CgnInferDriver final : public SpawningDriver {
 public:
  CgnInferDriver()
      : SpawningDriver(
            {.metrics_kind = std::nullopt,
             .no_pd_reason = "not yet: the provisional cgn-infer line has no prefill/decode flags",
             .no_offload_reason = "not yet: the provisional cgn-infer line has no KV offload flags"}) {}
  std::string_view name() const override { return "cgn-infer"; }

 protected:
  Status<DriverError> engine_line(const config::EngineConfig& engine, const LaunchOptions& /*options*/,
                                  LaunchCommand& cmd) const override {
    cmd.argv = {"cgn-infer", "--model", engine.model};
    detail::add_host_port(engine, cmd.argv);
    cmd.argv.insert(cmd.argv.end(), {"--served-model-name", detail::served_name_or_model(engine), "--tp",
                                     std::to_string(engine.tensor_parallel)});
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<EngineDriver> make_cgn_infer_driver() {
  return std::make_unique<CgnInferDriver>();
}

}  // namespace cgn::agent
