#include "router/responses.h"

#include <nlohmann/json.hpp>

#include "core/json_bounds.h"
#include "router/coro_warnings.h"

namespace cgn::router {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

Error<RequestError> bad(RequestError code, std::string message) {
  return make_error(code, std::move(message));
}

// A content part of a Responses message in chat's form.
json chat_part(const json& part) {
  const std::string type = part.is_object() ? part.value("type", "") : "";
  if (type == "input_text" || type == "output_text") {
    return {{"type", "text"}, {"text", part.value("text", json())}};
  }
  if (type == "input_image") {
    return {{"type", "image_url"}, {"image_url", {{"url", part.value("image_url", json())}}}};
  }
  return part;
}

json chat_message(const json& item) {
  json m = {{"role", item.value("role", json())}};
  const json content = item.value("content", json());
  if (content.is_array()) {
    json parts = json::array();
    for (const auto& p : content) {
      parts.push_back(chat_part(p));
    }
    m["content"] = std::move(parts);
  } else {
    m["content"] = content;
  }
  return m;
}

// `input` items as chat messages; consecutive function_call items share one assistant message.
Result<json, RequestError> chat_messages(const json& input, json messages) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return messages;
  }
  if (!input.is_array()) {
    return bad(RequestError::kWrongType, "'input' must be a string or an array of items");
  }
  bool open_calls = false;  // the last message is an assistant message made of function_call items
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string where = "'input[" + std::to_string(i) + "]";
    if (!item.is_object()) {
      return bad(RequestError::kWrongType, where + "' must be an object");
    }
    const std::string type = item.value("type", item.contains("role") ? "message" : "");
    if (type == "function_call") {
      if (!item.value("call_id", json()).is_string() || !item.value("name", json()).is_string() ||
          !item.value("arguments", json()).is_string()) {
        return bad(RequestError::kWrongType, where + ".call_id', 'name' and 'arguments' must be strings");
      }
      if (!open_calls) {
        messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array()}});
        open_calls = true;
      }
      messages.back()["tool_calls"].push_back(
          {{"id", item["call_id"]},
           {"type", "function"},
           {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
      continue;
    }
    open_calls = false;
    if (type == "function_call_output") {
      if (!item.value("call_id", json()).is_string()) {
        return bad(RequestError::kWrongType, where + ".call_id' must be a string");
      }
      messages.push_back(
          {{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", item.value("output", json())}});
    } else if (type == "message") {
      messages.push_back(chat_message(item));
    } else if (type != "reasoning") {
      return bad(RequestError::kInvalidValue, where + ".type' '" + type.substr(0, 64) + "' is not supported");
    }
  }
  return messages;
}

// Responses tools ({"type":"function","name",...}) in chat's nesting; other tools as they are.
json chat_tools(const json& tools) {
  if (!tools.is_array()) {
    return tools;
  }
  json out = json::array();
  for (const auto& t : tools) {
    if (!t.is_object() || t.value("type", "") != "function" || t.contains("function")) {
      out.push_back(t);
      continue;
    }
    json fn = json::object();
    for (const char* key : {"name", "description", "parameters", "strict"}) {
      if (t.contains(key)) {
        fn[key] = t[key];
      }
    }
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

json chat_tool_choice(const json& choice) {
  if (choice.is_object() && choice.value("type", "") == "function" && choice.contains("name")) {
    return {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  }
  return choice;
}

ApiError node_gone(const std::string& response_id) {
  return bad_request("The node that holds response '" + response_id.substr(0, 256) +
                         "' is gone; send the whole conversation as 'input' without 'previous_response_id'.",
                     "previous_response_id", "previous_response_not_found");
}

}  // namespace

Result<ResponsesRequest, RequestError> translate_responses_request(std::string_view body,
                                                                   const RequestLimits& limits) {
  if (body.size() > limits.max_body_bytes) {
    return bad(RequestError::kTooLarge,
               "the request body is over the limit of " + std::to_string(limits.max_body_bytes) + " bytes");
  }
  if (!json_within_bounds(body, limits.max_body_bytes, limits.max_json_depth)) {
    return bad(RequestError::kTooDeep,
               "the request body nests deeper than " + std::to_string(limits.max_json_depth));
  }
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return bad(RequestError::kMalformedJson, "the request body is not a JSON object");
  }
  ResponsesRequest out;
  if (auto prev = j.find("previous_response_id"); prev != j.end() && !prev->is_null()) {
    if (!prev->is_string() || prev->get_ref<const std::string&>().empty()) {
      return bad(RequestError::kWrongType, "'previous_response_id' must be a non-empty string");
    }
    out.previous_response_id = prev->get<std::string>();
  }
  json messages = json::array();
  if (auto ins = j.find("instructions"); ins != j.end() && !ins->is_null()) {
    if (!ins->is_string()) {
      return bad(RequestError::kWrongType, "'instructions' must be a string");
    }
    messages.push_back({{"role", "system"}, {"content", *ins}});
  }
  if (!j.contains("input")) {
    return bad(RequestError::kMissingField, "'input' is required");
  }
  auto msgs = chat_messages(j["input"], std::move(messages));
  if (!msgs) {
    return msgs.error();
  }
  json chat = {{"model", j.value("model", json())}, {"messages", std::move(*msgs)}};
  for (const char* key :
       {"stream", "prompt_cache_key", "user", "kv_transfer_params", "temperature", "top_p"}) {
    if (j.contains(key)) {
      chat[key] = j[key];
    }
  }
  if (j.contains("tools")) {
    chat["tools"] = chat_tools(j["tools"]);
  }
  if (j.contains("tool_choice")) {
    chat["tool_choice"] = chat_tool_choice(j["tool_choice"]);
  }
  if (j.contains("max_output_tokens")) {
    chat["max_tokens"] = j["max_output_tokens"];
  }
  out.chat_body = chat.dump(-1, ' ', false, json::error_handler_t::replace);
  return out;
}

std::string response_id_in(std::string_view data) {
  if (data.find("resp") == std::string_view::npos) {
    return {};
  }
  const json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return {};
  }
  const json* r = &j;
  if (j.value("type", "") == "response.created" && j.contains("response")) {
    r = &j["response"];
  }
  if (!r->is_object() || r->value("object", "") != "response") {
    return {};
  }
  const json id = r->value("id", json());
  return id.is_string() ? id.get<std::string>().substr(0, 256) : std::string();
}

void ResponseAffinity::learn(std::string_view response_id, std::string_view node) {
  if (response_id.empty() || capacity_ == 0) {
    return;
  }
  std::lock_guard lock(mu_);
  if (auto it = by_id_.find(response_id); it != by_id_.end()) {
    order_.erase(it->second);
    by_id_.erase(it);
  }
  while (order_.size() >= capacity_) {
    by_id_.erase(order_.front().id);
    order_.pop_front();
  }
  order_.push_back(Entry{std::string(response_id), std::string(node), clock_.now()});
  by_id_.emplace(order_.back().id, std::prev(order_.end()));
}

std::optional<std::string> ResponseAffinity::node_of(std::string_view response_id) const {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(response_id);
  if (it == by_id_.end() || clock_.now() - it->second->learned > ttl_) {
    return std::nullopt;
  }
  return it->second->node;
}

size_t ResponseAffinity::size() const {
  std::lock_guard lock(mu_);
  return order_.size();
}

asio::awaitable<void> ResponsesPlan::serve(RequestContext& ctx, Dispatcher& d) {
  ctx.role = routing::RoleWanted::kAny;
  const Dispatcher::Step step;  // role both, the client's body, relayed
  std::optional<std::string> node;
  if (!previous_.empty() && s_.responses != nullptr) {
    node = s_.responses->node_of(previous_);
  }
  if (!node) {
    co_await serve_ranked(ctx, d, s_, step, /*decode_order=*/false);
    co_return;
  }
  std::optional<Target> target =
      s_.nodes.locked([&](auto&, const NodeTable::Nodes& nodes) -> std::optional<Target> {
        auto it = nodes.find(*node);
        if (it == nodes.end() || it->second.refused_at) {
          return std::nullopt;
        }
        return Target{it->second.name, it->second.endpoint, it->second.index};
      });
  if (!target) {
    co_await answer_error(ctx, s_.metrics, node_gone(previous_));
    co_return;
  }
  const std::vector<Target> targets{*target};
  Dispatcher::Outcome out = co_await d.run(ctx, step, targets);
  if (out.kind != Dispatcher::Outcome::Kind::kFailed) {
    co_return;
  }
  if (!out.answer && out.last_error == http::HttpError::connect_failed) {
    co_await answer_error(ctx, s_.metrics, node_gone(previous_));  // it left since the lookup
    co_return;
  }
  co_await d.answer_failure(ctx, out);
}

}  // namespace cgn::router
