// The simulator shell's reach to a cgn-kvcached, behind a seam. The gRPC client
// (kvcached::KvClient) lives in a small shared module, libcgn_sim_kvcached.so
// (kvcached_grpc/), that the shell loads only for --kvcached-target: a simulator without the flag
// maps none of gRPC's shared libraries (about 7 MB of its idle RSS).
//
// The module is looked for next to the executable (the build tree's bin/), then in
// ../lib/cognitora/ beside it (an installed tree: /usr/bin and /usr/lib/cognitora). Once loaded
// it stays loaded for the life of the process (its gRPC threads may outlive any one link).
//
// Thread safety: a KvcachedLink is thread-safe (KvClient is); connect_kvcached is too.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/digest_types.h"
#include "core/result.h"
#include "kvcache/block_key.h"
#include "kvcache/store_types.h"
#include "kvcached/client_error.h"

namespace cgn::sim {

class KvcachedLink {
 public:
  virtual ~KvcachedLink() = default;
  // Stores one block; ok when it was already resident.
  virtual Status<kvcached::ClientError> put(const kvcache::BlockNamespace& ns, const Digest& digest,
                                            std::span<const uint8_t> value) = 0;
  // The unbroken resident run from digests[0], leased for lease_ms.
  virtual Result<std::vector<kvcache::Tier>, kvcached::ClientError> lookup(const kvcache::BlockNamespace& ns,
                                                                           std::span<const Digest> digests,
                                                                           uint32_t lease_ms) = 0;
  // Whether the daemon is connected now (a call now would reach it).
  virtual bool connected() = 0;
};

inline constexpr const char* kKvcachedModule = "libcgn_sim_kvcached.so";
// The module's one exported function: a link to `target` (HOST:PORT) whose every call has
// `timeout_ms` as its deadline, or nullptr with *error set.
inline constexpr const char* kKvcachedModuleEntry = "cgn_sim_kvcached_connect";
using KvcachedConnectFn = KvcachedLink* (*)(const char* target, uint32_t timeout_ms, std::string* error);

enum class KvcachedLinkError : uint8_t {
  kModule,   // the module is missing or not ours (the message names the paths tried)
  kConnect,  // the module refused the target
};

// Loads the module (once) and connects to `target`.
Result<std::unique_ptr<KvcachedLink>, KvcachedLinkError> connect_kvcached(const std::string& target,
                                                                          uint32_t timeout_ms);

}  // namespace cgn::sim
