// libcgn_sim_kvcached.so: the simulator shell's KvcachedLink (kvcached_link.h) over gRPC
// (kvcached::KvClient). Its one exported function is the module's entry point; everything else
// is hidden and bound inside the module.
#include "kvcached/kv_client.h"
#include "sim/shell/kvcached_link.h"

namespace cgn::sim {
namespace {

class GrpcLink final : public KvcachedLink {
 public:
  explicit GrpcLink(std::unique_ptr<kvcached::KvClient> c) : c_(std::move(c)) {}

  Status<kvcached::ClientError> put(const kvcache::BlockNamespace& ns, const Digest& digest,
                                    std::span<const uint8_t> value) override {
    auto r = c_->put(ns, digest, value);
    if (!r.ok()) {
      return r.error();
    }
    return Ok{};
  }

  Result<std::vector<kvcache::Tier>, kvcached::ClientError> lookup(const kvcache::BlockNamespace& ns,
                                                                   std::span<const Digest> digests,
                                                                   uint32_t lease_ms) override {
    std::vector<std::vector<Digest>> req(1);
    req[0].assign(digests.begin(), digests.end());
    auto r = c_->batch_lookup(ns, req, lease_ms);
    if (!r.ok()) {
      return r.error();
    }
    if (r->runs.empty()) {
      return std::vector<kvcache::Tier>{};
    }
    return std::move(r->runs[0]);
  }

  bool connected() override { return c_->connected(); }

 private:
  std::unique_ptr<kvcached::KvClient> c_;
};

}  // namespace
}  // namespace cgn::sim

extern "C" __attribute__((visibility("default"))) cgn::sim::KvcachedLink* cgn_sim_kvcached_connect(
    const char* target, uint32_t timeout_ms, std::string* error) {
  auto c = cgn::kvcached::KvClient::connect(target, cgn::config::TlsConfig{});
  if (!c.ok()) {
    *error = c.error().message;
    return nullptr;
  }
  (*c)->set_timeout_ms(timeout_ms);
  return new cgn::sim::GrpcLink(std::move(*c));
}
