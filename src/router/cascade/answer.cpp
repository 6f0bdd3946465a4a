#include "router/cascade/answer.h"

#include <cstdint>

namespace cgn::router::cascade {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

Error<AnswerError> malformed(std::string what) {
  return Error<AnswerError>{AnswerError::kMalformed, std::move(what)};
}

// One piece of a choice's text and, when the logprobs name the tokens, the token's index there.
struct Piece {
  std::string text;
  long token = -1;
};

// The text cut per token when the tokens spell it exactly, else per word (a word with the
// spaces after it), so every piece is whole UTF-8.
std::vector<Piece> pieces_of(const std::string& text, const std::vector<std::string>& tokens) {
  std::vector<Piece> out;
  std::string joined;
  for (const auto& t : tokens) {
    joined += t;
  }
  if (!tokens.empty() && joined == text) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      out.push_back({tokens[i], static_cast<long>(i)});
    }
    return out;
  }
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    end = end == std::string::npos ? text.size() : text.find_first_not_of(' ', end);
    end = end == std::string::npos ? text.size() : end;
    out.push_back({text.substr(start, end - start), -1});
    start = end;
  }
  return out;
}

const ordered_json* logprobs_of(const ordered_json& choice) {
  auto it = choice.find("logprobs");
  return it != choice.end() && it->is_object() ? &*it : nullptr;
}

// The token texts the logprobs name (chat content[].token, completions tokens[]).
std::vector<std::string> tokens_of(const ordered_json& choice, bool chat) {
  std::vector<std::string> out;
  const ordered_json* lp = logprobs_of(choice);
  if (lp == nullptr) {
    return out;
  }
  const char* key = chat ? "content" : "tokens";
  auto arr = lp->find(key);
  if (arr == lp->end() || !arr->is_array()) {
    return out;
  }
  for (const auto& e : *arr) {
    const ordered_json* tok = chat ? (e.is_object() && e.contains("token") ? &e["token"] : nullptr) : &e;
    if (tok == nullptr || !tok->is_string()) {
      return {};
    }
    out.push_back(tok->get<std::string>());
  }
  return out;
}

// The logprobs of one token, in the stream chunk's shape.
ordered_json token_logprobs_chunk(const ordered_json& lp, long k, bool chat) {
  const auto at = [&](const char* key) -> ordered_json {
    auto it = lp.find(key);
    if (it == lp.end() || !it->is_array() || static_cast<size_t>(k) >= it->size()) {
      return nullptr;
    }
    return (*it)[static_cast<size_t>(k)];
  };
  if (chat) {
    return ordered_json{{"content", ordered_json::array({at("content")})}};
  }
  return ordered_json{{"text_offset", ordered_json::array({at("text_offset")})},
                      {"token_logprobs", ordered_json::array({at("token_logprobs")})},
                      {"tokens", ordered_json::array({at("tokens")})},
                      {"top_logprobs", ordered_json::array({at("top_logprobs")})}};
}

ordered_json chunk_head(const ordered_json& body, bool chat) {
  ordered_json c = ordered_json::object();
  c["id"] = body.value("id", "");
  c["object"] = chat ? "chat.completion.chunk" : "text_completion";
  c["created"] = body.contains("created") ? body["created"] : ordered_json(0);
  c["model"] = body.value("model", "");
  return c;
}

std::string text_of(const ordered_json& choice, bool chat) {
  const ordered_json* t = nullptr;
  if (chat) {
    auto m = choice.find("message");
    if (m != choice.end() && m->is_object() && m->contains("content")) {
      t = &(*m)["content"];
    }
  } else if (choice.contains("text")) {
    t = &choice["text"];
  }
  return t != nullptr && t->is_string() ? t->get<std::string>() : std::string();
}

}  // namespace

Result<StepBodies, AnswerError> read_client_body(std::string_view body, bool chat) {
  StepBodies b;
  b.client = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!b.client.is_object()) {
    return malformed("the request body is not a JSON object");
  }
  b.ask.chat = chat;
  if (chat) {
    auto lp = b.client.find("logprobs");
    b.ask.logprobs = lp != b.client.end() && lp->is_boolean() && lp->get<bool>();
  } else {
    auto lp = b.client.find("logprobs");
    b.ask.logprobs = lp != b.client.end() && lp->is_number();
  }
  if (auto so = b.client.find("stream_options"); so != b.client.end() && so->is_object()) {
    auto iu = so->find("include_usage");
    b.ask.include_usage = iu != so->end() && iu->is_boolean() && iu->get<bool>();
  }
  b.final = b.client.dump();
  json gated = b.client;
  gated["stream"] = false;
  gated.erase("stream_options");
  if (chat) {
    gated["logprobs"] = true;
  } else if (!b.ask.logprobs) {
    gated["logprobs"] = 0;  // the sampled token's logprob, no alternatives
  }
  b.gated = gated.dump();
  return b;
}

std::string body_for(const StepBodies& b, std::string_view model, bool gated) {
  json j = json::parse(gated ? b.gated : b.final);
  j["model"] = model;
  return j.dump();
}

Result<GatedAnswer, AnswerError> read_answer(std::string_view body, bool chat) {
  GatedAnswer a;
  a.body = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!a.body.is_object()) {
    return malformed("the answer is not a JSON object");
  }
  auto choices = a.body.find("choices");
  if (choices == a.body.end() || !choices->is_array() || choices->empty()) {
    return malformed("the answer has no choices");
  }
  for (const auto& c : *choices) {
    std::vector<double> lps;
    const ordered_json* lp = c.is_object() ? logprobs_of(c) : nullptr;
    if (lp != nullptr) {
      if (chat) {
        auto content = lp->find("content");
        if (content != lp->end() && content->is_array()) {
          for (const auto& e : *content) {
            if (e.is_object() && e.contains("logprob") && e["logprob"].is_number()) {
              lps.push_back(e["logprob"].get<double>());
            }
          }
        }
      } else {
        auto tl = lp->find("token_logprobs");
        if (tl != lp->end() && tl->is_array()) {
          for (const auto& e : *tl) {
            if (e.is_number()) {
              lps.push_back(e.get<double>());
            }
          }
        }
      }
    }
    a.token_logprobs.push_back(std::move(lps));
  }
  return a;
}

std::string buffered_for_client(GatedAnswer a, const ClientAsk& ask) {
  if (!ask.logprobs) {
    for (auto& c : a.body["choices"]) {
      if (c.is_object() && c.contains("logprobs")) {
        c["logprobs"] = nullptr;
      }
    }
  }
  return a.body.dump();
}

std::vector<std::string> stream_for_client(const GatedAnswer& a, const ClientAsk& ask) {
  const bool chat = ask.chat;
  std::vector<std::string> out;
  const ordered_json& choices = a.body["choices"];
  for (size_t i = 0; i < choices.size(); ++i) {
    const ordered_json& choice = choices[i];
    if (!choice.is_object()) {
      continue;
    }
    const ordered_json index = choice.contains("index") ? choice["index"] : ordered_json(i);
    if (chat) {
      ordered_json c = chunk_head(a.body, chat);
      c["choices"] = ordered_json::array({{{"index", index},
                                           {"delta", {{"role", "assistant"}, {"content", ""}}},
                                           {"logprobs", nullptr},
                                           {"finish_reason", nullptr}}});
      out.push_back(c.dump());
      const auto msg = choice.find("message");
      if (msg != choice.end() && msg->is_object()) {
        for (const char* extra : {"reasoning_content", "refusal"}) {
          auto e = msg->find(extra);
          if (e != msg->end() && e->is_string() && !e->get<std::string>().empty()) {
            ordered_json r = chunk_head(a.body, chat);
            r["choices"] = ordered_json::array({{{"index", index},
                                                 {"delta", {{extra, *e}}},
                                                 {"logprobs", nullptr},
                                                 {"finish_reason", nullptr}}});
            out.push_back(r.dump());
          }
        }
      }
    }
    const ordered_json* lp = logprobs_of(choice);
    for (const Piece& p : pieces_of(text_of(choice, chat), tokens_of(choice, chat))) {
      ordered_json c = chunk_head(a.body, chat);
      ordered_json ch = ordered_json::object();
      ch["index"] = index;
      if (chat) {
        ch["delta"] = {{"content", p.text}};
      } else {
        ch["text"] = p.text;
      }
      ch["logprobs"] = ask.logprobs && lp != nullptr && p.token >= 0
                           ? token_logprobs_chunk(*lp, p.token, chat)
                           : ordered_json(nullptr);
      ch["finish_reason"] = nullptr;
      c["choices"] = ordered_json::array({ch});
      out.push_back(c.dump());
    }
    ordered_json c = chunk_head(a.body, chat);
    ordered_json ch = ordered_json::object();
    ch["index"] = index;
    if (chat) {
      ch["delta"] = ordered_json::object();
    } else {
      ch["text"] = "";
    }
    ch["logprobs"] = nullptr;
    ch["finish_reason"] = choice.contains("finish_reason") ? choice["finish_reason"] : ordered_json(nullptr);
    if (choice.contains("stop_reason")) {
      ch["stop_reason"] = choice["stop_reason"];
    }
    c["choices"] = ordered_json::array({ch});
    out.push_back(c.dump());
  }
  if (ask.include_usage && a.body.contains("usage")) {
    ordered_json c = chunk_head(a.body, chat);
    c["choices"] = ordered_json::array();
    c["usage"] = a.body["usage"];
    out.push_back(c.dump());
  }
  out.emplace_back("[DONE]");
  return out;
}

}  // namespace cgn::router::cascade
