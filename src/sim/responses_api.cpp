#include "sim/responses_api.h"

#include <nlohmann/json.hpp>

#include "sim/image_tokens.h"

namespace cgn::sim {

namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

Error<BodyError> bad(const std::string& field, std::string_view want) {
  return make_error(BodyError::kBadField, "'" + field + "' " + std::string(want));
}

// A Responses message's content as chat text: input_text/output_text parts as text, input_image
// parts as the engine's image placeholder (image_tokens.h), others ignored as chat's are.
Result<std::string, BodyError> item_text(const json& c, const std::string& where, size_t& images) {
  if (c.is_string()) {
    return c.get<std::string>();
  }
  if (!c.is_array()) {
    return bad(where + ".content", "must be a string or an array of parts");
  }
  std::string out;
  for (const json& part : c) {
    if (!part.is_object()) {
      return bad(where + ".content[]", "must be an object");
    }
    const json type = part.value("type", json());
    if (type == "input_text" || type == "output_text" || type == "text") {
      auto t = part.find("text");
      if (t == part.end() || !t->is_string()) {
        return bad(where + ".content[].text", "must be a string");
      }
      out += t->get_ref<const std::string&>();
    } else if (type == "input_image") {
      if (++images > kMaxImagesPerPrompt) {
        return bad(where + ".content[]", "holds more than 16 images (vLLM's --limit-mm-per-prompt here)");
      }
      const json chat_part = {{"type", "image_url"},
                              {"image_url", {{"url", part.value("image_url", json())}}}};
      if (auto r = append_image_placeholder(chat_part, out); !r) {
        return make_error(BodyError::kBadField, std::move(r.error().message));
      }
    }
  }
  return out;
}

Result<std::vector<ChatMessage>, BodyError> input_messages(const json& in) {
  std::vector<ChatMessage> out;
  if (in.is_string()) {
    out.push_back({"user", in.get<std::string>()});
    return out;
  }
  if (!in.is_array()) {
    return bad("input", "must be a string or an array of items");
  }
  if (in.size() > kMaxMessages) {
    return make_error(BodyError::kTooLarge, "'input' has more than 4096 items");
  }
  size_t images = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const json& item = in[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) {
      return bad(where, "must be an object");
    }
    const json type = item.value("type", json("message"));
    if (type == "reasoning") {
      continue;  // not part of a chat prompt
    }
    if (type != "message") {
      const std::string t = type.is_string() ? type.get<std::string>().substr(0, 64) : "?";
      return bad(where + ".type",
                 "'" + t + "' is not supported (tool use needs Harmony in vLLM's Responses API)");
    }
    auto role = item.find("role");
    if (role == item.end() || !role->is_string()) {
      return bad(where + ".role", "must be a string");
    }
    auto content = item.find("content");
    if (content == item.end()) {
      return bad(where + ".content", "is required");
    }
    auto text = item_text(*content, where, images);
    if (!text) {
      return text.error();
    }
    out.push_back({role->get<std::string>(), std::move(*text)});
  }
  return out;
}

Result<double, BodyError> read_number(const json& j, const char* key, double dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return dflt;
  }
  if (!it->is_number()) {
    return bad(key, "must be a number");
  }
  return it->get<double>();
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

size_t stored_bytes(const std::string& id, const StoredResponse& r) {
  size_t n = id.size() + r.output_text.size();
  for (const auto& m : r.messages) {
    n += m.role.size() + m.content.size();
  }
  return n;
}

ojson usage_json(const Usage& u) {
  return ojson{{"input_tokens", u.prompt_tokens},
               {"input_tokens_details",
                {{"cached_tokens", u.cached_tokens},
                 {"input_tokens_per_turn", json::array()},
                 {"cached_tokens_per_turn", json::array()}}},
               {"output_tokens", u.completion_tokens},
               {"output_tokens_details",
                {{"reasoning_tokens", 0},
                 {"tool_output_tokens", 0},
                 {"output_tokens_per_turn", json::array()},
                 {"tool_output_tokens_per_turn", json::array()}}},
               {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

ojson output_text_part(std::string_view text, bool with_logprobs) {
  ojson p = {{"annotations", json::array()}, {"text", text}, {"type", "output_text"}};
  p["logprobs"] = with_logprobs ? ojson::array() : ojson();
  return p;
}

std::string dump(const ojson& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

Result<ResponsesBody, BodyError> parse_responses_body(std::string_view body) {
  if (body.size() > kMaxBodyBytes) {
    return make_error(BodyError::kTooLarge, "request body is larger than 32 MiB");
  }
  const json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return make_error(BodyError::kInvalidJson, "request body is not valid JSON");
  }
  if (!j.is_object()) {
    return make_error(BodyError::kInvalidJson, "request body must be a JSON object");
  }
  ResponsesBody b;
  if (auto m = j.find("model"); m != j.end() && !m->is_null()) {
    if (!m->is_string()) {
      return bad("model", "must be a string");
    }
    b.model = m->get<std::string>();
  }
  if (auto ins = j.find("instructions"); ins != j.end() && !ins->is_null()) {
    if (!ins->is_string()) {
      return bad("instructions", "must be a string");
    }
    b.instructions = ins->get<std::string>();
  }
  auto in = j.find("input");
  if (in == j.end()) {
    return bad("input", "is required");
  }
  auto msgs = input_messages(*in);
  if (!msgs) {
    return msgs.error();
  }
  b.input = std::move(*msgs);
  if (auto p = j.find("previous_response_id"); p != j.end() && !p->is_null()) {
    if (!p->is_string() || p->get_ref<const std::string&>().empty()) {
      return bad("previous_response_id", "must be a non-empty string");
    }
    b.previous_response_id = p->get<std::string>();
  }
  for (auto [key, out] : {std::pair{"store", &b.store}, std::pair{"stream", &b.stream}}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      continue;
    }
    if (!it->is_boolean()) {
      return bad(key, "must be a boolean");
    }
    *out = it->get<bool>();
  }
  if (auto t = j.find("tools"); t != j.end() && !t->is_null()) {
    if (!t->is_array()) {
      return bad("tools", "must be an array");
    }
    b.has_tools = !t->empty();
  }
  if (auto mo = j.find("max_output_tokens"); mo != j.end() && !mo->is_null()) {
    if (!mo->is_number_integer() || mo->get<int64_t>() <= 0 || mo->get<int64_t>() > 0xffffffffLL) {
      return bad("max_output_tokens", "must be a positive integer");
    }
    b.max_output_tokens = static_cast<uint32_t>(mo->get<int64_t>());
  }
  if (auto sd = j.find("seed"); sd != j.end() && !sd->is_null()) {
    if (!sd->is_number_integer()) {
      return bad("seed", "must be an integer");
    }
    b.seed = static_cast<uint64_t>(sd->get<int64_t>());
  }
  auto temperature = read_number(j, "temperature", 1.0);
  if (!temperature) {
    return temperature.error();
  }
  b.temperature = *temperature;
  auto top_p = read_number(j, "top_p", 1.0);
  if (!top_p) {
    return top_p.error();
  }
  b.top_p = *top_p;
  return b;
}

void ResponseStore::put(std::string id, StoredResponse r) {
  const size_t n = stored_bytes(id, r);
  if (n > max_bytes_ || max_entries_ == 0) {
    return;
  }
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    bytes_ -= it->second->bytes;
    order_.erase(it->second);
    by_id_.erase(it);
  }
  while (!order_.empty() && (order_.size() >= max_entries_ || bytes_ + n > max_bytes_)) {
    bytes_ -= order_.front().bytes;
    by_id_.erase(order_.front().id);
    order_.pop_front();
  }
  order_.push_back(Entry{std::move(id), std::move(r), n});
  bytes_ += n;
  by_id_.emplace(order_.back().id, std::prev(order_.end()));
}

const StoredResponse* ResponseStore::find(std::string_view id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second->value;
}

std::vector<ChatMessage> responses_conversation(const ResponsesBody& b, const StoredResponse* previous) {
  std::vector<ChatMessage> out;
  if (b.instructions && !b.instructions->empty()) {
    out.push_back({"system", *b.instructions});
  }
  if (previous != nullptr) {
    out.insert(out.end(), previous->messages.begin(), previous->messages.end());
    if (!previous->output_text.empty()) {
      out.push_back({"assistant", previous->output_text});
    }
  }
  out.insert(out.end(), b.input.begin(), b.input.end());
  return out;
}

std::string response_not_found_message(std::string_view id) {
  return "Response with id '" + std::string(id.substr(0, 256)) + "' not found.";
}

std::string hex_id(uint64_t salt, uint64_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(32, '0');
  uint64_t words[2] = {mix(salt ^ mix(n)), mix(n ^ mix(salt + 1))};
  for (size_t i = 0; i < 32; ++i) {
    out[i] = kHex[(words[i / 16] >> ((i % 16) * 4)) & 0xf];
  }
  return out;
}

namespace {

ojson response_json(const ResponseObjectMeta& m, const Completion* c) {
  ojson r = {{"id", m.id},
             {"created_at", m.created_at},
             {"incomplete_details", nullptr},
             {"instructions", m.instructions ? ojson(*m.instructions) : ojson()},
             {"metadata", nullptr},
             {"model", m.model},
             {"object", "response"}};
  ojson output = ojson::array();
  if (c != nullptr && !c->text.empty()) {
    output.push_back({{"id", m.message_id},
                      {"content", ojson::array({output_text_part(c->text, false)})},
                      {"role", "assistant"},
                      {"status", "completed"},
                      {"type", "message"}});
  }
  r["output"] = std::move(output);
  r["parallel_tool_calls"] = true;
  r["temperature"] = m.temperature;
  r["tool_choice"] = "auto";
  r["tools"] = ojson::array();
  r["top_p"] = m.top_p;
  r["background"] = false;
  r["max_output_tokens"] = m.max_output_tokens;
  r["max_tool_calls"] = nullptr;
  r["previous_response_id"] = m.previous_response_id.empty() ? ojson() : ojson(m.previous_response_id);
  r["prompt"] = nullptr;
  r["reasoning"] = nullptr;
  r["service_tier"] = "auto";
  r["status"] = c != nullptr ? "completed" : "in_progress";
  r["text"] = nullptr;
  r["top_logprobs"] = nullptr;
  r["truncation"] = "disabled";
  r["usage"] = c != nullptr ? usage_json(c->usage) : ojson();
  r["user"] = nullptr;
  return r;
}

}  // namespace

std::string render_response_object(const ResponseObjectMeta& m, const Completion* c) {
  return dump(response_json(m, c));
}

void ResponsesSse::emit(std::string& out, std::string_view type, ojson fields) {
  // The event models' fields in their (alphabetical) order: sequence_number, then type, last.
  fields["sequence_number"] = sequence_++;
  fields["type"] = type;
  out += "event: ";
  out += type;
  out += "\ndata: ";
  out += dump(fields);
  out += "\n\n";
}

std::string ResponsesSse::on_token(const Event& token) {
  std::string out;
  if (!started_) {
    started_ = true;
    const ojson initial = response_json(meta_, nullptr);
    emit(out, "response.created", ojson{{"response", initial}});
    emit(out, "response.in_progress", ojson{{"response", initial}});
  }
  if (!item_open_) {
    item_open_ = true;
    ojson item = {{"id", item_id_},
                  {"content", ojson::array()},
                  {"role", "assistant"},
                  {"status", "in_progress"},
                  {"type", "message"}};
    emit(out, "response.output_item.added", ojson{{"item", std::move(item)}, {"output_index", 0}});
    emit(out, "response.content_part.added",
         ojson{{"content_index", content_index_},
               {"item_id", item_id_},
               {"output_index", 0},
               {"part", output_text_part("", true)}});
    ++content_index_;
  }
  emit(out, "response.output_text.delta",
       ojson{{"content_index", content_index_},
             {"delta", token.text},
             {"item_id", item_id_},
             {"logprobs", ojson::array()},
             {"output_index", 0}});
  ++content_index_;
  text_ += token.text;
  return out;
}

std::string ResponsesSse::on_finished(const Completion& c) {
  std::string out;
  if (item_open_) {
    emit(out, "response.output_text.done",
         ojson{{"content_index", content_index_},
               {"item_id", item_id_},
               {"logprobs", ojson::array()},
               {"output_index", 0},
               {"text", text_}});
    ++content_index_;
    const ojson part = output_text_part(text_, false);
    emit(
        out, "response.content_part.done",
        ojson{{"content_index", content_index_}, {"item_id", item_id_}, {"output_index", 0}, {"part", part}});
    ++content_index_;
    ojson item = {{"id", item_id_},      {"content", ojson::array({part})},
                  {"role", "assistant"}, {"status", "completed"},
                  {"type", "message"},   {"summary", ojson::array()}};
    emit(out, "response.output_item.done", ojson{{"item", std::move(item)}, {"output_index", 0}});
  }
  emit(out, "response.completed", ojson{{"response", response_json(meta_, &c)}});
  if (on_complete_) {
    on_complete_(c);
  }
  return out;
}

std::string ResponsesSse::on_error(Flavour, int status, std::string_view message) {
  std::string out;
  emit(out, "error", ojson{{"code", std::to_string(status)}, {"message", message}, {"param", nullptr}});
  return out;
}

}  // namespace cgn::sim
