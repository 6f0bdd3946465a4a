#include "router/stream_assembler.h"

#include <utility>

#include "core/json_bounds.h"

namespace cgn::router {

using nlohmann::ordered_json;

const char* to_string(AssembleError e) {
  switch (e) {
    case AssembleError::kMalformedEvent:
      return "malformed_event";
    case AssembleError::kWrongObject:
      return "wrong_object";
    case AssembleError::kTooLarge:
      return "too_large";
    case AssembleError::kTooManyItems:
      return "too_many_items";
    case AssembleError::kUpstreamError:
      return "upstream_error";
    case AssembleError::kAfterDone:
      return "after_done";
    case AssembleError::kIncomplete:
      return "incomplete";
  }
  return "unknown";
}

namespace {

// Sets `slot` to `value` unless the value is null (the last non-null value wins).
void keep_last(ordered_json& slot, ordered_json& value) {
  if (!value.is_null()) {
    slot = std::move(value);
  }
}

// An integer index in [0, bound), or nullopt.
std::optional<int64_t> index_of(const ordered_json& j, size_t bound) {
  auto it = j.find("index");
  if (it == j.end() || !it->is_number_integer()) {
    return std::nullopt;
  }
  const int64_t i = it->get<int64_t>();
  if (i < 0 || static_cast<uint64_t>(i) >= bound) {
    return std::nullopt;
  }
  return i;
}

// Sets `slot` from a string field of `j` when present and not null; false when it has another type.
bool take_string(const ordered_json& j, const char* key, std::optional<std::string>& slot) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return true;
  }
  if (!it->is_string()) {
    return false;
  }
  slot = it->get<std::string>();
  return true;
}

// Appends a string value to `text` in place (a long answer is never copied per event).
void append_text(std::optional<std::string>& text, const ordered_json& value) {
  if (!text) {
    text.emplace();
  }
  *text += value.get_ref<const std::string&>();
}

}  // namespace

Status<AssembleError> StreamAssembler::fail(AssembleError e, std::string message) {
  failed_ = make_error(e, std::move(message));
  return *failed_;
}

Status<AssembleError> StreamAssembler::add(std::string_view data) {
  if (failed_) {
    return *failed_;
  }
  if (done_) {
    return fail(AssembleError::kAfterDone, "an event arrived after [DONE]");
  }
  if (data == "[DONE]") {
    done_ = true;
    return Ok{};
  }
  bytes_ += data.size();
  if (bytes_ > limits_.max_total_bytes) {
    return fail(AssembleError::kTooLarge,
                "the stream is larger than " + std::to_string(limits_.max_total_bytes) + " bytes");
  }
  if (!json_within_bounds(data, limits_.max_total_bytes, limits_.max_json_depth)) {
    return fail(AssembleError::kTooLarge,
                "an event nests deeper than " + std::to_string(limits_.max_json_depth));
  }
  ordered_json chunk = ordered_json::parse(data, nullptr, false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    return fail(AssembleError::kMalformedEvent, "an event is not a JSON object");
  }
  return add_chunk(chunk);
}

Status<AssembleError> StreamAssembler::add_chunk(ordered_json& chunk) {
  if (auto err = chunk.find("error"); err != chunk.end() && !err->is_null()) {
    std::string message = "the engine failed mid-stream";
    if (err->is_object() && err->contains("message") && (*err)["message"].is_string()) {
      message = (*err)["message"].get<std::string>();
    }
    return fail(AssembleError::kUpstreamError, std::move(message));
  }
  if (auto s = add_top(chunk); !s) {
    return s;
  }
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || choices->is_null()) {
    return Ok{};
  }
  if (!choices->is_array()) {
    return fail(AssembleError::kMalformedEvent, "'choices' is not an array");
  }
  for (ordered_json& choice : *choices) {
    if (auto s = add_choice(choice); !s) {
      return s;
    }
  }
  return Ok{};
}

Status<AssembleError> StreamAssembler::add_top(ordered_json& chunk) {
  auto object = chunk.find("object");
  if (object == chunk.end() || !object->is_string()) {
    return fail(AssembleError::kWrongObject, "a chunk has no 'object'");
  }
  const std::string kind = object->get<std::string>();
  if (kind != "chat.completion.chunk" && kind != "text_completion") {
    return fail(AssembleError::kWrongObject,
                "'object' is '" + kind.substr(0, 64) + "', not a completion chunk");
  }
  const bool chat = kind == "chat.completion.chunk";
  if (seen_chunk_ && chat != chat_) {
    return fail(AssembleError::kWrongObject, "chat and completion chunks mixed in one stream");
  }
  if (!seen_chunk_) {
    seen_chunk_ = true;
    chat_ = chat;
    head_["id"] = chunk.value("id", ordered_json());
    head_["object"] = chat ? "chat.completion" : "text_completion";
    head_["created"] = chunk.value("created", ordered_json());
    head_["model"] = chunk.value("model", ordered_json());
  }
  for (auto& [key, value] : chunk.items()) {
    if (key == "id" || key == "object" || key == "created" || key == "model" || key == "choices") {
      continue;
    }
    if (key == "usage") {
      if (!value.is_null() && !value.is_object()) {
        return fail(AssembleError::kMalformedEvent, "'usage' is not an object");
      }
      keep_last(usage_, value);
      continue;
    }
    if (!value.is_null()) {
      extra_[key] = std::move(value);
    }
  }
  return Ok{};
}

Status<AssembleError> StreamAssembler::add_choice(ordered_json& choice) {
  if (!choice.is_object()) {
    return fail(AssembleError::kMalformedEvent, "a choice is not an object");
  }
  const std::optional<int64_t> index = index_of(choice, limits_.max_choices);
  if (!index) {
    return fail(AssembleError::kTooManyItems,
                "a choice has no index in 0.." + std::to_string(limits_.max_choices - 1));
  }
  ChoiceState& c = choices_[*index];
  for (auto& [key, value] : choice.items()) {
    if (key == "index") {
      continue;
    }
    Status<AssembleError> s = Ok{};
    if (key == "delta" && chat_) {
      if (!value.is_null() && !value.is_object()) {
        return fail(AssembleError::kMalformedEvent, "'delta' is not an object");
      }
      s = value.is_object() ? add_delta(c, value) : Status<AssembleError>(Ok{});
    } else if (key == "text" && !chat_) {
      if (!value.is_string()) {
        return fail(AssembleError::kMalformedEvent, "'text' is not a string");
      }
      append_text(c.text, value);
    } else if (key == "logprobs") {
      s = add_logprobs(c, value);
    } else if (key == "finish_reason") {
      keep_last(c.finish_reason, value);
    } else {
      if (c.extra.is_null()) {
        c.extra = ordered_json::object();
      }
      if (!value.is_null() || !c.extra.contains(key)) {
        c.extra[key] = std::move(value);
      }
    }
    if (!s) {
      return s;
    }
  }
  return Ok{};
}

Status<AssembleError> StreamAssembler::add_delta(ChoiceState& c, ordered_json& delta) {
  for (auto& [key, value] : delta.items()) {
    if (key == "role") {
      std::optional<std::string> role;
      if (!take_string(delta, "role", role)) {
        return fail(AssembleError::kMalformedEvent, "'delta.role' is not a string");
      }
      c.role = role.value_or(c.role);
    } else if (key == "content") {
      if (value.is_string()) {
        append_text(c.text, value);
      } else if (!value.is_null()) {
        return fail(AssembleError::kMalformedEvent, "'delta.content' is not a string");
      }
    } else if (key == "tool_calls") {
      if (value.is_null()) {
        continue;
      }
      if (!value.is_array()) {
        return fail(AssembleError::kMalformedEvent, "'delta.tool_calls' is not an array");
      }
      for (ordered_json& fragment : value) {
        if (auto s = add_tool_call(c, fragment); !s) {
          return s;
        }
      }
    } else if (value.is_string()) {
      if (c.extra_delta.is_null()) {
        c.extra_delta = ordered_json::object();
      }
      ordered_json& slot = c.extra_delta[key];
      if (!slot.is_string()) {
        slot = "";
      }
      slot.get_ref<std::string&>() += value.get_ref<const std::string&>();
    } else if (!value.is_null()) {
      if (c.extra_delta.is_null()) {
        c.extra_delta = ordered_json::object();
      }
      c.extra_delta[key] = std::move(value);
    }
  }
  return Ok{};
}

Status<AssembleError> StreamAssembler::add_tool_call(ChoiceState& c, ordered_json& fragment) {
  if (!fragment.is_object()) {
    return fail(AssembleError::kMalformedEvent, "a tool call fragment is not an object");
  }
  const std::optional<int64_t> index = index_of(fragment, limits_.max_tool_calls);
  if (!index) {
    return fail(AssembleError::kTooManyItems,
                "a tool call fragment has no index in 0.." + std::to_string(limits_.max_tool_calls - 1));
  }
  ToolCallState& t = c.tool_calls[*index];
  if (!take_string(fragment, "id", t.id) || !take_string(fragment, "type", t.type)) {
    return fail(AssembleError::kMalformedEvent, "a tool call's 'id' or 'type' is not a string");
  }
  auto fn = fragment.find("function");
  if (fn == fragment.end() || fn->is_null()) {
    return Ok{};
  }
  if (!fn->is_object() || !take_string(*fn, "name", t.name)) {
    return fail(AssembleError::kMalformedEvent, "a tool call's 'function' or its name is malformed");
  }
  std::optional<std::string> arguments;
  if (!take_string(*fn, "arguments", arguments)) {
    return fail(AssembleError::kMalformedEvent, "a tool call's 'function.arguments' is not a string");
  }
  t.arguments += arguments.value_or("");
  return Ok{};
}

Status<AssembleError> StreamAssembler::add_logprobs(ChoiceState& c, ordered_json& logprobs) {
  if (logprobs.is_null()) {
    return Ok{};
  }
  if (!logprobs.is_object()) {
    return fail(AssembleError::kMalformedEvent, "'logprobs' is not an object");
  }
  if (c.logprobs.is_null()) {
    c.logprobs = ordered_json::object();
  }
  for (auto& [key, value] : logprobs.items()) {
    ordered_json& slot = c.logprobs[key];
    if (value.is_array()) {
      if (!slot.is_array()) {
        slot = ordered_json::array();
      }
      for (ordered_json& v : value) {
        slot.push_back(std::move(v));
      }
    } else if (!value.is_null() || slot.is_null()) {
      slot = std::move(value);
    }
  }
  return Ok{};
}

ordered_json StreamAssembler::render_choice(int64_t index, const ChoiceState& c) const {
  ordered_json out = ordered_json::object();
  out["index"] = index;
  if (chat_) {
    ordered_json message = ordered_json::object();
    message["role"] = c.role.empty() ? "assistant" : c.role;
    message["content"] = c.text ? ordered_json(*c.text) : ordered_json();
    if (c.extra_delta.is_object()) {
      for (const auto& [key, value] : c.extra_delta.items()) {
        message[key] = value;
      }
    }
    ordered_json calls = ordered_json::array();
    for (const auto& [i, t] : c.tool_calls) {
      calls.push_back({{"id", t.id ? ordered_json(*t.id) : ordered_json()},
                       {"type", t.type.value_or("function")},
                       {"function", {{"name", t.name.value_or("")}, {"arguments", t.arguments}}}});
    }
    message["tool_calls"] = std::move(calls);
    out["message"] = std::move(message);
  } else {
    out["text"] = c.text.value_or("");
  }
  out["logprobs"] = c.logprobs;
  out["finish_reason"] = c.finish_reason;
  if (c.extra.is_object()) {
    for (const auto& [key, value] : c.extra.items()) {
      out[key] = value;
    }
  }
  return out;
}

Result<ordered_json, AssembleError> StreamAssembler::finish_json() const {
  if (failed_) {
    return *failed_;
  }
  if (!seen_chunk_) {
    return make_error(AssembleError::kIncomplete, "the stream ended before its first chunk");
  }
  ordered_json out = head_;
  ordered_json choices = ordered_json::array();
  for (const auto& [index, c] : choices_) {
    choices.push_back(render_choice(index, c));
  }
  out["choices"] = std::move(choices);
  for (const auto& [key, value] : extra_.items()) {
    out[key] = value;
  }
  out["usage"] = usage_;
  return out;
}

Result<std::string, AssembleError> StreamAssembler::finish() const {
  auto j = finish_json();
  if (!j) {
    return j.error();
  }
  return j->dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

}  // namespace cgn::router
