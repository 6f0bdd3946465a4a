#include "sim/openai_parse.h"

#include <nlohmann/json.hpp>

#include "sim/image_tokens.h"

namespace cgn::sim {

namespace {

using nlohmann::json;
using Err = Error<BodyError>;

Err bad(std::string_view field, std::string_view want) {
  std::string msg;
  msg.reserve(field.size() + want.size() + 3);
  msg.push_back('\'');
  msg.append(field);
  msg.append("' ");
  msg.append(want);
  return make_error(BodyError::kBadField, std::move(msg));
}

Result<json, BodyError> parse_object(std::string_view body) {
  if (body.size() > kMaxBodyBytes) {
    return make_error(BodyError::kTooLarge, "request body is larger than 32 MiB");
  }
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return make_error(BodyError::kInvalidJson, "request body is not valid JSON");
  }
  if (!j.is_object()) {
    return make_error(BodyError::kInvalidJson, "request body must be a JSON object");
  }
  return j;
}

// OpenAI content: a string, or an array of parts of which text and image parts count
// (image_tokens.h); `images` counts the request's image parts.
Result<std::string, BodyError> content_text(const json& c, size_t& images) {
  if (c.is_null()) {
    return std::string();
  }
  if (c.is_string()) {
    return c.get<std::string>();
  }
  if (!c.is_array()) {
    return bad("messages[].content", "must be a string or an array of parts");
  }
  std::string out;
  for (const json& part : c) {
    if (!part.is_object()) {
      return bad("messages[].content[]", "must be an object");
    }
    if (part.value("type", "") == "image_url") {
      if (++images > kMaxImagesPerPrompt) {
        return bad("messages[].content[]", "holds more than 16 images (vLLM's --limit-mm-per-prompt here)");
      }
      if (auto r = append_image_placeholder(part, out); !r) {
        return make_error(BodyError::kBadField, std::move(r.error().message));
      }
      continue;
    }
    auto type = part.find("type");
    if (type != part.end() && type->is_string() && *type == "text") {
      auto text = part.find("text");
      if (text == part.end() || !text->is_string()) {
        return bad("messages[].content[].text", "must be a string");
      }
      out += text->get<std::string>();
    }
  }
  return out;
}

bool read_u32(const json& j, uint32_t& out) {
  if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() > 0xffffffffLL) {
    return false;
  }
  out = static_cast<uint32_t>(j.get<int64_t>());
  return true;
}

Result<std::vector<TokenId>, BodyError> token_ids(const json& a, std::string_view field) {
  std::vector<TokenId> out;
  out.reserve(a.size());
  for (const json& t : a) {
    uint32_t v = 0;
    if (!read_u32(t, v) || v >= kVocabSize) {
      return bad(field, "must hold token ids in [0, 128256)");
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace

Result<GenerationBody, BodyError> parse_generation_body(ApiKind kind, std::string_view body) {
  auto parsed = parse_object(body);
  if (!parsed) {
    return parsed.error();
  }
  const json& j = *parsed;
  GenerationBody b;
  b.kind = kind;
  if (auto m = j.find("model"); m != j.end() && !m->is_null()) {
    if (!m->is_string()) {
      return bad("model", "must be a string");
    }
    b.model = m->get<std::string>();
  }
  if (kind == ApiKind::kChat) {
    auto msgs = j.find("messages");
    if (msgs == j.end() || !msgs->is_array() || msgs->empty()) {
      return bad("messages", "must be a non-empty array");
    }
    if (msgs->size() > kMaxMessages) {
      return make_error(BodyError::kTooLarge, "'messages' has more than 4096 entries");
    }
    size_t images = 0;
    for (const json& m : *msgs) {
      if (!m.is_object()) {
        return bad("messages[]", "must be an object");
      }
      auto role = m.find("role");
      if (role == m.end() || !role->is_string()) {
        return bad("messages[].role", "must be a string");
      }
      auto content = m.find("content");
      auto text = content_text(content == m.end() ? json() : *content, images);
      if (!text) {
        return text.error();
      }
      b.messages.push_back({role->get<std::string>(), std::move(*text)});
    }
    auto structured = parse_structured_request(j);
    if (!structured) {
      return make_error(BodyError::kBadField, std::move(structured.error().message));
    }
    b.structured = std::move(*structured);
  } else {
    auto p = j.find("prompt");
    if (p == j.end()) {
      return bad("prompt", "is required");
    }
    if (p->is_string()) {
      b.prompt_text = p->get<std::string>();
    } else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
      auto ids = token_ids(*p, "prompt");
      if (!ids) {
        return ids.error();
      }
      b.prompt_token_ids = std::move(*ids);
    } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
      b.prompt_text = (*p)[0].get<std::string>();
    } else {
      return bad("prompt", "must be a string, one string in an array, or an array of token ids");
    }
  }
  auto lp = parse_logprobs(j, kind == ApiKind::kChat);
  if (!lp) {
    return make_error(BodyError::kBadField, std::move(lp.error().message));
  }
  b.logprobs = *lp;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      continue;
    }
    uint32_t v = 0;
    if (!read_u32(*it, v) || v == 0) {
      return bad(key, "must be a positive integer");
    }
    b.max_tokens = v;  // max_completion_tokens (later in the list) wins
  }
  if (auto s = j.find("stream"); s != j.end() && !s->is_null()) {
    if (!s->is_boolean()) {
      return bad("stream", "must be a boolean");
    }
    b.stream = s->get<bool>();
  }
  if (auto so = j.find("stream_options"); so != j.end() && so->is_object()) {
    if (auto iu = so->find("include_usage"); iu != so->end() && iu->is_boolean()) {
      b.include_usage = iu->get<bool>();
    }
  }
  if (auto ie = j.find("ignore_eos"); ie != j.end() && !ie->is_null()) {
    if (!ie->is_boolean()) {
      return bad("ignore_eos", "must be a boolean");
    }
    b.ignore_eos = ie->get<bool>();
  }
  if (auto sd = j.find("seed"); sd != j.end() && !sd->is_null()) {
    if (!sd->is_number_integer()) {
      return bad("seed", "must be an integer");
    }
    b.seed = static_cast<uint64_t>(sd->get<int64_t>());
  }
  if (auto kv = j.find("kv_transfer_params"); kv != j.end() && !kv->is_null()) {
    auto p = parse_kv_transfer_params(kv->dump());
    if (!p) {
      return make_error(BodyError::kBadField, p.error().message);
    }
    b.kv_transfer = std::move(*p);
  }
  return b;
}

Request to_engine_request(const GenerationBody& b, ReplyMode mode, uint32_t max_model_len) {
  Request r;
  if (b.kind == ApiKind::kChat) {
    encode(render_chat(b.messages), r.prompt);
    if (mode == ReplyMode::kEcho) {
      for (auto it = b.messages.rbegin(); it != b.messages.rend(); ++it) {
        if (it->role == "user") {
          r.echo_text = it->content;
          break;
        }
      }
    }
  } else if (!b.prompt_token_ids.empty()) {
    r.prompt = b.prompt_token_ids;
  } else {
    encode(b.prompt_text, r.prompt);
    if (mode == ReplyMode::kEcho) {
      r.echo_text = b.prompt_text;
    }
  }
  r.reply_mode = mode;
  const uint32_t left =
      r.prompt.size() < max_model_len ? max_model_len - static_cast<uint32_t>(r.prompt.size()) : 1;
  r.max_tokens = b.max_tokens.value_or(left);
  r.stream = b.stream;
  r.ignore_eos = b.ignore_eos;
  r.seed = b.seed;
  r.kv_transfer = b.kv_transfer;
  r.want_token_events = b.stream;
  r.want_text = true;
  if (b.structured.json_reply) {
    set_fixed_reply(r, *b.structured.json_reply);
  }
  return r;
}

void set_fixed_reply(Request& r, std::string text) {
  r.reply_mode = ReplyMode::kEcho;
  r.echo_text = std::move(text);
  r.ignore_eos = false;
}

Result<EmbeddingsBody, BodyError> parse_embeddings_body(std::string_view body) {
  auto parsed = parse_object(body);
  if (!parsed) {
    return parsed.error();
  }
  const json& j = *parsed;
  EmbeddingsBody b;
  if (auto m = j.find("model"); m != j.end() && m->is_string()) {
    b.model = m->get<std::string>();
  }
  auto in = j.find("input");
  if (in == j.end()) {
    return bad("input", "is required");
  }
  if (in->is_string()) {
    b.inputs.push_back(encode(in->get<std::string>()));
  } else if (in->is_array()) {
    if (in->size() > kMaxEmbeddingInputs) {
      return make_error(BodyError::kTooLarge, "'input' has more than 2048 entries");
    }
    if (!in->empty() && (*in)[0].is_number_integer()) {
      auto ids = token_ids(*in, "input");
      if (!ids) {
        return ids.error();
      }
      b.inputs.push_back(std::move(*ids));
    } else {
      for (const json& e : *in) {
        if (e.is_string()) {
          b.inputs.push_back(encode(e.get<std::string>()));
        } else if (e.is_array()) {
          auto ids = token_ids(e, "input[]");
          if (!ids) {
            return ids.error();
          }
          b.inputs.push_back(std::move(*ids));
        } else {
          return bad("input[]", "must be a string or an array of token ids");
        }
      }
    }
  } else {
    return bad("input", "must be a string or an array");
  }
  if (b.inputs.empty()) {
    return bad("input", "must not be empty");
  }
  if (auto f = j.find("encoding_format"); f != j.end() && !f->is_null()) {
    if (!f->is_string() || (*f != "float" && *f != "base64")) {
      return bad("encoding_format", "must be \"float\" or \"base64\"");
    }
    b.base64 = *f == "base64";
  }
  if (auto d = j.find("dimensions"); d != j.end() && !d->is_null()) {
    if (!read_u32(*d, b.dimensions) || b.dimensions == 0 || b.dimensions > 65536) {
      return bad("dimensions", "must be an integer in 1..65536");
    }
  }
  return b;
}

}  // namespace cgn::sim
