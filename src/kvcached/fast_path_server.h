// The local fast path's server (docs/kvcached.md, "Local fast path"; frames: fast_path.h): a
// SOCK_SEQPACKET Unix socket for the colocated engine. HELLO hands over the arena's memfd; puts
// and gets exchange arena offsets, and the engine copies the bytes itself.
//
// A connection owns what it opened: its reserved puts (aborted) and pinned gets (released) go
// when it closes, however it closes. At most max_connections connections (one more gets a BUSY
// answer and is closed) and max_handles open puts and gets per connection (one more: BUSY).
// Batch frames (GET_MANY, PUT_START_MANY, PUT_END_MANY, RELEASE_MANY) do each key in order, as
// the single-key op would, and answer per key; RELEASE_MANY with kNoReply gets no answer (an
// unknown handle in it is counted in the requests metric under RELEASE_MANY/INVALID).
//
// Threads: one accept thread and one thread per connection, all joined by stop(). A connection
// thread blocks in recv; stop() shuts the sockets down to wake them.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/result.h"
#include "kvcache/block_store.h"
#include "kvcached/fast_path.h"

namespace cgn::kvcached {

class KvcachedMetrics;

enum class FastPathError : uint8_t { kListen };

struct FastPathLimits {
  uint32_t max_connections = 64;
  uint32_t max_handles = 1024;
};

class FastPathServer {
 public:
  // Binds `path` (a stale socket file no daemon answers on is replaced; a live one or a file that
  // is not a socket is an error naming the path), sets mode 0660 and serves. `store`, `metrics`
  // and `clock` must outlive the server.
  static Result<std::unique_ptr<FastPathServer>, FastPathError> start(const std::string& path,
                                                                      kvcache::BlockStore& store,
                                                                      FastPathLimits limits,
                                                                      KvcachedMetrics& metrics,
                                                                      const Clock& clock);
  ~FastPathServer();
  FastPathServer(const FastPathServer&) = delete;
  FastPathServer& operator=(const FastPathServer&) = delete;

  // Closes the listener and every connection (their handles are dropped), joins the threads and
  // removes the socket file. Idempotent.
  void stop();

  struct Conn;
  struct Session;

 private:
  FastPathServer(kvcache::BlockStore& store, FastPathLimits limits, KvcachedMetrics& metrics,
                 const Clock& clock);
  void accept_loop();
  // Starts serving `fd`; false when max_connections are open (the caller refuses it).
  bool admit(int fd);
  void serve(Conn& conn);
  Response handle(Session& s, const Request& r);
  // One key's put or get: the entry, and what went wrong in `why` when its status is not OK.
  BatchEntry put_one(Session& s, const kvcache::BlockKey& key, uint64_t length, std::string& why);
  BatchEntry get_one(Session& s, const kvcache::BlockKey& key, std::string& why);
  BatchEntry put_end_one(Session& s, const kvcache::BlockKey& key, std::string& why);
  Response batch(Session& s, const Request& r);
  void reap_finished();

  kvcache::BlockStore& store_;
  const FastPathLimits limits_;
  KvcachedMetrics& metrics_;
  const Clock& clock_;
  std::string path_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop() wakes the accept thread
  std::thread acceptor_;
  std::mutex mu_;  // guards conns_ and stopping_
  std::list<std::unique_ptr<Conn>> conns_;
  bool stopping_ = false;
};

}  // namespace cgn::kvcached
