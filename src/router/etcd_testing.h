// Helpers for the etcd backend's integration and e2e tests: a blocking HTTP/1.1 call
// (core/http/blocking_call.h), a cgn-engine-sim child process, node records and the digests the
// router computes for a chat body. Test-only; header-only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cluster/node_record.h"
#include "core/canonical.h"
#include "core/digest.h"
#include "core/http/blocking_call.h"
#include "testing/engine_sim.h"
#include "testing/process.h"

namespace cgn::router::etcdtest {

using HttpReply = http::BlockingReply;  // status 0: transport error

// POST (or GET when verb says so) to 127.0.0.1:port, with a deadline.
inline HttpReply http_call(uint16_t port, const std::string& verb, const std::string& target,
                           const std::string& body,
                           std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto r = http::blocking_call("127.0.0.1", port, verb == "GET" ? http::Verb::get : http::Verb::post, target,
                               body, "", timeout);
  return r ? std::move(*r) : HttpReply{};
}

inline std::string chat_body(const std::string& model, const std::string& prompt, int max_tokens = 4) {
  return R"({"model":")" + model + R"(","max_tokens":)" + std::to_string(max_tokens) +
         R"(,"messages":[{"role":"user","content":")" + prompt + R"("}]})";
}

// A prompt of `blocks` full 256-byte blocks, unique per tag.
inline std::string long_prompt(const std::string& tag, size_t blocks = 4) {
  std::string p = "tag " + tag + ": ";
  while (p.size() < blocks * 256 + 16) {
    p += "the quick brown fox jumps over the lazy dog " + tag + " ";
  }
  return p;
}

// The digests the router computes for a chat body (block_bytes 256).
inline std::vector<Digest> body_digests(const std::string& body, uint32_t block_bytes = 256) {
  auto pr = parse_openai_request(Endpoint::kChat, body);
  std::vector<Digest> d;
  if (!pr) {
    return d;
  }
  const Digest seed = make_digest_seed(digest_seed_fields(*pr));
  compute_prefix_digests(seed, pr->canonical_prompt, block_bytes, d, 8192);
  return d;
}

inline std::string record_json(const std::string& id, uint16_t port, uint64_t epoch = 1,
                               const std::string& model = "m") {
  cluster::NodeRecord r;
  r.node_id = id;
  r.address = "127.0.0.1:" + std::to_string(port);
  r.models = {model};
  r.engine = "vllm";
  r.ready = true;
  r.kv_epoch = epoch;
  r.generation = 1;
  r.total_blocks = 27500;
  r.free_blocks = 27500;
  r.block_size = 16;
  r.queue_depth = 0;
  r.running = 0;
  return cluster::to_json(r);
}

// A fast cgn-engine-sim serving `model` on a free port.
class Sim {
 public:
  explicit Sim(const std::string& model) : engine_(options(model)) {}
  uint16_t port() const { return engine_.port(); }
  // Ready once GET /health answers 200.
  bool wait_ready(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    return cgn::testing::wait_until(
        [&] {
          return port() > 0 && http_call(port(), "GET", "/health", "", std::chrono::seconds(1)).status == 200;
        },
        timeout, std::chrono::milliseconds(20));
  }
  cgn::testing::Process& process() { return engine_.process(); }

 private:
  static cgn::testing::EngineSimOptions options(const std::string& model) {
    cgn::testing::EngineSimOptions o;
    o.model = model;
    o.args = {"--time-scale", "0.01", "--mode", "echo", "--log-level", "warn"};
    return o;
  }
  cgn::testing::EngineSim engine_;
};

}  // namespace cgn::router::etcdtest
