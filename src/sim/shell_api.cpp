#include "sim/shell_api.h"

#include <nlohmann/json.hpp>

namespace cgn::sim {

namespace {

using nlohmann::json;

Result<json, BodyError> parse_object(std::string_view body) {
  if (body.size() > kMaxShellBodyBytes) {
    return make_error(BodyError::kTooLarge, "request body is larger than 4 MiB");
  }
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(BodyError::kInvalidJson, "request body must be a JSON object");
  }
  return j;
}

bool read_id(const json& j, const char* key, std::string& out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().size() > kMaxClaimIdBytes) {
    return false;
  }
  out = it->get<std::string>();
  return true;
}

}  // namespace

Result<ClaimRequest, BodyError> parse_claim_body(std::string_view body) {
  auto parsed = parse_object(body);
  if (!parsed) {
    return parsed.error();
  }
  const json& j = *parsed;
  ClaimRequest c;
  if (!read_id(j, "engine_id", c.engine_id) || !read_id(j, "request_id", c.request_id)) {
    return make_error(BodyError::kBadField,
                      "'engine_id' and 'request_id' must be strings of at most 512 bytes");
  }
  auto ids = j.find("block_ids");
  if (ids == j.end() || !ids->is_array()) {
    return make_error(BodyError::kBadField, "'block_ids' must be an array of integers");
  }
  if (ids->size() > kMaxRemoteBlockIds) {
    return make_error(BodyError::kTooLarge, "'block_ids' has more than 65536 entries");
  }
  c.block_ids.reserve(ids->size());
  for (const json& b : *ids) {
    if (!b.is_number_integer()) {
      return make_error(BodyError::kBadField, "'block_ids' must be an array of integers");
    }
    c.block_ids.push_back(b.get<int64_t>());
  }
  return c;
}

std::string render_claim_body(const ClaimRequest& c) {
  json j;
  j["engine_id"] = c.engine_id;
  j["request_id"] = c.request_id;
  j["block_ids"] = c.block_ids;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string render_claim_answer(ClaimStatus s) {
  std::string out = R"({"status":")";
  out += claim_status_name(s);
  out += "\"}";
  return out;
}

ClaimStatus parse_claim_answer(std::string_view body) {
  if (body.size() > 4096) {
    return ClaimStatus::kUnknown;
  }
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return ClaimStatus::kUnknown;
  }
  auto st = j.find("status");
  if (st == j.end() || !st->is_string()) {
    return ClaimStatus::kUnknown;
  }
  for (ClaimStatus s :
       {ClaimStatus::kOk, ClaimStatus::kExpired, ClaimStatus::kUnknown, ClaimStatus::kMismatch}) {
    if (*st == claim_status_name(s)) {
      return s;
    }
  }
  return ClaimStatus::kUnknown;
}

Result<EvictRequest, BodyError> parse_evict_body(std::string_view body) {
  auto parsed = parse_object(body);
  if (!parsed) {
    return parsed.error();
  }
  const json& j = *parsed;
  EvictRequest e;
  if (auto all = j.find("all"); all != j.end()) {
    if (!all->is_boolean()) {
      return make_error(BodyError::kBadField, "'all' must be a boolean");
    }
    e.all = all->get<bool>();
    if (e.all) {
      return e;
    }
  }
  ApiKind kind;
  if (j.contains("messages")) {
    kind = ApiKind::kChat;
  } else if (j.contains("prompt")) {
    kind = ApiKind::kCompletion;
  } else {
    return make_error(BodyError::kBadField,
                      "expected {\"all\":true}, {\"prompt\":...} or {\"messages\":[...]}");
  }
  // The same parsing and rendering as a generation request, so the prefix
  // evicted is exactly the one that request cached.
  auto gen = parse_generation_body(kind, body);
  if (!gen) {
    return gen.error();
  }
  Request r = to_engine_request(*gen, ReplyMode::kRandom, 1);
  e.prefix = std::move(r.prompt);
  if (e.prefix.empty()) {
    return make_error(BodyError::kBadField, "the prompt to evict is empty");
  }
  return e;
}

}  // namespace cgn::sim
