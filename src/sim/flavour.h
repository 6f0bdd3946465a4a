// Engine flavours: what differs between vLLM, SGLang, llama.cpp, TensorRT-LLM
// and MLX on the wire, as data and pure functions (docs/design/
// engines.md): metrics path, health semantics, error bodies,
// /v1/models bodies. The HTTP shell serves what these say.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cgn::sim {

enum class Flavour : uint8_t { kVllm, kSglang, kLlamacpp, kTrtllm, kMlx };

std::string_view flavour_name(Flavour f);  // "vllm", "sglang", "llamacpp", "trtllm", "mlx"
std::optional<Flavour> parse_flavour(std::string_view name);

// How /health behaves while the model loads and once it is ready.
struct HealthSpec {
  std::string_view path;           // "/health"
  bool port_closed_while_loading;  // vLLM, SGLang, TRT-LLM, MLX: nothing listens until loaded
  int loading_status;              // when the port is open while loading (llama.cpp: 503)
  std::string_view loading_body;
  int ready_status;
  std::string_view ready_body;    // "" = empty body
  std::string_view content_type;  // of non-empty bodies
};

struct FlavourTraits {
  Flavour flavour;
  std::string_view name;
  std::string_view metrics_path;  // "" = the engine has no Prometheus endpoint (MLX)
  bool metrics_need_flag;         // llama.cpp --metrics, SGLang --enable-metrics
  std::string_view owned_by;      // /v1/models owned_by ("" = field absent)
  uint16_t default_port;
  HealthSpec health;
};

const FlavourTraits& flavour_traits(Flavour f);

// What GET /health does right now: whether anything listens at all (vLLM
// and friends open the port only after loading), then status and body.
struct HealthAnswer {
  bool listening;
  int status;
  std::string_view body;
  std::string_view content_type;
};
HealthAnswer health_answer(Flavour f, bool loaded);

// The error "type" a flavour puts beside an HTTP status.
std::string_view error_type_for(Flavour f, int status);

// The error body a flavour sends (JSON), message escaped:
//   vLLM:      {"error":{"message":..,"type":..,"param":null|..,"code":<int status>}}
//   llama.cpp: {"error":{"code":<int status>,"message":..,"type":..}}
//   SGLang, TRT-LLM: {"object":"error","message":..,"type":..,"param":null|..,"code":<int status>}
//   MLX:       {"error":{"message":..,"type":..,"param":null|..,"code":null}}
// `type` overrides error_type_for() (vLLM names some errors explicitly, e.g. "invalid_request_error").
std::string render_error_body(Flavour f, int status, std::string_view message, std::string_view param = {},
                              std::string_view type = {});

// GET /v1/models for a flavour serving one model.
std::string render_models_body(Flavour f, std::string_view served_name, std::string_view root,
                               uint32_t max_model_len, int64_t created_unix);

}  // namespace cgn::sim
