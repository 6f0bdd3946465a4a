#include "agent/engine_digests.h"

#include <algorithm>
#include <charconv>

#include "agent/agent_proxy.h"
#include "agent/driver.h"
#include "sim/kv_cache.h"
#include "sim/offload_tier.h"
#include "sim/openai_parse.h"

namespace cgn::agent {

std::vector<Digest> sim_block_digests(std::string_view path, std::string_view body, uint32_t block_tokens) {
  std::vector<Digest> out;
  sim::ApiKind kind;
  if (path == "/v1/chat/completions") {
    kind = sim::ApiKind::kChat;
  } else if (path == "/v1/completions") {
    kind = sim::ApiKind::kCompletion;
  } else {
    return out;
  }
  auto parsed = sim::parse_generation_body(kind, body);
  if (!parsed || block_tokens == 0) {
    return out;
  }
  const sim::Request r = sim::to_engine_request(*parsed, sim::ReplyMode::kEcho, UINT32_MAX);
  std::vector<sim::BlockHash> hashes;
  sim::extend_block_hashes(r.prompt, block_tokens, hashes);
  out.reserve(hashes.size());
  for (sim::BlockHash h : hashes) {
    out.push_back(sim::block_digest(h));
  }
  return out;
}

uint32_t sim_block_size(const std::vector<std::string>& extra_args) {
  std::string_view value;
  for (size_t i = 0; i < extra_args.size(); ++i) {
    std::string_view a = extra_args[i];
    if (a == "--block-size" && i + 1 < extra_args.size()) {
      value = extra_args[i + 1];
    } else if (a.starts_with("--block-size=")) {
      value = a.substr(13);
    }
  }
  uint32_t n = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  return ec == std::errc() && p == value.data() + value.size() && n > 0 ? n : 16;
}

EngineNaming engine_naming(std::string_view driver, const config::EngineConfig& engine,
                           uint32_t block_bytes) {
  EngineNaming n;
  n.ns.model = detail::served_name_or_model(engine);
  if (driver == "sim") {
    const uint32_t bs = sim_block_size(engine.extra_args);
    n.ns.dtype = "bf16";
    n.ns.tp_size = std::max<uint32_t>(engine.tensor_parallel, 1);
    n.ns.block_tokens = bs;
    n.chain = [bs](std::string_view path, std::string_view body) {
      return sim_block_digests(path, body, bs);
    };
    return n;
  }
  n.ns.dtype = "auto";
  n.ns.block_tokens = std::max<uint32_t>(block_bytes / 4, 1);
  n.chain = [block_bytes](std::string_view path, std::string_view body) {
    return completion_digests(path, body, nullptr, block_bytes);
  };
  return n;
}

}  // namespace cgn::agent
