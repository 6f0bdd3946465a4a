// Running a short-lived tool (nvidia-smi, rocm-smi) and capturing its stdout, with a deadline
// and a size cap (the agent's GPU probes, cgn-power's ipmitool). The agent's long-lived engine process is
// its supervisor's business (agent/supervisor.h).
// Thread-safe: every call is independent; only async-signal-safe calls run between fork and exec.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace cgn {

enum class RunError : uint8_t { kNotFound, kSpawn, kTimeout };

std::string_view to_string(RunError e);

struct CaptureResult {
  int exit_code = 0;   // WEXITSTATUS, or 128 + signal
  std::string output;  // stdout only (stderr is discarded), at most max_bytes
  bool truncated = false;
};

// The first executable `name` in the colon-separated `path_env`; a name with a '/' is taken as is.
std::optional<std::string> find_on_path(std::string_view name, std::string_view path_env);

// Runs argv (argv[0] resolved on path_env) in its own process group; kills the group and returns
// kTimeout when it runs past `timeout`.
Result<CaptureResult, RunError> run_capture(const std::vector<std::string>& argv,
                                            std::chrono::milliseconds timeout, size_t max_bytes,
                                            std::string_view path_env);

// The agent's own PATH ("" when unset).
std::string current_path_env();

// For a child between fork and exec: closes every descriptor from `lowest` up, so nothing of the
// agent's (its listening sockets, its connections: Asio and gRPC do not mark them all
// close-on-exec) lives on in a program that may outlive it. Async-signal-safe; `max_fd` (from
// descriptor_limit(), taken before fork) bounds the one-by-one fallback for kernels without
// close_range.
void close_descriptors_from(int lowest, int max_fd) noexcept;
int descriptor_limit();

}  // namespace cgn
