#include "sim/openai_render.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/openai_error.h"

namespace cgn::sim {

namespace {

void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  append_json_escaped(out, s);
  out += '"';
}

void append_head(std::string& out, const ResponseMeta& m, std::string_view object) {
  out += R"({"id":)";
  append_quoted(out, m.id);
  out += R"(,"object":")";
  out += object;
  out += R"(","created":)";
  out += std::to_string(m.created);
  out += R"(,"model":)";
  append_quoted(out, m.model);
}

std::string_view finish_name_for_api(FinishReason r) {
  // An aborted or failed request never reaches a body; "length" is safest.
  return r == FinishReason::kStop ? "stop" : "length";
}

void append_float(std::string& out, float v) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void append_base64(std::string& out, const uint8_t* p, size_t n) {
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = (p[i] << 16) | (p[i + 1] << 8) | p[i + 2];
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += kB64[v & 63];
  }
  if (i < n) {
    uint32_t v = p[i] << 16;
    if (i + 1 < n) {
      v |= p[i + 1] << 8;
    }
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < n ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
}

// message.tool_calls: call i's arguments are line i of the reply text (cut short by max_tokens,
// a call that got no text at all is left out).
void append_tool_calls(std::string& out, const std::vector<ToolCall>& calls, std::string_view text) {
  out += '[';
  for (size_t i = 0; i < calls.size() && !text.empty(); ++i) {
    const size_t nl = text.find('\n');
    const std::string_view args = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    out += i == 0 ? R"({"id":)" : R"(,{"id":)";
    append_quoted(out, calls[i].id);
    out += R"(,"type":"function","function":{"name":)";
    append_quoted(out, calls[i].name);
    out += R"(,"arguments":)";
    append_quoted(out, args);
    out += "}}";
  }
  out += ']';
}

// A buffered answer's "logprobs" value.
std::string logprobs_value(const ResponseMeta& m, const Completion& c) {
  if (!m.logprobs.enabled || !m.tool_calls.empty()) {
    return "null";
  }
  const auto tokens = reply_tokens(c.text);
  return m.kind == ApiKind::kChat ? render_chat_logprobs(m.logprobs, tokens)
                                  : render_completion_logprobs(m.logprobs, tokens);
}

std::string_view chat_finish_name(const ResponseMeta& m, FinishReason r) {
  return !m.tool_calls.empty() && r == FinishReason::kStop ? "tool_calls" : finish_name_for_api(r);
}

}  // namespace

std::string render_usage(const Usage& u) {
  std::string out = R"({"prompt_tokens":)";
  out += std::to_string(u.prompt_tokens);
  out += R"(,"total_tokens":)";
  out += std::to_string(u.prompt_tokens + u.completion_tokens);
  out += R"(,"completion_tokens":)";
  out += std::to_string(u.completion_tokens);
  out += R"(,"prompt_tokens_details":{"cached_tokens":)";
  out += std::to_string(u.cached_tokens);
  out += "}}";
  return out;
}

std::string render_completion_body(const ResponseMeta& meta, const Completion& c) {
  std::string out;
  out.reserve(512 + c.text.size() +
              16 * (c.kv_transfer_params && c.kv_transfer_params->remote_block_ids
                        ? c.kv_transfer_params->remote_block_ids->size()
                        : 0));
  const std::string_view reason = finish_name_for_api(c.reason);
  if (meta.kind == ApiKind::kChat) {
    append_head(out, meta, "chat.completion");
    out += R"(,"choices":[{"index":0,"message":{"role":"assistant","content":)";
    append_quoted(out, meta.tool_calls.empty() ? std::string_view(c.text) : std::string_view());
    out += R"(,"refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":)";
    append_tool_calls(out, meta.tool_calls, c.text);
    out += R"(,"reasoning":null},"logprobs":)";
    out += logprobs_value(meta, c);
    out += R"(,"finish_reason":")";
    out += chat_finish_name(meta, c.reason);
    out += R"(","stop_reason":null,"token_ids":null}])";
  } else {
    append_head(out, meta, "text_completion");
    out += R"(,"choices":[{"index":0,"text":)";
    append_quoted(out, c.text);
    out += R"(,"logprobs":)";
    out += logprobs_value(meta, c);
    out += R"(,"finish_reason":")";
    out += reason;
    out += R"(","stop_reason":null,"token_ids":null,"prompt_logprobs":null,"prompt_token_ids":null}])";
  }
  out += R"(,"service_tier":null,"system_fingerprint":null,"usage":)";
  out += render_usage(c.usage);
  out += R"(,"prompt_logprobs":null,"prompt_token_ids":null,"kv_transfer_params":)";
  out += c.kv_transfer_params ? render_kv_transfer_params(*c.kv_transfer_params) : "null";
  out += '}';
  return out;
}

void SseStream::open_chunk(std::string& out) const {
  out += "data: ";
  append_head(out, meta_, meta_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion");
}

void SseStream::close_chunk(std::string& out) {
  if (include_usage_) {
    out += R"(,"usage":null)";
  }
  out += "}\n\n";
  ++chunks_;
}

void SseStream::choice_chunk(std::string& out, std::string_view delta, std::string_view finish) {
  open_chunk(out);
  out += R"(,"choices":[{"index":0,"delta":)";
  out += delta;
  out += R"(,"logprobs":null,"finish_reason":)";
  if (finish.empty()) {
    out += "null";
  } else {
    out += '"';
    out += finish;
    out += R"(","stop_reason":null)";
  }
  out += R"(,"token_ids":null}])";
  close_chunk(out);
}

// A tool-call reply token: the call's header delta (id, type, index, name) before its first
// arguments, then the token's text as an arguments fragment (vllm-chat-stream-tools.sse); the
// stop token closes the choice with an empty content delta and finish_reason "tool_calls".
std::string SseStream::on_tool_token(const Event& token) {
  std::string out;
  std::string_view text = token.text;
  const bool ends_call = !text.empty() && text.back() == '\n';
  if (ends_call) {
    text.remove_suffix(1);
  }
  if (!token.text.empty() && tool_index_ < meta_.tool_calls.size()) {
    const std::string index = std::to_string(tool_index_);
    if (!tool_header_sent_) {
      std::string d = R"({"tool_calls":[{"id":)";
      append_quoted(d, meta_.tool_calls[tool_index_].id);
      d += R"(,"type":"function","index":)" + index + R"(,"function":{"name":)";
      append_quoted(d, meta_.tool_calls[tool_index_].name);
      d += "}}]}";
      choice_chunk(out, d, {});
      tool_header_sent_ = true;
    }
    if (!text.empty() || token.last) {
      std::string d = R"({"tool_calls":[{"index":)" + index + R"(,"function":{"arguments":)";
      append_quoted(d, text);
      d += "}}]}";
      choice_chunk(out, d, token.last ? chat_finish_name(meta_, token.finish_reason) : std::string_view());
    }
    if (ends_call) {
      ++tool_index_;
      tool_header_sent_ = false;
    }
  } else if (token.last) {
    choice_chunk(out, R"({"content":""})", chat_finish_name(meta_, token.finish_reason));
  }
  if (token.last) {
    finished_chunk_sent_ = true;
  }
  return out;
}

void SseStream::append_stream_logprobs(std::string& out, std::string_view text) {
  if (!meta_.logprobs.enabled || text.empty()) {
    out += "null";
    return;
  }
  if (meta_.kind == ApiKind::kChat) {
    out += R"({"content":[)";
    append_chat_logprob(out, meta_.logprobs, text, token_index_);
    out += "]}";
  } else {
    out += render_completion_logprobs(meta_.logprobs, {text}, text_offset_, token_index_);
  }
  ++token_index_;
  text_offset_ += static_cast<uint32_t>(text.size());
}

std::string SseStream::on_token(const Event& token) {
  std::string out;
  if (!started_ && meta_.kind == ApiKind::kChat) {
    open_chunk(out);
    out +=
        R"(,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}])";
    if (include_usage_) {
      out += R"(,"usage":null)";
    }
    out += R"(,"prompt_token_ids":null}
)";
    out += '\n';
    ++chunks_;
  }
  started_ = true;
  if (!meta_.tool_calls.empty()) {
    return out + on_tool_token(token);
  }
  open_chunk(out);
  if (meta_.kind == ApiKind::kChat) {
    out += R"(,"choices":[{"index":0,"delta":{"content":)";
    append_quoted(out, token.text);
    out += R"(},"logprobs":)";
  } else {
    out += R"(,"choices":[{"index":0,"text":)";
    append_quoted(out, token.text);
    out += R"(,"logprobs":)";
  }
  append_stream_logprobs(out, token.text);
  out += R"(,"finish_reason":)";
  if (token.last) {
    out += '"';
    out += finish_name_for_api(token.finish_reason);
    out += R"(","stop_reason":null)";
    finished_chunk_sent_ = true;
  } else {
    out += "null";
    if (meta_.kind == ApiKind::kCompletion) {
      out += R"(,"stop_reason":null)";
    }
  }
  out += R"(,"token_ids":null}])";
  close_chunk(out);
  return out;
}

std::string SseStream::on_finished(const Completion& c) {
  std::string out;
  if (!finished_chunk_sent_ && (c.reason == FinishReason::kStop || c.reason == FinishReason::kLength)) {
    // Token events were not requested: close the choice with an empty delta.
    Event last;
    last.last = true;
    last.finish_reason = c.reason;
    out += on_token(last);
  }
  if (include_usage_) {
    out += "data: ";
    append_head(out, meta_, meta_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion");
    out += R"(,"choices":[],"usage":)";
    out += render_usage(c.usage);
    out += "}\n\n";
    ++chunks_;
  }
  out += "data: [DONE]\n\n";
  return out;
}

std::string SseStream::on_error(Flavour f, int status, std::string_view message) {
  std::string out = "data: ";
  out += render_error_body(f, status, message);
  out += "\n\ndata: [DONE]\n\n";
  ++chunks_;
  return out;
}

std::vector<std::pair<std::string, std::string>> timing_headers(const Completion& c) {
  auto ms = [](Nanos n) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(n) / 1e6);
    return std::string(buf);
  };
  std::vector<std::pair<std::string, std::string>> h;
  h.emplace_back("X-Sim-Queue-Ms", ms(c.timing.queue_time()));
  if (c.timing.first_token >= 0) {
    h.emplace_back("X-Sim-Ttft-Ms", ms(c.timing.ttft()));
  }
  h.emplace_back("X-Sim-E2e-Ms", ms(c.timing.e2e()));
  h.emplace_back("X-Sim-Cached-Tokens", std::to_string(c.usage.cached_tokens));
  if (c.transferred_tokens > 0 || c.kv_pull_failed) {
    h.emplace_back("X-Sim-Transferred-Tokens", std::to_string(c.transferred_tokens));
  }
  return h;
}

std::vector<float> embedding_vector(std::span<const TokenId> tokens, uint32_t dims) {
  std::vector<float> v(dims, 0.0f);
  if (dims == 0) {
    return v;
  }
  // Each token adds a pseudo-random direction; similar prompts get similar vectors.
  for (TokenId t : tokens) {
    uint64_t h = mix64(static_cast<uint64_t>(t) ^ 0x656d626564ULL);
    for (uint32_t i = 0; i < dims; ++i) {
      if (i % 8 == 0) {
        h = mix64(h + i);
      }
      const int8_t b = static_cast<int8_t>(h >> ((i % 8) * 8));
      v[i] += static_cast<float>(b) / 128.0f;
    }
  }
  double norm = 0.0;
  for (float x : v) {
    norm += static_cast<double>(x) * x;
  }
  if (norm == 0.0) {
    v[0] = 1.0f;
    return v;
  }
  const float inv = static_cast<float>(1.0 / std::sqrt(norm));
  for (float& x : v) {
    x *= inv;
  }
  return v;
}

std::string render_embeddings_body(std::string_view id, int64_t created, std::string_view model,
                                   std::span<const std::vector<float>> vectors, uint32_t prompt_tokens,
                                   bool base64) {
  std::string out = R"({"id":)";
  append_quoted(out, id);
  out += R"(,"object":"list","created":)";
  out += std::to_string(created);
  out += R"(,"model":)";
  append_quoted(out, model);
  out += R"(,"data":[)";
  for (size_t i = 0; i < vectors.size(); ++i) {
    if (i != 0) {
      out += ',';
    }
    out += R"({"index":)";
    out += std::to_string(i);
    out += R"(,"object":"embedding","embedding":)";
    if (base64) {
      out += '"';
      std::vector<uint8_t> bytes(vectors[i].size() * 4);
      std::memcpy(bytes.data(), vectors[i].data(), bytes.size());  // little-endian hosts
      append_base64(out, bytes.data(), bytes.size());
      out += '"';
    } else {
      out += '[';
      for (size_t j = 0; j < vectors[i].size(); ++j) {
        if (j != 0) {
          out += ',';
        }
        append_float(out, vectors[i][j]);
      }
      out += ']';
    }
    out += '}';
  }
  out += R"(],"usage":{"prompt_tokens":)";
  out += std::to_string(prompt_tokens);
  out += R"(,"total_tokens":)";
  out += std::to_string(prompt_tokens);
  out += R"(,"completion_tokens":0,"prompt_tokens_details":null}})";
  return out;
}

}  // namespace cgn::sim
