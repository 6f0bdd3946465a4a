// The engine supervisor: runs a driver's command in its own process group (with no descriptor of
// the agent's but its stdout/stderr pipe, and a parent-death signal), copies each line the
// engine prints into the agent's log ("[engine] ..."), probes readiness with the driver's health
// semantics, restarts the engine with exponential backoff when it exits, and stops it gracefully
// (SIGTERM to the group, SIGKILL after a grace period). An empty argv (the external driver)
// attaches: nothing is spawned, only probed.
//
// Threads: the supervisor owns one thread (spawn, probe, reap, backoff) plus one output reader
// per engine process. The listener and the line sink are called on those threads; they must be
// quick and must not call back into the Supervisor's start()/stop(). state(), starts() and pid()
// are safe from any thread. start() and stop() are for the owning thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "agent/driver.h"
#include "cluster/agent_health.h"

namespace cgn::agent {

struct SupervisorOptions {
  std::string host = "127.0.0.1";                        // where the engine listens (IPv4 literal)
  uint16_t port = 0;                                     // the engine's port ([engine] port)
  std::chrono::milliseconds probe_interval{500};         // while starting or unhealthy
  std::chrono::milliseconds ready_probe_interval{2000};  // while ready
  std::chrono::milliseconds probe_timeout{1000};
  uint32_t unhealthy_after = 3;  // consecutive failed probes before "unhealthy"
  std::chrono::milliseconds backoff_initial{1000};
  std::chrono::milliseconds backoff_max{60000};
  // An engine that stayed ready this long before it exited restarts after backoff_initial again.
  std::chrono::milliseconds healthy_reset{120000};
  std::chrono::milliseconds stop_grace{15000};
  // PATH used to find argv[0]; empty: the agent's own PATH (or the command's env PATH if set).
  std::string path_env;
  // false: the engine gets SIGKILL when the agent dies, however it dies (the parent-death signal,
  // armed from the supervisor thread, which lives until the engine is stopped). true: it
  // survives a killed agent ([agent] engine_outlives_agent).
  bool outlive_agent = false;
};

struct StateChange {
  cluster::EngineState state = cluster::EngineState::kStarting;
  uint64_t starts = 0;  // processes started so far
  std::string detail;   // exit status, backoff delay, the failed probe, ...
};

using StateListener = std::function<void(const StateChange&)>;
using LineSink = std::function<void(std::string_view line)>;

class Supervisor {
 public:
  Supervisor(LaunchCommand command, HealthSpec health, SupervisorOptions options, StateListener listener,
             LineSink sink = {});
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  void start();
  // Stops the engine (SIGTERM, then SIGKILL after stop_grace) and joins the threads. Idempotent.
  void stop();

  cluster::EngineState state() const { return state_.load(); }
  uint64_t starts() const { return starts_.load(); }
  // The running engine's pid (its process group id too), if one runs.
  std::optional<pid_t> pid() const;

 private:
  void run();
  void run_attached();
  // Spawns the engine; returns its pid or -1 (the reason in *why).
  pid_t spawn(std::string* why);
  // Probes until the process exits (returns its wait status) or stop is asked (returns nullopt).
  std::optional<int> watch(pid_t pid, bool* was_ready, std::chrono::steady_clock::time_point* ready_since);
  void probe_once(bool* was_ready, uint32_t* failures, std::chrono::steady_clock::time_point* ready_since);
  void terminate(pid_t pid);
  void reap_output();
  void set_state(cluster::EngineState s, std::string detail);
  // Waits up to d or until stop; returns true when stopping.
  bool wait_or_stop(std::chrono::milliseconds d);

  LaunchCommand command_;
  HealthSpec health_;
  SupervisorOptions options_;
  StateListener listener_;
  LineSink sink_;

  std::atomic<cluster::EngineState> state_{cluster::EngineState::kStopped};
  std::atomic<uint64_t> starts_{0};
  bool reported_once_ = false;  // supervisor thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  pid_t pid_ = -1;         // guarded by mu_
  std::thread thread_;
  std::thread reader_;  // supervisor thread only (joined before the next spawn)
};

}  // namespace cgn::agent
