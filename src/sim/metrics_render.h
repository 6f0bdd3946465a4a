// Renders an engine's state as its flavour's Prometheus text (the /metrics
// or /prometheus/metrics body). Names, labels, HELP strings, bucket lists and
// number formatting follow the real captures in testdata/samples/ (vLLM V1,
// SGLang, llama.cpp); the per-flavour golden lists in src/sim/testdata/ pin
// them. MLX has no metrics endpoint: the renderer returns "".
#pragma once

#include <string>

#include "sim/engine.h"
#include "sim/flavour.h"

namespace cgn::sim {

struct MetricsContext {
  std::string model_name;          // served model name (a label; from config, never from clients)
  std::string engine_index = "0";  // vLLM "engine" label (DP rank)
  double created_unix = 0.0;       // process start (wall clock) for *_created series
  bool deprecated_names = false;   // vLLM: also emit the deprecated aliases, for scraper tests
};

std::string render_metrics(Flavour f, const Engine& engine, const MetricsContext& ctx);

// Python prometheus_client's floatToGoString (vLLM, SGLang, TRT-LLM):
// repr(), and mantissa/exponent form once there are more than 6 integer digits.
std::string go_float(double v);
// llama.cpp prints values with C++ stream defaults (%g).
std::string cpp_float(double v);

}  // namespace cgn::sim
