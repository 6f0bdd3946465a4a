// Fuzz target for the OpenAI request canonicaliser (core/canonical.h). Any
// input must give a value or a clear error, never a crash, and the
// invariants the digests rely on must hold:
//   - canonical JSON is idempotent;
//   - a parsed reply appended with append_assistant_message equals the
//     canonical bytes of the same message sent back in a request;
//   - the SIMD digest path equals the reference path.
// Corpus: tests/fuzz/corpus/canonical/ (replayed as a ctest).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/canonical.h"
#include "core/digest.h"
#include "core/openai_error.h"

namespace {

void check(bool ok) {
  if (!ok) {
    std::abort();
  }
}

cgn::RequestLimits small_limits() {
  cgn::RequestLimits limits;
  limits.max_body_bytes = 256 * 1024;
  limits.max_json_depth = 32;
  limits.max_messages = 64;
  limits.max_content_parts = 16;
  limits.max_tool_calls = 8;
  limits.max_tools = 8;
  limits.max_prompts = 16;
  limits.max_prompt_tokens = 4096;
  return limits;
}

void check_digests(const cgn::ParsedRequest& r) {
  const cgn::Digest seed = cgn::make_digest_seed(cgn::digest_seed_fields(r));
  std::vector<cgn::Digest> fast;
  std::vector<cgn::Digest> ref;
  cgn::compute_prefix_digests(seed, r.canonical_prompt, 64, fast, 64);
  cgn::compute_prefix_digests_reference(seed, r.canonical_prompt, 64, ref, 64);
  check(fast == ref);
  check(fast.size() == std::min<size_t>(r.canonical_prompt.size() / 64, 64));
}

void check_reply_round_trip(std::string_view input, const cgn::RequestLimits& limits) {
  auto reply = cgn::parse_chat_completion_reply(input, limits);
  if (!reply.ok()) {
    return;
  }
  std::string appended;
  cgn::append_assistant_message(appended, reply->content, reply->tool_calls);

  std::string body = R"({"model":"m","messages":[{"role":"assistant","content":")";
  cgn::append_json_escaped(body, reply->content);
  body += R"(","tool_calls":[)";
  for (size_t i = 0; i < reply->tool_calls.size(); ++i) {
    body += i == 0 ? "" : ",";
    body += R"({"id":"c","type":"function","function":{"name":")";
    cgn::append_json_escaped(body, reply->tool_calls[i].name);
    body += R"(","arguments":")";
    cgn::append_json_escaped(body, reply->tool_calls[i].arguments);
    body += R"("}})";
  }
  body += "]}]}";
  auto next = cgn::parse_openai_request(cgn::Endpoint::kChat, body, cgn::RequestLimits{});
  check(next.ok());
  check(next->canonical_prompt == appended);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const cgn::RequestLimits limits = small_limits();

  for (cgn::Endpoint e : {cgn::Endpoint::kChat, cgn::Endpoint::kCompletions, cgn::Endpoint::kEmbeddings}) {
    auto r = cgn::parse_openai_request(e, input, limits);
    if (r.ok()) {
      check(!r->model.empty());
      check(r->has_tools == !r->canonical_tools.empty());
      check(e != cgn::Endpoint::kChat || r->message_count > 0);
      check_digests(*r);
    } else {
      const cgn::ApiError api = cgn::to_api_error(r.error());
      check(api.status == 400 || api.status == 413);
      check(!api.message.empty());
    }
  }

  auto once = cgn::canonical_json(input, limits);
  if (once.ok()) {
    // Canonical numbers may be longer than their input (1E5 -> 100000).
    cgn::RequestLimits relaxed = limits;
    relaxed.max_body_bytes = 4 * once->size() + 64;
    auto twice = cgn::canonical_json(*once, relaxed);
    check(twice.ok());
    check(*twice == *once);
  }

  check_reply_round_trip(input, limits);
  return 0;
}
