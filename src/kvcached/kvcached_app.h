// cgn-kvcached as one application object (docs/design/lifecycle.md): parsed options in
// (KvcachedSetup, kvcached/kvcached_options.h), start() / stop(deadline) out; main only adds the
// shutdown signals.
//
// What start() runs, in this order (the members are declared in it): the BlockStore (RAM arena,
// SSD tier and its scan, the maintenance thread), the metrics and their HTTP /metrics server, the
// gRPC service KvCache and the local fast path. The store itself logs the SSD scan's end and the
// SSD tier failing and recovering (once each, not per failed spill). stop() stops them in
// reverse: the fast path drops its connections (their puts aborted, their pins released), gRPC
// lets running calls finish until the deadline, then /metrics and the store stop.
//
// Threads: every thread belongs to one of those components and is joined by stop(). The object is
// driven from one thread (main, or a test).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "core/cli_exit.h"
#include "core/clock.h"
#include "kvcached/kvcached_options.h"

namespace cgn::metrics {
class Registry;
}
namespace cgn::http {
class Server;
}
namespace cgn::kvcache {
class BlockStore;
}

namespace cgn::kvcached {

class FastPathServer;
class KvGrpcServer;
class KvcachedMetrics;

class KvcachedApp {
 public:
  // `clock` is the store's clock and the one stop() reads its deadline on.
  explicit KvcachedApp(KvcachedSetup setup, const Clock& clock = SteadyClock::instance());
  ~KvcachedApp();  // stop(now): no grace
  KvcachedApp(const KvcachedApp&) = delete;
  KvcachedApp& operator=(const KvcachedApp&) = delete;

  // Configures logging and starts everything above; returns once every listener serves. On
  // failure: status 2 and a message naming the cause; nothing is left running. Call once.
  // `stop_requested` is asked while the RAM arena is allocated (seconds for tens of GiB): true
  // ends the start there, with status 0 and nothing left running or written.
  CliResult<Ok> start(std::function<bool()> stop_requested = {});
  // Idempotent; a no-op before start().
  void stop(Nanos deadline);

  // clock now + 5 s: the deadline main gives stop().
  Nanos shutdown_deadline() const;
  uint16_t grpc_port() const;
  uint16_t metrics_port() const;
  kvcache::BlockStore* store() { return store_.get(); }

 private:
  CliResult<Ok> start_listeners();

  KvcachedSetup setup_;
  const Clock& clock_;
  bool started_ = false;
  bool stopped_ = false;
  // Declared in start order; stop() stops them in reverse.
  std::unique_ptr<kvcache::BlockStore> store_;
  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<KvcachedMetrics> metrics_;
  std::unique_ptr<http::Server> http_;
  std::unique_ptr<KvGrpcServer> grpc_;
  std::unique_ptr<FastPathServer> fast_;
};

}  // namespace cgn::kvcached
