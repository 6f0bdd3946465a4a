#include "router/grpc_api/translate.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "core/tls/grpc_status.h"

namespace cgn::router::grpc_api {

namespace v1 = cognitora::v1;
using nlohmann::json;

namespace {

// The OpenAI fields extensions_json may carry (everything else has a typed field, or is the
// router's own: stream, stream_options, kv_transfer_params).
constexpr std::array<std::string_view, 7> kExtensionKeys = {
    "tools",    "tool_choice",  "parallel_tool_calls", "response_format",
    "logprobs", "top_logprobs", "logit_bias"};

Error<TranslateError> invalid(std::string message) {
  return make_error(TranslateError::kInvalid, std::move(message));
}

Result<json, TranslateError> chat_messages(const v1::GenerateRequest& req) {
  json out = json::array();
  for (int i = 0; i < req.messages_size(); ++i) {
    const auto& m = req.messages(i);
    json msg = {{"role", m.role()}, {"content", m.content()}};
    if (!m.name().empty()) {
      msg["name"] = m.name();
    }
    if (!m.tool_call_id().empty()) {
      msg["tool_call_id"] = m.tool_call_id();
    }
    if (!m.tool_calls_json().empty()) {
      auto calls = json::parse(m.tool_calls_json(), nullptr, false);
      if (!calls.is_array()) {
        return invalid(fmt::format("messages[{}].tool_calls_json must be a JSON array", i));
      }
      msg["tool_calls"] = std::move(calls);
    }
    out.push_back(std::move(msg));
  }
  return out;
}

Status<TranslateError> merge_extensions(const std::string& text, json& body) {
  if (text.empty()) {
    return Ok{};
  }
  auto ext = json::parse(text, nullptr, false);
  if (!ext.is_object()) {
    return invalid("extensions_json must be a JSON object");
  }
  for (auto& [key, value] : ext.items()) {
    if (std::find(kExtensionKeys.begin(), kExtensionKeys.end(), key) == kExtensionKeys.end()) {
      return invalid(
          fmt::format("extensions_json: '{}' is not one of tools, tool_choice, parallel_tool_calls, "
                      "response_format, logprobs, top_logprobs, logit_bias",
                      key));
    }
    body[key] = value;
  }
  return Ok{};
}

std::string string_or_empty(const json& j, std::string_view key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void set_usage(const json& j, v1::GenerateResponse& out) {
  auto it = j.find("usage");
  if (it == j.end() || !it->is_object()) {
    return;
  }
  auto n = [&](const char* key) -> uint64_t {
    auto f = it->find(key);
    return f != it->end() && f->is_number_unsigned() ? f->get<uint64_t>() : 0;
  };
  auto* u = out.mutable_usage();
  u->set_prompt_tokens(n("prompt_tokens"));
  u->set_completion_tokens(n("completion_tokens"));
  u->set_total_tokens(n("total_tokens"));
}

void add_tool_call(const json& call, uint32_t fallback_index, v1::GenerateResponse& out) {
  if (!call.is_object()) {
    return;
  }
  auto* tc = out.add_tool_calls();
  auto idx = call.find("index");
  tc->set_index(idx != call.end() && idx->is_number_unsigned() ? idx->get<uint32_t>() : fallback_index);
  tc->set_id(string_or_empty(call, "id"));
  if (auto fn = call.find("function"); fn != call.end() && fn->is_object()) {
    tc->set_name(string_or_empty(*fn, "name"));
    tc->set_arguments(string_or_empty(*fn, "arguments"));
  }
}

// choices[0] of a chunk or a body; null when there is none.
const json* first_choice(const json& j) {
  auto it = j.find("choices");
  if (it == j.end() || !it->is_array() || it->empty() || !(*it)[0].is_object()) {
    return nullptr;
  }
  return &(*it)[0];
}

// The first choice's text, tool calls and finish reason into `out`; `part` is "delta" (a chat
// stream event) or "message" (a chat answer); a completions choice carries "text".
void fill_choice(const json& j, const char* part, v1::GenerateResponse& out) {
  const json* c = first_choice(j);
  if (c == nullptr) {
    return;
  }
  if (auto m = c->find(part); m != c->end() && m->is_object()) {
    out.set_text(string_or_empty(*m, "content"));
    if (auto calls = m->find("tool_calls"); calls != m->end() && calls->is_array()) {
      for (size_t i = 0; i < calls->size(); ++i) {
        add_tool_call((*calls)[i], static_cast<uint32_t>(i), out);
      }
    }
  } else {
    out.set_text(string_or_empty(*c, "text"));
  }
  out.set_finish_reason(string_or_empty(*c, "finish_reason"));
}

bool carries_something(const v1::GenerateResponse& r) {
  return !r.text().empty() || r.tool_calls_size() > 0 || !r.finish_reason().empty() || r.has_usage();
}

}  // namespace

Result<HttpCall, TranslateError> to_http(const v1::GenerateRequest& req, int64_t grpc_deadline_ms) {
  const bool chat = req.messages_size() > 0;
  if (chat == !req.prompt().empty()) {
    return invalid(chat ? "set messages or prompt, not both" : "set messages (chat) or prompt (completions)");
  }
  json body = {{"model", req.model()}};
  if (chat) {
    auto messages = chat_messages(req);
    if (!messages) {
      return messages.error();
    }
    body["messages"] = std::move(*messages);
  } else {
    body["prompt"] = req.prompt();
  }
  if (req.has_max_tokens()) {
    body["max_tokens"] = req.max_tokens();
  }
  if (req.has_temperature()) {
    body["temperature"] = req.temperature();
  }
  if (req.has_top_p()) {
    body["top_p"] = req.top_p();
  }
  if (req.stop_size() > 0) {
    body["stop"] = std::vector<std::string>(req.stop().begin(), req.stop().end());
  }
  if (req.has_seed()) {
    body["seed"] = req.seed();
  }
  if (req.has_presence_penalty()) {
    body["presence_penalty"] = req.presence_penalty();
  }
  if (req.has_frequency_penalty()) {
    body["frequency_penalty"] = req.frequency_penalty();
  }
  if (!req.user().empty()) {
    body["user"] = req.user();
  }
  if (auto st = merge_extensions(req.extensions_json(), body); !st) {
    return st.error();
  }
  if (!req.buffered()) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  HttpCall call;
  call.path = chat ? "/v1/chat/completions" : "/v1/completions";
  call.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!req.priority().empty()) {
    call.headers.emplace_back("X-CGN-Priority", req.priority());
  }
  int64_t deadline = req.deadline_ms();
  if (grpc_deadline_ms > 0 && (deadline == 0 || grpc_deadline_ms < deadline)) {
    deadline = grpc_deadline_ms;
  }
  if (deadline > 0) {
    call.headers.emplace_back("X-CGN-Deadline-Ms", std::to_string(deadline));
  }
  return call;
}

Result<std::optional<v1::GenerateResponse>, grpc::StatusCode> from_chunk(std::string_view data) {
  if (data == "[DONE]") {
    return std::optional<v1::GenerateResponse>{};
  }
  auto j = json::parse(data, nullptr, false);
  if (!j.is_object()) {
    return make_error(grpc::StatusCode::INTERNAL, "the router's stream carried an event that is not JSON");
  }
  if (auto err = j.find("error"); err != j.end()) {
    const std::string message = err->is_object() ? string_or_empty(*err, "message") : std::string();
    return make_error(grpc::StatusCode::UNAVAILABLE,
                      message.empty() ? std::string("the stream failed after it began") : message);
  }
  v1::GenerateResponse out;
  fill_choice(j, "delta", out);
  set_usage(j, out);
  if (!carries_something(out)) {
    return std::optional<v1::GenerateResponse>{};
  }
  return std::optional<v1::GenerateResponse>{std::move(out)};
}

Result<v1::GenerateResponse, grpc::StatusCode> from_body(std::string_view body) {
  auto j = json::parse(body, nullptr, false);
  if (!j.is_object()) {
    return make_error(grpc::StatusCode::INTERNAL, "the router's answer is not JSON");
  }
  v1::GenerateResponse out;
  fill_choice(j, "message", out);
  set_usage(j, out);
  return out;
}

grpc::StatusCode code_for_http(unsigned http_status) {
  switch (http_status) {
    case 400:
    case 413:
    case 422:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case 401:
      return grpc::StatusCode::UNAUTHENTICATED;
    case 403:
      return grpc::StatusCode::PERMISSION_DENIED;
    case 404:
      return grpc::StatusCode::NOT_FOUND;
    case 408:
    case 504:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case 429:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case 499:
      return grpc::StatusCode::CANCELLED;
    case 501:
      return grpc::StatusCode::UNIMPLEMENTED;
    case 502:
    case 503:
      return grpc::StatusCode::UNAVAILABLE;
    default:
      return http_status >= 500 ? grpc::StatusCode::INTERNAL : grpc::StatusCode::UNKNOWN;
  }
}

grpc::Status status_for_http(unsigned http_status, std::string_view body) {
  auto j = json::parse(body, nullptr, false);
  std::string message;
  grpc::StatusCode code = code_for_http(http_status);
  if (j.is_object()) {
    if (auto err = j.find("error"); err != j.end() && err->is_object()) {
      message = string_or_empty(*err, "message");
      // Deadline admission answers 429 with code deadline_exceeded: the deadline, not a quota.
      if (string_or_empty(*err, "code") == "deadline_exceeded") {
        code = grpc::StatusCode::DEADLINE_EXCEEDED;
      }
    }
  }
  if (message.empty()) {
    message = fmt::format("HTTP {}: {}", http_status, body.substr(0, 200));
  }
  return {code, message};
}

std::string_view code_name(grpc::StatusCode code) {
  return tls::grpc_status_name(code);
}

std::string remote_of_peer(std::string_view peer) {
  if (peer.starts_with("ipv4:")) {
    return std::string(peer.substr(5));
  }
  if (!peer.starts_with("ipv6:")) {
    return std::string(peer);
  }
  std::string out;
  for (size_t i = 5; i < peer.size(); ++i) {
    if (peer.substr(i).starts_with("%5B") || peer.substr(i).starts_with("%5D") ||
        peer.substr(i).starts_with("%5b") || peer.substr(i).starts_with("%5d")) {
      i += 2;
    } else if (peer[i] != '[' && peer[i] != ']') {
      out += peer[i];
    }
  }
  return out;
}

}  // namespace cgn::router::grpc_api
