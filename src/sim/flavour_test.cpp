#include "sim/flavour.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "testing/process.h"

namespace cgn::sim {
namespace {

using nlohmann::json;

TEST(Flavour, ErrorBodiesFollowEachEngine) {
  // vLLM: the capture's exact bytes.
  std::ifstream f(cgn::testing::sample_path("vllm-error-400.json"));
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(render_error_body(Flavour::kVllm, 400, R"(Grammar error: Unimplemented keys: ["uniqueItems"])"),
            ss.str());

  const json l = json::parse(render_error_body(Flavour::kLlamacpp, 503, "Loading model"));
  EXPECT_EQ(l.dump(), R"({"error":{"code":503,"message":"Loading model","type":"unavailable_error"}})");
  const json sg = json::parse(render_error_body(Flavour::kSglang, 429, "busy", "model"));
  EXPECT_EQ(sg["object"], "error");
  EXPECT_EQ(sg["code"], 429);
  EXPECT_EQ(sg["param"], "model");
  EXPECT_EQ(json::parse(render_error_body(Flavour::kTrtllm, 500, "x"))["type"], "InternalServerError");
  EXPECT_TRUE(json::parse(render_error_body(Flavour::kMlx, 404, "x"))["error"]["code"].is_null());
}

TEST(Flavour, HealthSemantics) {
  EXPECT_TRUE(flavour_traits(Flavour::kVllm).health.port_closed_while_loading);
  EXPECT_TRUE(flavour_traits(Flavour::kVllm).health.ready_body.empty());
  const HealthSpec& l = flavour_traits(Flavour::kLlamacpp).health;
  EXPECT_FALSE(l.port_closed_while_loading);
  EXPECT_EQ(l.loading_status, 503);
  EXPECT_EQ(std::string(l.loading_body), render_error_body(Flavour::kLlamacpp, 503, "Loading model"));
  EXPECT_EQ(json::parse(l.ready_body)["status"], "ok");
  EXPECT_EQ(json::parse(flavour_traits(Flavour::kMlx).health.ready_body)["status"], "ok");
}

TEST(Flavour, HealthAnswerWhileLoadingAndReady) {
  EXPECT_FALSE(health_answer(Flavour::kVllm, false).listening);
  EXPECT_EQ(health_answer(Flavour::kVllm, true).status, 200);
  EXPECT_TRUE(health_answer(Flavour::kVllm, true).body.empty());
  const HealthAnswer loading = health_answer(Flavour::kLlamacpp, false);
  EXPECT_TRUE(loading.listening);
  EXPECT_EQ(loading.status, 503);
  EXPECT_EQ(json::parse(loading.body)["error"]["message"], "Loading model");
  EXPECT_EQ(json::parse(health_answer(Flavour::kLlamacpp, true).body)["status"], "ok");
}

TEST(Flavour, MetricsEndpoints) {
  EXPECT_EQ(flavour_traits(Flavour::kVllm).metrics_path, "/metrics");
  EXPECT_EQ(flavour_traits(Flavour::kTrtllm).metrics_path, "/prometheus/metrics");
  EXPECT_TRUE(flavour_traits(Flavour::kMlx).metrics_path.empty());
  EXPECT_TRUE(flavour_traits(Flavour::kLlamacpp).metrics_need_flag);
  EXPECT_TRUE(flavour_traits(Flavour::kSglang).metrics_need_flag);
}

TEST(Flavour, ModelsBodies) {
  const json v =
      json::parse(render_models_body(Flavour::kVllm, "llama", "meta-llama/Llama-3.1-8B", 131072, 10));
  const json& d = v["data"][0];
  EXPECT_EQ(v["object"], "list");
  EXPECT_EQ(d["id"], "llama");
  EXPECT_EQ(d["object"], "model");
  EXPECT_EQ(d["owned_by"], "vllm");
  EXPECT_EQ(d["root"], "meta-llama/Llama-3.1-8B");
  EXPECT_TRUE(d["parent"].is_null());
  EXPECT_EQ(d["max_model_len"], 131072);
  EXPECT_EQ(json::parse(render_models_body(Flavour::kLlamacpp, "x", "x", 8192, 1))["data"][0]["owned_by"],
            "llamacpp");
  EXPECT_FALSE(
      json::parse(render_models_body(Flavour::kMlx, "x", "x", 8192, 1))["data"][0].contains("owned_by"));
}

TEST(Flavour, NamesRoundTrip) {
  for (Flavour f : {Flavour::kVllm, Flavour::kSglang, Flavour::kLlamacpp, Flavour::kTrtllm, Flavour::kMlx}) {
    EXPECT_EQ(parse_flavour(flavour_name(f)), f);
  }
  EXPECT_EQ(parse_flavour("llama.cpp"), Flavour::kLlamacpp);
  EXPECT_FALSE(parse_flavour("ollama").has_value());
}

}  // namespace
}  // namespace cgn::sim
