#include "sim/logprobs.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/openai_error.h"
#include "sim/tokenizer.h"

namespace cgn::sim {

namespace {

using nlohmann::json;

void append_double(std::string& out, double v) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
  if (std::string_view(buf, res.ptr).find_first_of(".e") == std::string_view::npos) {
    out += ".0";  // a Python float
  }
}

void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  append_json_escaped(out, s);
  out += '"';
}

// ln of the k-th ranked token's probability (k = 0: the sampled token).
double logprob_at(double p, uint32_t k) {
  const double prob = k == 0 ? p : (1.0 - p) / std::ldexp(1.0, static_cast<int>(k));
  return prob > 0 ? std::log(prob) : -9999.0;
}

struct Ranked {
  std::string_view token;
  double logprob;
};

// The top tokens at `index`, most likely first: the sampled token (ln p) and s.top - 1 other
// generated pieces (distinct), the k-th with ln((1 - p) / 2^k).
std::vector<Ranked> ranked(const LogprobsSpec& s, std::string_view token, uint32_t index) {
  std::vector<Ranked> out{{token, logprob_at(s.confidence, 0)}};
  for (uint64_t salt = 0; out.size() < s.top && salt < 256; ++salt) {
    const std::string_view t = generated_piece(mix64(s.seed ^ (salt << 32)), index).text;
    if (std::none_of(out.begin(), out.end(), [&](const Ranked& r) { return r.token == t; })) {
      out.push_back({t, logprob_at(s.confidence, static_cast<uint32_t>(out.size()))});
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Ranked& a, const Ranked& b) { return a.logprob > b.logprob; });
  return out;
}

void append_entry(std::string& out, std::string_view token, double lp) {
  out += R"({"token":)";
  append_quoted(out, token);
  out += R"(,"logprob":)";
  append_double(out, lp);
  out += R"(,"bytes":[)";
  for (size_t i = 0; i < token.size(); ++i) {
    if (i != 0) {
      out += ',';
    }
    out += std::to_string(static_cast<unsigned char>(token[i]));
  }
  out += ']';
}

Result<uint32_t, LogprobsError> count(const json& v, std::string_view field) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    return make_error(LogprobsError::kBadField, std::string(field) + " must be a positive value.");
  }
  if (v.get<int64_t>() > kMaxLogprobs) {
    return make_error(LogprobsError::kBadField, "Requested sample logprobs of " +
                                                    std::to_string(v.get<int64_t>()) +
                                                    ", which is greater than max allowed: 20");
  }
  return static_cast<uint32_t>(v.get<int64_t>());
}

}  // namespace

uint64_t request_seed(std::string_view request_id) {
  uint64_t h = 0x746f6f6cULL;
  for (unsigned char c : request_id) {
    h = mix64(h ^ c);
  }
  return h;
}

Result<LogprobsSpec, LogprobsError> parse_logprobs(const json& body, bool chat) {
  LogprobsSpec s;
  auto lp = body.find("logprobs");
  const bool has_lp = lp != body.end() && !lp->is_null();
  if (chat) {
    if (has_lp && !lp->is_boolean()) {
      return make_error(LogprobsError::kBadField, std::string("'logprobs' must be a boolean"));
    }
    s.enabled = has_lp && lp->get<bool>();
    if (auto top = body.find("top_logprobs"); top != body.end() && !top->is_null()) {
      if (!s.enabled) {
        return make_error(LogprobsError::kBadField,
                          std::string("when using `top_logprobs`, `logprobs` must be set to true."));
      }
      auto n = count(*top, "`top_logprobs`");
      if (!n) {
        return n.error();
      }
      s.top = *n;
    }
  } else if (has_lp) {
    auto n = count(*lp, "`logprobs`");
    if (!n) {
      return n.error();
    }
    s.enabled = true;
    s.top = *n;
  }
  return s;
}

void append_chat_logprob(std::string& out, const LogprobsSpec& s, std::string_view token, uint32_t index) {
  append_entry(out, token, logprob_at(s.confidence, 0));
  out += R"(,"top_logprobs":[)";
  if (s.top > 0) {
    const auto r = ranked(s, token, index);
    for (uint32_t k = 0; k < r.size(); ++k) {
      out += k == 0 ? "" : ",";
      append_entry(out, r[k].token, r[k].logprob);
      out += '}';
    }
  }
  out += "]}";
}

std::string render_chat_logprobs(const LogprobsSpec& s, const std::vector<std::string_view>& tokens) {
  std::string out = R"({"content":[)";
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i != 0) {
      out += ',';
    }
    append_chat_logprob(out, s, tokens[i], static_cast<uint32_t>(i));
  }
  out += "]}";
  return out;
}

std::string render_completion_logprobs(const LogprobsSpec& s, const std::vector<std::string_view>& tokens,
                                       uint32_t first_offset, uint32_t first_index) {
  std::string out = R"({"text_offset":[)";
  uint32_t off = first_offset;
  for (size_t i = 0; i < tokens.size(); ++i) {
    out += i == 0 ? "" : ",";
    out += std::to_string(off);
    off += static_cast<uint32_t>(tokens[i].size());
  }
  out += R"(],"token_logprobs":[)";
  for (size_t i = 0; i < tokens.size(); ++i) {
    out += i == 0 ? "" : ",";
    append_double(out, logprob_at(s.confidence, 0));
  }
  out += R"(],"tokens":[)";
  for (size_t i = 0; i < tokens.size(); ++i) {
    out += i == 0 ? "" : ",";
    append_quoted(out, tokens[i]);
  }
  out += R"(],"top_logprobs":[)";
  for (size_t i = 0; i < tokens.size(); ++i) {
    out += i == 0 ? "{" : ",{";
    const auto r = ranked(s, tokens[i], first_index + static_cast<uint32_t>(i));
    for (uint32_t k = 0; k < r.size(); ++k) {
      out += k == 0 ? "" : ",";
      append_quoted(out, r[k].token);
      out += ':';
      append_double(out, r[k].logprob);
    }
    out += '}';
  }
  out += "]}";
  return out;
}

std::vector<std::string_view> reply_tokens(std::string_view text) {
  std::vector<TokenId> ids;
  std::vector<uint32_t> ends;
  encode(text, ids, &ends);
  std::vector<std::string_view> out;
  uint32_t begin = 0;
  for (uint32_t e : ends) {
    out.push_back(text.substr(begin, e - begin));
    begin = e;
  }
  return out;
}

}  // namespace cgn::sim
