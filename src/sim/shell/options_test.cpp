#include "sim/shell/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/process.h"

namespace cgn::sim {
namespace {

using ::testing::HasSubstr;

CliResult<SimSetup> parse(std::vector<std::string> args) {
  std::vector<const char*> argv;
  for (const auto& a : args) {
    argv.push_back(a.c_str());
  }
  return parse_sim_options(static_cast<int>(argv.size()), argv.data());
}

TEST(SimOptions, HelpIsStatusZeroWithTheUsage) {
  auto r = parse({"cgn-engine-sim", "--help"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 0);
  EXPECT_THAT(r.error().message, HasSubstr("--flavor"));
  EXPECT_THAT(r.error().message, HasSubstr("--kv-transfer-config"));
}

TEST(SimOptions, UnknownFlagIsAUsageError) {
  auto r = parse({"cgn-engine-sim", "--model", "m", "--no-such-flag"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().code, 0);
  EXPECT_THAT(r.error().message, HasSubstr("--no-such-flag"));
}

TEST(SimOptions, BadValuesAreUsageErrors) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"cgn-engine-sim", "--model", "m", "--port", "70000"},
                                             {"cgn-engine-sim", "--model", "m", "--flavor", "tgi"},
                                             {"cgn-engine-sim", "--model", "m", "--time-scale", "abc"}}) {
    auto r = parse(args);
    ASSERT_FALSE(r) << args[3];
    EXPECT_NE(r.error().code, 0) << args[3];
    EXPECT_THAT(r.error().message, HasSubstr(args[3]));
  }
}

TEST(SimOptions, ModelIsRequiredWithoutAnEngineLine) {
  auto r = parse({"cgn-engine-sim", "--port", "0"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, 2);
  EXPECT_THAT(r.error().message, HasSubstr("cgn-engine-sim: --model is required"));
}

TEST(SimOptions, SemanticErrorsNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const auto& c : std::vector<Case>{
           {{"cgn-engine-sim", "--model", "m", "--log-level", "loud"}, "unknown --log-level 'loud'"},
           {{"cgn-engine-sim", "--model", "m", "--block-size", "0"}, "capacity knobs must be positive"},
           {{"cgn-engine-sim", "--model", "m", "--step-overhead-ms", "-1"}, "timing coefficients"},
           {{"cgn-engine-sim", "--model", "m", "--fault", "error=999"}, "--fault: "},
           {{"cgn-engine-sim", "--flavor", "llamacpp", "--model", "m", "--kv-transfer-config", "{}"},
            "--kv-transfer-config is a vLLM flag"},
           {{"cgn-engine-sim", "--flavor", "vllm", "--", "vllm", "serve", "m"}, "--flavor conflicts"},
           {{"cgn-engine-sim", "--model", "m", "--fault-rules", "/nonexistent/rules"}, "--fault-rules: "}}) {
    auto r = parse(c.args);
    ASSERT_FALSE(r) << c.says;
    EXPECT_EQ(r.error().code, 2) << c.says;
    EXPECT_THAT(r.error().message, HasSubstr(c.says));
  }
}

TEST(SimOptions, FlagModeBuildsTheFlavoursLine) {
  auto r = parse({"cgn-engine-sim", "--flavor", "sglang", "--model", "org/m", "--port", "0", "--port-file",
                  "/tmp/p", "--time-scale", "0.5", "--max-num-seqs", "7", "--log-level", "warn"});
  ASSERT_TRUE(r) << r.error().message;
  const SimOptions& sim = r->shell.sim;
  EXPECT_EQ(sim.flavour, Flavour::kSglang);
  EXPECT_EQ(sim.model, "org/m");
  EXPECT_EQ(sim.served_model_name, "org/m");
  EXPECT_EQ(sim.port, 0);
  EXPECT_TRUE(sim.metrics_enabled);  // flag mode: metrics on unless --no-metrics
  EXPECT_DOUBLE_EQ(sim.engine.time_scale, 0.5);
  EXPECT_EQ(sim.engine.model.max_num_seqs, 7u);
  EXPECT_EQ(r->port_file, "/tmp/p");
  EXPECT_EQ(r->log_level, "warn");
}

TEST(SimOptions, EngineLineTakesShellFlagsAndFlagsOverrideIt) {
  auto r = parse({"cgn-engine-sim", "--served-model-name", "alias", "--", "vllm", "serve", "m", "--port", "0",
                  "--sim-port-file", "/tmp/q", "--sim-log-level=debug", "--max-num-seqs", "9"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->shell.sim.flavour, Flavour::kVllm);
  EXPECT_EQ(r->shell.sim.model, "m");
  EXPECT_EQ(r->shell.sim.served_model_name, "alias");
  EXPECT_EQ(r->shell.sim.engine.model.max_num_seqs, 9u);
  EXPECT_EQ(r->port_file, "/tmp/q");
  EXPECT_EQ(r->log_level, "debug");
}

TEST(SimOptions, ProgramNamedLikeTheEngineIsAnEngineLine) {
  auto r = parse({"/usr/local/bin/llama-server", "-m", "model.gguf", "--port", "0", "--metrics"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->shell.sim.flavour, Flavour::kLlamacpp);
  EXPECT_EQ(r->shell.sim.model, "model.gguf");
  EXPECT_TRUE(r->shell.sim.metrics_enabled);
}

TEST(SimOptions, LoadsTheFaultRulesFile) {
  testing::TempDir dir;
  testing::write_file(dir.file("rules"), "prompt:BOOM error=503\n");
  auto r = parse({"cgn-engine-sim", "--model", "m", "--fault-rules", dir.file("rules")});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_NE(r->shell.fault_rules.match("id", R"({"prompt":"BOOM"})"), nullptr);
  EXPECT_EQ(r->shell.fault_rules.match("id", R"({"prompt":"BOOM"})")->error_status, 503);
}

}  // namespace
}  // namespace cgn::sim
