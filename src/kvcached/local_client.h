// The local fast path's client (docs/kvcached.md, "Local fast path"): a colocated engine talks to
// cgn-kvcached over its Unix socket (SOCK_SEQPACKET) in small fixed-size frames (fast_path.h)
// and moves the block bytes itself, through its own mapping of the daemon's RAM arena (a memfd
// handed over at connect). No byte of a block goes through the socket.
//
//   auto c = LocalClient::connect("/run/cognitora/kvcached.sock");
//   c->put(key, bytes);                  // PUT_START, memcpy into the arena, PUT_END
//   auto n = c->get(key, out);           // GET, memcpy out of the arena, RELEASE
//   auto v = c->view(key);               // GET; v->data() is read in place until v is destroyed
//   auto run = c->lookup(keys, 5000);    // LOOKUP with a 5 s lease
//   auto r = c->put_many(keys, values);  // PUT_START_MANY, memcpy each, PUT_END_MANY
//   auto r = c->get_many(keys, outs);    // GET_MANY, memcpy each, RELEASE_MANY (no answer)
//
// The batch calls cost two round trips (put) or one (get) per kMaxBatchKeys keys, whatever the
// number of keys, and answer per key; a block that fails does not fail the others.
//
// Keys travel already derived (kvcache::KeyDeriver, the daemon's own code), so both sides agree.
//
// Errors carry the daemon's message (frame status codes map to ClientError one to one).
//
// Threads: one LocalClient is one connection and is not thread-safe (one request at a time);
// use one per thread. A BlockView must not outlive its client.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "kvcache/block_key.h"
#include "kvcache/store_types.h"
#include "kvcached/client_error.h"

namespace cgn::kvcached {

class LocalClient;

// A pinned, read-only block in the arena. Released (RELEASE frame) when destroyed.
class BlockView {
 public:
  BlockView() = default;
  BlockView(BlockView&& other) noexcept;
  BlockView& operator=(BlockView&& other) noexcept;
  ~BlockView();

  std::span<const uint8_t> data() const { return data_; }
  kvcache::Tier tier() const { return tier_; }

 private:
  friend class LocalClient;
  void release();
  LocalClient* client_ = nullptr;
  uint64_t handle_ = 0;
  kvcache::Tier tier_ = kvcache::Tier::kNone;
  std::span<const uint8_t> data_;
};

struct LocalLookup {
  std::vector<kvcache::Tier> tiers;  // the unbroken resident run from the first key
  uint64_t lease_until_unix_ms = 0;  // 0: nothing leased
};

struct LocalConnectOptions {
  // Map the arena with MAP_POPULATE, so that no copy into or out of it takes a page fault. Costs
  // the page-table setup of the whole arena at connect (docs/kvcached.md has the numbers).
  bool prefault = true;
};

// One key's outcome in a batch call.
struct KeyResult {
  std::optional<ClientError> error;           // nullopt: done
  uint64_t length = 0;                        // get_many: the block's length
  kvcache::Tier tier = kvcache::Tier::kNone;  // get_many: the tier it was found in
  bool ok() const { return !error.has_value(); }
};

class LocalClient {
 public:
  // Connects, sends HELLO and maps the arena the daemon hands over.
  static Result<std::unique_ptr<LocalClient>, ClientError> connect(const std::string& socket_path,
                                                                   LocalConnectOptions options = {});
  ~LocalClient();
  LocalClient(const LocalClient&) = delete;
  LocalClient& operator=(const LocalClient&) = delete;

  // Stores the block. Ok when it was already resident (nothing written).
  Status<ClientError> put(const kvcache::BlockKey& key, std::span<const uint8_t> value);
  // Copies the block into `out` (out.size() >= the block's length): the block's length.
  // kTooLarge when `out` is too small.
  Result<uint64_t, ClientError> get(const kvcache::BlockKey& key, std::span<uint8_t> out);
  // The block pinned in the arena, read in place.
  Result<BlockView, ClientError> view(const kvcache::BlockKey& key);
  // The unbroken resident run from keys[0]; lease_ms 0: no lease. At most kMaxLookupKeys keys
  // (fast_path.h).
  Result<LocalLookup, ClientError> lookup(std::span<const kvcache::BlockKey> keys, uint32_t lease_ms);

  // Stores keys[i] = values[i] for every i (keys.size() == values.size()), kMaxBatchKeys keys a
  // frame: one result per key (ok when already resident). The call's own error is for a broken
  // connection or a malformed answer (then which keys were stored is unknown).
  Result<std::vector<KeyResult>, ClientError> put_many(std::span<const kvcache::BlockKey> keys,
                                                       std::span<const std::span<const uint8_t>> values);
  // Copies block keys[i] into outs[i] (keys.size() == outs.size()): one result per key, with the
  // block's length; kNotFound for a missing block, kTooLarge when outs[i] is too small.
  Result<std::vector<KeyResult>, ClientError> get_many(std::span<const kvcache::BlockKey> keys,
                                                       std::span<const std::span<uint8_t>> outs);

  uint64_t arena_bytes() const { return arena_bytes_; }

 private:
  friend class BlockView;
  LocalClient() = default;
  // RELEASE_MANY with kNoReply: sent, not answered.
  void release(std::span<const uint64_t> handles);

  int fd_ = -1;
  const uint8_t* arena_ = nullptr;  // read-write mapping, const for views
  uint8_t* arena_rw_ = nullptr;
  uint64_t arena_bytes_ = 0;
};

}  // namespace cgn::kvcached
