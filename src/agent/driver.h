// Engine drivers: how to launch one inference engine, how to tell that it is ready, and where its
// metrics are. A driver is plain data plus one pure function (launch_command); the supervisor
// (supervisor.h) runs what it returns. Drivers register by the name used in [engine] kind.
//
// Thread-safety: drivers are immutable after construction; every method is const and safe from
// any thread. The registry is filled once at start-up (register_builtin_drivers) and read-only
// afterwards.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/result.h"
#include "routing/engine_metrics.h"
#include "routing/types.h"

namespace cgn::agent {

enum class DriverError : uint8_t {
  kUnknownDriver,  // no driver registered under that name
  kInvalidConfig,  // a required value is missing or out of range
  kUnsupported,    // a valid value this engine (or this driver) cannot do; the message names it
};

std::string_view to_string(DriverError e);

// KV offload / transfer modes ([engine] kv_offload). See docs/agent.md for the flags each engine
// gets; combinations not listed there are rejected with kUnsupported.
enum class KvOffload : uint8_t { kNone, kNixl, kLmcache, kHicache, kKvbm, kCgn };

std::string_view to_string(KvOffload k);
std::optional<KvOffload> parse_kv_offload(std::string_view s);

// What a driver needs beyond [engine]'s model, port, names, parallelism, extra args and gpus.
// cgn-agent fills these from [engine] (role, kv_offload, nixl_side_channel_*, parallel_slots,
// page_size, pd_transfer_backend, attach_kind, url) and lets its flags override them
// (agent_options.cpp).
struct LaunchOptions {
  routing::NodeRole role = routing::NodeRole::kBoth;
  KvOffload kv_offload = KvOffload::kNone;
  // vLLM NixlConnector side channel (VLLM_NIXL_SIDE_CHANNEL_HOST/PORT); used when the role is
  // prefill or decode, or kv_offload is nixl. 0 / empty: the engine's default (not exported).
  std::string nixl_side_channel_host;
  uint16_t nixl_side_channel_port = 0;
  // llama.cpp --parallel (slots).
  uint32_t parallel_slots = 4;
  // KV transfer between prefill and decode nodes: "nixl" (vLLM's NixlConnector; SGLang) or
  // "mooncake" (SGLang only).
  std::string pd_transfer_backend = "nixl";
  // SGLang --page-size (tokens per KV page); 0: not passed, the engine's default (1).
  uint32_t page_size = 0;
  // external only: the engine kind whose health and metrics semantics to use ("" = generic).
  std::string attach_kind;
  // external only: the running engine's host (IPv4 literal); its port is [engine] port.
  std::string engine_host = "127.0.0.1";
  // KV events ([engine] kv_events, kv_events_port; docs/agent.md "KV events"): drivers whose
  // engine publishes them add --kv-events-config dialling tcp://127.0.0.1:kv_events_port, where
  // the agent's SUB listens; for an external engine the agent dials
  // tcp://engine_host:kv_events_port instead. Off by default.
  bool kv_events = false;
  uint16_t kv_events_port = 5557;
  std::string kv_events_topic = "kv-events";
  // The node's cgn-kvcached, for kv_offload = "cgn": its gRPC address (HOST:PORT) and its local
  // fast-path Unix socket. The agent fills them from [kvcached] listen and socket; the vLLM driver
  // hands both to CognitoraConnector in kv_connector_extra_config (kvcached_target,
  // kvcached_socket).
  std::string kvcached_target = "127.0.0.1:9400";
  std::string kvcached_socket = "/run/cognitora/kvcached.sock";
};

// The process to run. argv[0] is looked up on PATH. env holds only the variables the driver
// sets; the supervisor adds them to the agent's own environment.
struct LaunchCommand {
  std::vector<std::string> argv;  // empty: nothing to spawn (external engine)
  std::map<std::string, std::string> env;
};

// How an engine answers its health endpoint, as data, so one prober serves every engine.
//   vLLM:      the port is closed while the model loads; then GET /health is 200 (503 = dead).
//   llama.cpp: GET /health is 503 {"error":{"message":"Loading model",...}} while loading, then 200.
//   SGLang, TRT-LLM, MLX: GET /health 200 when ready; the port is closed before that.
// A closed port before the first "ready" means loading for every engine (no engine listens
// the instant it starts); after it, it means unhealthy.
struct HealthSpec {
  std::string path = "/health";
  unsigned ready_status = 200;
  // A response with this status whose body contains loading_marker means "still loading".
  std::optional<unsigned> loading_status;
  std::string loading_marker;
};

enum class HealthVerdict : uint8_t { kReady, kLoading, kUnhealthy };

std::string_view to_string(HealthVerdict v);

// One health answer; status 0 = no HTTP answer (refused, reset, timed out).
struct HealthAnswer {
  unsigned status = 0;
  std::string body;
};

// Pure: what one probe answer means, given whether the engine has been ready since it started.
HealthVerdict classify_health(const HealthSpec& spec, const HealthAnswer& answer, bool was_ready);

class EngineDriver {
 public:
  virtual ~EngineDriver() = default;

  // The registry name ("vllm", "sglang", "trtllm", "llamacpp", "mlx", "cgn-infer", "external").
  virtual std::string_view name() const = 0;
  // The exact command for this config, or why it cannot be built. Every driver that spawns pins
  // CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES to [engine] gpus (not set when gpus is empty:
  // the engine then sees every device the agent sees).
  virtual Result<LaunchCommand, DriverError> launch_command(const config::EngineConfig& engine,
                                                            const LaunchOptions& options) const = 0;
  // How readiness is probed; the default is GET /health answering 200 once loaded (vLLM, SGLang,
  // TensorRT-LLM, cgn-infer, the simulator).
  virtual HealthSpec health(const LaunchOptions& /*options*/) const { return HealthSpec{}; }
  // The Prometheus metrics path, or nullopt when the engine has none (MLX) or it is unknown.
  // The default is /metrics.
  virtual std::optional<std::string> metrics_path(const LaunchOptions& /*options*/) const {
    return std::string("/metrics");
  }
  // The routing scraper's mapping for this engine, or nullopt (no scrape).
  virtual std::optional<routing::EngineKind> metrics_kind(const LaunchOptions& options) const = 0;
  // False for drivers that attach to a process someone else runs.
  virtual bool spawns() const { return true; }
  // True when the engine can publish vLLM-format KV events over ZMQ (vLLM, SGLang, the simulator;
  // external: whatever runs there was started with them). launch_command adds the flags.
  virtual bool publishes_kv_events() const { return false; }
};

// A driver that spawns its engine. launch_command() runs the checks every such driver shares
// (detail::check_common, detail::require_role_both / reject_offload / require_single_tp where
// the driver's traits ask for them),
// lets engine_line() write the engine's own program and flags, then appends [engine] extra_args
// and pins the GPUs. Each driver file keeps its engine's wire facts: the line, health, metrics.
class SpawningDriver : public EngineDriver {
 public:
  struct Traits {
    std::optional<routing::EngineKind> metrics_kind;  // the scrape mapping; nullopt: no scrape
    // Non-empty: why the engine has no prefill/decode split; roles other than both are rejected
    // with it (detail::require_role_both).
    std::string_view no_pd_reason;
    // Non-empty: why the engine has no KV offload; every kv_offload but none is rejected with it
    // (detail::reject_offload).
    std::string_view no_offload_reason;
    bool single_tp = false;  // no tensor-parallel flag (detail::require_single_tp)
  };
  explicit SpawningDriver(Traits traits) : traits_(traits) {}

  Result<LaunchCommand, DriverError> launch_command(const config::EngineConfig& engine,
                                                    const LaunchOptions& options) const final;
  std::optional<routing::EngineKind> metrics_kind(const LaunchOptions& /*options*/) const final {
    return traits_.metrics_kind;
  }

 protected:
  // The engine's checks beyond the shared ones, and its line up to (not including) extra_args.
  virtual Status<DriverError> engine_line(const config::EngineConfig& engine, const LaunchOptions& options,
                                          LaunchCommand& cmd) const = 0;

 private:
  Traits traits_;
};

// Drivers by name. Not thread-safe while registering; read-only use is.
class DriverRegistry {
 public:
  // Replaces any driver of the same name.
  void add(std::unique_ptr<EngineDriver> driver);
  Result<const EngineDriver*, DriverError> find(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, std::unique_ptr<EngineDriver>, std::less<>> drivers_;
};

// vllm, sglang, trtllm, llamacpp, mlx, cgn-infer, external, sim.
void register_builtin_drivers(DriverRegistry& registry);

// The process-wide registry with the built-in drivers.
const DriverRegistry& builtin_drivers();

// Factories, one per driver file.
std::unique_ptr<EngineDriver> make_vllm_driver();
std::unique_ptr<EngineDriver> make_sglang_driver();
std::unique_ptr<EngineDriver> make_trtllm_driver();
std::unique_ptr<EngineDriver> make_llamacpp_driver();
std::unique_ptr<EngineDriver> make_mlx_driver();
std::unique_ptr<EngineDriver> make_cgn_infer_driver();
std::unique_ptr<EngineDriver> make_external_driver();
std::unique_ptr<EngineDriver> make_sim_driver();

// Helpers shared by the driver files.
namespace detail {
// CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES from gpus ("0,1"); nothing when gpus is empty.
void pin_gpus(const std::vector<uint32_t>& gpus, std::map<std::string, std::string>& env);
// Common checks: model set, port non-zero, tensor_parallel >= 1.
Status<DriverError> check_common(const config::EngineConfig& engine, std::string_view driver);
Error<DriverError> unsupported(std::string_view driver, std::string_view what);
std::string served_name_or_model(const config::EngineConfig& engine);
// The --kv-events-config JSON for options: the engine's PUB dials tcp://127.0.0.1:kv_events_port,
// where the agent's SUB listens (vLLM, SGLang and the simulator bind only an endpoint with a
// wildcard, so a loopback endpoint makes the engine connect and nothing of it listens). vLLM needs
// "enable_kv_cache_events":true; SGLang's config has no such key (the flag itself enables).
std::string kv_events_config_json(const LaunchOptions& options, bool with_enable_key);
// The matrix's error for one cell: `DRIVER: kv_offload = "O" with role "R" is not supported: WHY`
// (kUnsupported), naming the engine, the offload, the role and the reason.
Error<DriverError> unsupported_offload(std::string_view driver, const LaunchOptions& options,
                                       std::string_view why);
// For engines with no prefill/decode split: role must be both (else unsupported_offload with why).
Status<DriverError> require_role_both(const LaunchOptions& options, std::string_view driver,
                                      std::string_view why);
// For engines with no KV offload: kv_offload must be none (else unsupported_offload with why).
Status<DriverError> reject_offload(const LaunchOptions& options, std::string_view driver,
                                   std::string_view why);
// One vLLM KV connector as KVTransferConfig fields (vllm/config/kv_transfer.py): kv_connector,
// kv_connector_module_path (an out-of-tree connector: vLLM imports the module and takes the class
// named kv_connector from it, kv_connector/factory.py) and kv_connector_extra_config.
struct VllmConnector {
  std::string name;
  std::string module_path;                                 // empty: a connector vLLM registers
  std::vector<std::pair<std::string, std::string>> extra;  // string-valued extra config, in order
};
// --kv-transfer-config for one connector: {"kv_connector":N,"kv_role":"kv_both"
// [,"kv_connector_module_path":M][,"kv_connector_extra_config":{...}]}, compact JSON.
std::string vllm_kv_transfer_json(const VllmConnector& connector);
// --kv-transfer-config for a composite connector (vLLM's MultiConnector, Dynamo's PdConnector)
// whose kv_connector_extra_config "connectors" lists each child's own config, in order.
std::string vllm_kv_transfer_json(const VllmConnector& outer, const std::vector<VllmConnector>& children);
// Appends `--host H --port N` (every spawned engine's bind address, right after its model).
void add_host_port(const config::EngineConfig& engine, std::vector<std::string>& argv);
// With options.kv_events: appends --kv-events-config and kv_events_config_json().
void add_kv_events(const LaunchOptions& options, bool with_enable_key, std::vector<std::string>& argv);
// For engines with no tensor-parallel flag: tensor_parallel must be 1.
Status<DriverError> require_single_tp(const config::EngineConfig& engine, std::string_view driver);
}  // namespace detail

}  // namespace cgn::agent
