#include "sim/flavour.h"

#include <array>

#include "core/openai_error.h"

namespace cgn::sim {

namespace {

constexpr std::string_view kLlamaLoading =
    R"({"error":{"code":503,"message":"Loading model","type":"unavailable_error"}})";

const std::array<FlavourTraits, 5> kTraits = {{
    {Flavour::kVllm,
     "vllm",
     "/metrics",
     false,
     "vllm",
     8000,
     {"/health", true, 503, "", 200, "", "application/json"}},
    {Flavour::kSglang,
     "sglang",
     "/metrics",
     true,
     "sglang",
     30000,
     {"/health", true, 503, "", 200, "", "application/json"}},
    {Flavour::kLlamacpp,
     "llamacpp",
     "/metrics",
     true,
     "llamacpp",
     8080,
     {"/health", false, 503, kLlamaLoading, 200, R"({"status":"ok"})", "application/json; charset=utf-8"}},
    {Flavour::kTrtllm,
     "trtllm",
     "/prometheus/metrics",
     false,
     "tensorrt_llm",
     8000,
     {"/health", true, 503, "", 200, "", "application/json"}},
    {Flavour::kMlx,
     "mlx",
     "",
     false,
     "",
     8080,
     {"/health", true, 503, "", 200, R"({"status": "ok"})", "application/json"}},
}};

void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  append_json_escaped(out, s);
  out += '"';
}

void append_param(std::string& out, std::string_view param) {
  if (param.empty()) {
    out += "null";
  } else {
    append_quoted(out, param);
  }
}

}  // namespace

std::string_view flavour_name(Flavour f) {
  return kTraits[static_cast<size_t>(f)].name;
}

std::optional<Flavour> parse_flavour(std::string_view name) {
  for (const auto& t : kTraits) {
    if (t.name == name) {
      return t.flavour;
    }
  }
  if (name == "llama.cpp" || name == "llama-server") {
    return Flavour::kLlamacpp;
  }
  if (name == "tensorrt-llm" || name == "trtllm-serve") {
    return Flavour::kTrtllm;
  }
  return std::nullopt;
}

const FlavourTraits& flavour_traits(Flavour f) {
  return kTraits[static_cast<size_t>(f)];
}

HealthAnswer health_answer(Flavour f, bool loaded) {
  const HealthSpec& h = flavour_traits(f).health;
  if (loaded) {
    return {true, h.ready_status, h.ready_body, h.content_type};
  }
  if (h.port_closed_while_loading) {
    return {false, 0, {}, {}};
  }
  return {true, h.loading_status, h.loading_body, h.content_type};
}

std::string_view error_type_for(Flavour f, int status) {
  if (f == Flavour::kLlamacpp) {
    // tools/server/utils.hpp error_type names.
    switch (status) {
      case 400:
        return "invalid_request_error";
      case 401:
        return "authentication_error";
      case 403:
        return "permission_error";
      case 404:
        return "not_found_error";
      case 501:
        return "not_supported_error";
      case 429:
      case 503:
        return "unavailable_error";
      default:
        return "server_error";
    }
  }
  if (f == Flavour::kMlx) {
    switch (status) {
      case 400:
        return "invalid_request_error";
      case 404:
        return "not_found_error";
      case 429:
        return "rate_limit_error";
      default:
        return "server_error";
    }
  }
  // vLLM and the servers that copied its protocol use the OpenAI SDK class names.
  switch (status) {
    case 400:
      return "BadRequestError";
    case 401:
      return "AuthenticationError";
    case 403:
      return "PermissionDeniedError";
    case 404:
      return "NotFoundError";
    case 422:
      return "UnprocessableEntityError";
    case 429:
      return "RateLimitError";
    case 503:
      return "ServiceUnavailableError";
    default:
      return "InternalServerError";
  }
}

namespace {

// `"message":M,"type":T,"param":P` (vLLM, SGLang, TensorRT-LLM and MLX share this run of fields).
void append_message_type_param(std::string& out, std::string_view message, std::string_view type,
                               std::string_view param) {
  out += R"("message":)";
  append_quoted(out, message);
  out += R"(,"type":)";
  append_quoted(out, type);
  out += R"(,"param":)";
  append_param(out, param);
}

}  // namespace

std::string render_error_body(Flavour f, int status, std::string_view message, std::string_view param,
                              std::string_view type_override) {
  const std::string_view type = type_override.empty() ? error_type_for(f, status) : type_override;
  std::string out;
  out.reserve(96 + message.size());
  switch (f) {
    case Flavour::kVllm:
      out += R"({"error":{)";
      append_message_type_param(out, message, type, param);
      out += R"(,"code":)";
      out += std::to_string(status);
      out += "}}";
      break;
    case Flavour::kLlamacpp:
      out += R"({"error":{"code":)";
      out += std::to_string(status);
      out += R"(,"message":)";
      append_quoted(out, message);
      out += R"(,"type":)";
      append_quoted(out, type);
      out += "}}";
      break;
    case Flavour::kSglang:
    case Flavour::kTrtllm:
      out += R"({"object":"error",)";
      append_message_type_param(out, message, type, param);
      out += R"(,"code":)";
      out += std::to_string(status);
      out += "}";
      break;
    case Flavour::kMlx:
      out += R"({"error":{)";
      append_message_type_param(out, message, type, param);
      out += R"(,"code":null}})";
      break;
  }
  return out;
}

std::string render_models_body(Flavour f, std::string_view served_name, std::string_view root,
                               uint32_t max_model_len, int64_t created_unix) {
  std::string out = R"({"object":"list","data":[{"id":)";
  append_quoted(out, served_name);
  out += R"(,"object":"model","created":)";
  out += std::to_string(created_unix);
  const std::string_view owned_by = flavour_traits(f).owned_by;
  if (!owned_by.empty()) {
    out += R"(,"owned_by":)";
    append_quoted(out, owned_by);
  }
  switch (f) {
    case Flavour::kVllm:
      out += R"(,"root":)";
      append_quoted(out, root);
      out += R"(,"parent":null,"max_model_len":)";
      out += std::to_string(max_model_len);
      out += R"(,"permission":[{"id":"modelperm-sim","object":"model_permission","created":)";
      out += std::to_string(created_unix);
      out += R"(,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,)"
             R"("allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,)"
             R"("organization":"*","group":null,"is_blocking":false}])";
      break;
    case Flavour::kSglang:
      out += R"(,"root":)";
      append_quoted(out, root);
      out += R"(,"max_model_len":)";
      out += std::to_string(max_model_len);
      break;
    case Flavour::kLlamacpp:
      out += R"(,"meta":{"vocab_type":2,"n_vocab":128256,"n_ctx_train":)";
      out += std::to_string(max_model_len);
      out += R"(,"n_embd":4096,"n_params":8030261248,"size":16060522496})";
      break;
    case Flavour::kTrtllm:
    case Flavour::kMlx:
      break;
  }
  out += "}]}";
  return out;
}

}  // namespace cgn::sim
