// cgn-engine-sim's HTTP shell: one simulated Engine behind one http::Server,
// speaking the chosen flavour's wire protocol (OpenAI endpoints, health,
// metrics, errors), plus the P/D side channel, KV admin and fault injection.
//
// Threads and ownership: the http::Server runs ONE worker thread. Every
// handler, the engine timer and the P/D pull client run on it, so the Engine
// (not thread-safe) has exactly one owner and needs no lock. The engine is
// driven on the real clock: engine time = steady_clock time since start();
// a single steady_timer is armed at Engine::next_event_time() (already scaled
// by time_scale inside the engine); when it fires the shell calls
// advance_to(now), takes the events and hands each to the exchange waiting for
// it (a per-request queue plus a wake-up timer). An idle engine has no next
// event, so no timer is armed and the process uses no CPU.
//
// start()/stop() are for the owning (main) thread. A SimServer is not
// copyable and must outlive nothing it hands out.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/http/types.h"
#include "sim/fault_rules.h"
#include "sim/launch.h"

namespace cgn::sim {

// Request header naming a per-request fault plan (faults.h syntax, without
// the flag-only items), e.g. "X-Sim-Fault: error=503" or "drop_after=3".
inline constexpr std::string_view kFaultHeader = "X-Sim-Fault";
// Side channel on the API port: the decode instance claims held KV blocks.
inline constexpr std::string_view kClaimPath = "/internal/kv/claim";
// The power model's dcgm-exporter page on the API port (with metrics enabled).
inline constexpr std::string_view kDcgmPath = "/dcgm/metrics";

struct ShellConfig {
  SimOptions sim;
  FaultRules fault_rules;  // --fault-rules / --sim-fault-rules, loaded by main
  // Embedding width when a request sets no "dimensions".
  uint32_t embedding_dims = 1024;
  std::chrono::milliseconds shutdown_grace{5'000};
};

class SimServer {
 public:
  explicit SimServer(ShellConfig config);
  ~SimServer();  // stop()
  SimServer(const SimServer&) = delete;
  SimServer& operator=(const SimServer&) = delete;

  // Reserves the port at once (bound, not listening: connections are
  // refused) and returns it, so a port file can be written before loading
  // ends. Flavours whose port opens only after loading (vLLM, SGLang,
  // TRT-LLM, MLX) start listening after sim.load_seconds; llama.cpp listens
  // at once and answers 503 "Loading model" until then. With the flag fault
  // `refuse` the port accepts and closes every connection.
  http::HttpResult<uint16_t> start();
  // Stops listening and lets in-flight requests finish within the grace (config's
  // shutdown_grace, or `grace`), then joins every thread. Idempotent.
  void stop();
  void stop(std::chrono::milliseconds grace);

  uint16_t port() const { return port_; }
  // Engine id and side-channel port written into kv_transfer_params.
  const std::string& engine_id() const { return engine_id_; }

  struct Impl;

 private:
  ShellConfig config_;
  uint16_t port_ = 0;
  std::string engine_id_;
  int reserved_fd_ = -1;
  std::unique_ptr<OffloadTier> tier_;  // --kvcached-target; outlives impl_'s engine
  std::unique_ptr<Impl> impl_;
  std::thread loader_;   // delayed listen (port closed while loading)
  std::thread refuser_;  // fault `refuse`: accept and close
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace cgn::sim
