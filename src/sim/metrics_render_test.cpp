#include "sim/metrics_render.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "sim/sim_testing.h"
#include "testing/process.h"

namespace cgn::sim {
namespace {

using testing::find_completion;
using testing::make_prompt;
using testing::VirtualCluster;

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string value;
};

// A small exposition-format reader for our own output and the captures.
std::vector<Sample> parse_samples(const std::string& text) {
  std::vector<Sample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') {
      continue;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') {
      s.name += line[i++];
    }
    EXPECT_FALSE(s.name.empty()) << line;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::string key, value;
        while (i < line.size() && line[i] != '=') {
          key += line[i++];
        }
        i += 2;  // ="
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) {
            ++i;
          }
          value += line[i++];
        }
        ++i;  // closing quote
        if (i < line.size() && line[i] == ',') {
          ++i;
        }
        s.labels[key] = value;
      }
      ++i;  // }
    }
    while (i < line.size() && line[i] == ' ') {
      ++i;
    }
    s.value = line.substr(i);
    EXPECT_FALSE(s.value.empty()) << line;
    out.push_back(std::move(s));
  }
  return out;
}

std::string signature(const Sample& s) {
  std::string sig = s.name + "{";
  bool first = true;
  for (const auto& [k, v] : s.labels) {
    sig += (first ? "" : ",") + k;
    first = false;
  }
  return sig + "}";
}

std::set<std::string> signatures(const std::string& text) {
  std::set<std::string> out;
  for (const auto& s : parse_samples(text)) {
    out.insert(signature(s));
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::set<std::string> golden(const std::string& name) {
  std::set<std::string> out;
  std::istringstream in(read_file(std::string(CGN_SIM_TESTDATA) + "/" + name));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') {
      out.insert(line);
    }
  }
  return out;
}

std::string capture(const std::string& file) {
  return read_file(cgn::testing::sample_path(file));
}

// An engine that has served a little of everything.
struct Served {
  Engine engine{EngineConfig{}};
  uint64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  int stops = 0, lengths = 0, aborts = 0, requests = 0;
  Served() {
    VirtualCluster c;
    c.add(engine);
    std::vector<RequestHandle> hs;
    const auto shared = make_prompt(1200, 9);
    for (int i = 0; i < 6; ++i) {
      Request r;
      r.prompt = i % 2 == 0 ? shared : make_prompt(500 + 10 * i, 100 + i);
      r.max_tokens = 10 + i;
      r.ignore_eos = i != 3;
      r.eos_at = i == 3 ? 4 : 0;
      hs.push_back(*engine.add_request(std::move(r), i * 2 * kNanosPerSecond));
      const auto events = c.run_until((i * 2 + 1) * kNanosPerSecond);
      for (auto h : hs) {
        if (const Completion* d = find_completion(events, h)) {
          prompt_tokens += d->usage.prompt_tokens;
          completion_tokens += d->usage.completion_tokens;
          cached_tokens += d->usage.cached_tokens;
          stops += d->reason == FinishReason::kStop;
          lengths += d->reason == FinishReason::kLength;
          ++requests;
        }
      }
    }
    // One request aborted mid-flight.
    auto h = *engine.add_request(Request{.prompt = make_prompt(3000, 77), .max_tokens = 100},
                                 20 * kNanosPerSecond);
    c.run_until(20 * kNanosPerSecond + 500 * kNanosPerMilli);
    engine.abort(h, 20 * kNanosPerSecond + 500 * kNanosPerMilli);
    ++aborts;
    c.run_to_idle();
  }
};

MetricsContext ctx(bool deprecated = false) {
  MetricsContext c;
  c.model_name = "meta-llama/Llama-3.1-8B-Instruct";
  c.created_unix = 1762438423.0434499;
  c.deprecated_names = deprecated;
  return c;
}

TEST(MetricsGolden, EachFlavourEmitsExactlyItsGoldenSeries) {
  Served s;
  struct Case {
    Flavour f;
    bool deprecated;
    std::vector<std::string> files;
  };
  const std::vector<Case> cases = {
      {Flavour::kVllm, false, {"golden_vllm.txt"}},
      {Flavour::kVllm, true, {"golden_vllm.txt", "golden_vllm_deprecated.txt"}},
      {Flavour::kSglang, false, {"golden_sglang.txt"}},
      {Flavour::kLlamacpp, false, {"golden_llamacpp.txt"}},
      {Flavour::kTrtllm, false, {"golden_trtllm.txt"}},
  };
  for (const auto& c : cases) {
    std::set<std::string> want;
    for (const auto& f : c.files) {
      const auto g = golden(f);
      want.insert(g.begin(), g.end());
    }
    EXPECT_EQ(signatures(render_metrics(c.f, s.engine, ctx(c.deprecated))), want) << flavour_name(c.f);
  }
  EXPECT_EQ(render_metrics(Flavour::kMlx, s.engine, ctx()), "");
}

TEST(MetricsGolden, GoldenListsMatchTheRealCaptures) {
  const auto vllm = signatures(capture("vllm-v1-metrics.txt"));
  for (const auto& g : golden("golden_vllm.txt")) {
    EXPECT_TRUE(vllm.count(g)) << g;
  }
  const auto sglang = signatures(capture("sglang-metrics.txt"));
  int from_capture = 0;
  for (const auto& g : golden("golden_sglang.txt")) {
    from_capture += sglang.count(g) ? 1 : 0;
  }
  EXPECT_EQ(from_capture,
            static_cast<int>(golden("golden_sglang.txt").size()) - 3);  // 3 documented additions
  EXPECT_EQ(golden("golden_llamacpp.txt"), signatures(capture("llamacpp-metrics.txt")));
}

TEST(MetricsGolden, VllmHelpTypeAndBucketsMatchTheCapture) {
  Served s;
  const std::string ours = render_metrics(Flavour::kVllm, s.engine, ctx(true));
  const std::string real = capture("vllm-v1-metrics.txt");
  std::set<std::string> real_meta;
  {
    std::istringstream in(real);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("# ", 0) == 0) {
        real_meta.insert(line);
      }
    }
  }
  std::istringstream in(ours);
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0 && line.find("gpu_") == std::string::npos) {
      EXPECT_TRUE(real_meta.count(line)) << line;
      ++checked;
    }
  }
  EXPECT_GT(checked, 90);
  // Bucket boundaries, as printed.
  std::map<std::string, std::vector<std::string>> ours_le, real_le;
  for (const auto& smp : parse_samples(ours)) {
    if (smp.labels.count("le"))
      ours_le[smp.name].push_back(smp.labels.at("le"));
  }
  for (const auto& smp : parse_samples(real)) {
    if (smp.labels.count("le") && smp.name.rfind("vllm:", 0) == 0)
      real_le[smp.name].push_back(smp.labels.at("le"));
  }
  for (const auto& [name, les] : ours_le) {
    if (name.find("_tokens_bucket") != std::string::npos && name != "vllm:iteration_tokens_total_bucket") {
      continue;  // 1-2-5 buckets depend on max_model_len (the capture's model had 32k)
    }
    EXPECT_EQ(les, real_le[name]) << name;
  }
}

TEST(MetricsValues, VllmCountersMatchWhatWasServed) {
  Served s;
  ASSERT_EQ(s.requests, 6);
  std::map<std::string, double> v;
  for (const auto& smp : parse_samples(render_metrics(Flavour::kVllm, s.engine, ctx()))) {
    std::string key = smp.name;
    if (smp.labels.count("finished_reason"))
      key += ":" + smp.labels.at("finished_reason");
    if (smp.labels.count("le"))
      continue;
    v[key] = std::stod(smp.value);
  }
  EXPECT_EQ(v["vllm:prompt_tokens_total"], static_cast<double>(s.prompt_tokens + 3000));
  EXPECT_GE(v["vllm:generation_tokens_total"], static_cast<double>(s.completion_tokens));
  EXPECT_EQ(v["vllm:prefix_cache_hits_total"], static_cast<double>(s.cached_tokens));
  EXPECT_GT(s.cached_tokens, 0u);
  EXPECT_EQ(v["vllm:request_success_total:stop"], s.stops);
  EXPECT_EQ(v["vllm:request_success_total:length"], s.lengths);
  EXPECT_EQ(v["vllm:request_success_total:abort"], s.aborts);
  EXPECT_EQ(v["vllm:time_to_first_token_seconds_count"], 7);  // the aborted one got its first token
  EXPECT_EQ(v["vllm:e2e_request_latency_seconds_count"], 7);
  EXPECT_EQ(v["vllm:num_requests_running"], 0);
  EXPECT_EQ(v["vllm:num_requests_waiting"], 0);
  EXPECT_EQ(v["vllm:kv_cache_usage_perc"], 0);
  EXPECT_EQ(v["vllm:prompt_tokens_created"], 1762438423.0434499);
}

TEST(MetricsValues, GaugesFollowTheEngineUnderLoad) {
  EngineConfig cfg;
  cfg.model.max_num_seqs = 2;
  Engine e(std::move(cfg));
  for (uint64_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(e.add_request(Request{.prompt = make_prompt(2000, i), .max_tokens = 50}, 0).ok());
  }
  e.advance_to(0);
  std::map<std::string, double> v;
  for (const auto& smp : parse_samples(render_metrics(Flavour::kVllm, e, ctx()))) {
    v[smp.name] = std::stod(smp.value);
  }
  EXPECT_EQ(v["vllm:num_requests_running"], 2);
  EXPECT_EQ(v["vllm:num_requests_waiting"], 3);
  EXPECT_DOUBLE_EQ(v["vllm:kv_cache_usage_perc"], e.gauges().kv_usage);
  EXPECT_GT(v["vllm:kv_cache_usage_perc"], 0.0);
  const std::string text = render_metrics(Flavour::kVllm, e, ctx());
  EXPECT_NE(text.find("num_gpu_blocks=\"27500\""), std::string::npos);
  EXPECT_NE(text.find("block_size=\"16\""), std::string::npos);
}

TEST(MetricsValues, LlamacppCountsCachedTokensApart) {
  Served s;
  std::map<std::string, double> v;
  for (const auto& smp : parse_samples(render_metrics(Flavour::kLlamacpp, s.engine, ctx()))) {
    v[smp.name] = std::stod(smp.value);
  }
  EXPECT_EQ(v["llamacpp:prompt_tokens_cached_total"], static_cast<double>(s.cached_tokens));
  EXPECT_EQ(v["llamacpp:prompt_tokens_total"], static_cast<double>(s.prompt_tokens + 3000 - s.cached_tokens));
  EXPECT_EQ(v["llamacpp:requests_processing"], 0);
  EXPECT_GT(v["llamacpp:n_decode_total"], 0);
}

TEST(NumberFormat, PythonPrometheusClientStyle) {
  // Values as they appear in the vLLM and SGLang captures.
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, "0.0"},
      {1.0, "1.0"},
      {0.001, "0.001"},
      {16384.0, "16384.0"},
      {0.28, "0.28"},
      {1762438423.0434499, "1.7624384230434499e+09"},
      {8128902.0, "8.128902e+06"},
      {2351897.9474117756, "2.3518979474117756e+06"},
      {11008.0, "11008.0"},
      {0.07500000000000001, "0.07500000000000001"},
      {4294967296.0, "4.294967296e+09"},
  };
  for (const auto& [v, s] : cases) {
    EXPECT_EQ(go_float(v), s) << v;
  }
  EXPECT_EQ(cpp_float(7778870.0), "7.77887e+06");  // llamacpp-metrics.txt
  EXPECT_EQ(cpp_float(558.029), "558.029");
  EXPECT_EQ(cpp_float(191651.0), "191651");
}

}  // namespace
}  // namespace cgn::sim
