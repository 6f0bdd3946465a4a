#include "targets.h"

#include <algorithm>

#include "kvcached/fast_path.h"

namespace cgn::kvbench {
namespace {

template <class T>
Error<BenchError> target_error(const Error<T>& e) {
  return make_error(BenchError::kTarget, std::string(kvcached::to_string(e.code)) + ": " + e.message);
}

kvcache::KeyDeriver make_keys() {
  auto keys = kvcache::KeyDeriver::create(bench_namespace());
  // bench_namespace() is valid by construction; a failure here is a programming error.
  if (!keys) {
    std::abort();
  }
  return *keys;
}

}  // namespace

kvcache::BlockNamespace bench_namespace() {
  kvcache::BlockNamespace ns;
  ns.model = "cgn-kvcached-bench";
  ns.dtype = "bf16";
  ns.tp_rank = 0;
  ns.tp_size = 1;
  ns.block_tokens = 512;
  return ns;
}

Result<std::vector<kvcache::Tier>, BenchError> GrpcReplayTarget::lookup(std::span<const uint64_t> ids) {
  std::vector<std::vector<Digest>> reqs(1);
  reqs[0].reserve(ids.size());
  for (uint64_t id : ids) {
    reqs[0].push_back(block_digest(id));
  }
  auto r = client_.batch_lookup(ns_, reqs, /*lease_ms=*/0);
  if (!r) {
    return target_error(r.error());
  }
  if (r->runs.size() != 1) {
    return make_error(BenchError::kTarget,
                      "BatchLookup answered " + std::to_string(r->runs.size()) + " runs for 1 request");
  }
  return std::move(r->runs[0]);
}

Status<BenchError> GrpcReplayTarget::put(uint64_t id, std::span<const uint8_t> value) {
  auto r = client_.put(ns_, block_digest(id), value);
  if (!r) {
    return target_error(r.error());
  }
  return Ok{};
}

Result<uint64_t, BenchError> GrpcReplayTarget::get(uint64_t id, std::span<uint8_t> out) {
  auto r = client_.get(ns_, block_digest(id), out);
  if (!r) {
    return target_error(r.error());
  }
  return *r;
}

Result<kvcache::StoreStats, BenchError> GrpcReplayTarget::stats() {
  auto r = client_.stats();
  if (!r) {
    return target_error(r.error());
  }
  return std::move(*r);
}

LocalReplayTarget::LocalReplayTarget(kvcached::LocalClient& client, kvcached::KvClient& control)
    : client_(client), control_(control), keys_(make_keys()) {}

Result<std::vector<kvcache::Tier>, BenchError> LocalReplayTarget::lookup(std::span<const uint64_t> ids) {
  // The fast path answers at most kMaxLookupKeys keys a frame: ask chunk by chunk while every
  // key so far is resident.
  std::vector<kvcache::Tier> run;
  std::vector<kvcache::BlockKey> keys;
  for (size_t start = 0; start < ids.size(); start += kvcached::kMaxLookupKeys) {
    const size_t end = std::min(ids.size(), start + kvcached::kMaxLookupKeys);
    keys.clear();
    for (size_t i = start; i < end; ++i) {
      keys.push_back(keys_.key(block_digest(ids[i])));
    }
    auto r = client_.lookup(keys, /*lease_ms=*/0);
    if (!r) {
      return target_error(r.error());
    }
    run.insert(run.end(), r->tiers.begin(), r->tiers.end());
    if (r->tiers.size() < keys.size()) {
      break;
    }
  }
  return run;
}

Status<BenchError> LocalReplayTarget::put(uint64_t id, std::span<const uint8_t> value) {
  auto r = client_.put(keys_.key(block_digest(id)), value);
  if (!r) {
    return target_error(r.error());
  }
  return Ok{};
}

Result<uint64_t, BenchError> LocalReplayTarget::get(uint64_t id, std::span<uint8_t> out) {
  auto r = client_.get(keys_.key(block_digest(id)), out);
  if (!r) {
    return target_error(r.error());
  }
  return *r;
}

Result<kvcache::StoreStats, BenchError> LocalReplayTarget::stats() {
  auto r = control_.stats();
  if (!r) {
    return target_error(r.error());
  }
  return std::move(*r);
}

Result<std::string, BenchError> replay_daemon(const bench::Workload& w, const std::string& grpc,
                                              const std::string& socket, const ReplayOptions& opt) {
  auto control = kvcached::KvClient::connect(grpc, config::TlsConfig{});
  if (!control) {
    return make_error(BenchError::kTarget, grpc + ": " + control.error().message);
  }
  std::unique_ptr<kvcached::LocalClient> local;
  std::unique_ptr<ReplayTarget> target;
  if (!socket.empty()) {
    auto c = kvcached::LocalClient::connect(socket);
    if (!c) {
      return make_error(BenchError::kTarget, socket + ": " + c.error().message);
    }
    local = std::move(*c);
    target = std::make_unique<LocalReplayTarget>(*local, **control);
  } else {
    target = std::make_unique<GrpcReplayTarget>(**control);
  }
  auto rep = run_replay(w, *target, opt);
  if (!rep) {
    return rep.error();
  }
  return to_json(*rep, opt, socket.empty() ? "grpc" : "local");
}

}  // namespace cgn::kvbench
