#include "agent/driver.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <utility>

namespace cgn::agent {

std::string_view to_string(DriverError e) {
  switch (e) {
    case DriverError::kUnknownDriver:
      return "unknown_driver";
    case DriverError::kInvalidConfig:
      return "invalid_config";
    case DriverError::kUnsupported:
      return "unsupported";
  }
  return "unknown";
}

namespace {
constexpr std::pair<KvOffload, std::string_view> kOffloadNames[] = {
    {KvOffload::kNone, "none"},       {KvOffload::kNixl, "nixl"}, {KvOffload::kLmcache, "lmcache"},
    {KvOffload::kHicache, "hicache"}, {KvOffload::kKvbm, "kvbm"}, {KvOffload::kCgn, "cgn"},
};
}  // namespace

std::string_view to_string(KvOffload k) {
  for (const auto& [value, text] : kOffloadNames) {
    if (value == k) {
      return text;
    }
  }
  return "none";
}

std::optional<KvOffload> parse_kv_offload(std::string_view s) {
  for (const auto& [value, text] : kOffloadNames) {
    if (text == s) {
      return value;
    }
  }
  return std::nullopt;
}

std::string_view to_string(HealthVerdict v) {
  switch (v) {
    case HealthVerdict::kReady:
      return "ready";
    case HealthVerdict::kLoading:
      return "loading";
    case HealthVerdict::kUnhealthy:
      return "unhealthy";
  }
  return "unknown";
}

HealthVerdict classify_health(const HealthSpec& spec, const HealthAnswer& answer, bool was_ready) {
  if (answer.status == 0) {
    return was_ready ? HealthVerdict::kUnhealthy : HealthVerdict::kLoading;
  }
  if (answer.status == spec.ready_status) {
    return HealthVerdict::kReady;
  }
  if (spec.loading_status && answer.status == *spec.loading_status &&
      answer.body.find(spec.loading_marker) != std::string::npos) {
    return HealthVerdict::kLoading;
  }
  return HealthVerdict::kUnhealthy;
}

void DriverRegistry::add(std::unique_ptr<EngineDriver> driver) {
  std::string key(driver->name());
  drivers_[key] = std::move(driver);
}

Result<const EngineDriver*, DriverError> DriverRegistry::find(std::string_view name) const {
  auto it = drivers_.find(name);
  if (it == drivers_.end()) {
    return make_error(DriverError::kUnknownDriver,
                      fmt::format("no engine driver named '{}' (known: {})", name, fmt::join(names(), ", ")));
  }
  return static_cast<const EngineDriver*>(it->second.get());
}

std::vector<std::string> DriverRegistry::names() const {
  std::vector<std::string> out;
  out.reserve(drivers_.size());
  for (const auto& [name, driver] : drivers_) {
    out.push_back(name);
  }
  return out;
}

void register_builtin_drivers(DriverRegistry& registry) {
  registry.add(make_vllm_driver());
  registry.add(make_sglang_driver());
  registry.add(make_trtllm_driver());
  registry.add(make_llamacpp_driver());
  registry.add(make_mlx_driver());
  registry.add(make_cgn_infer_driver());
  registry.add(make_external_driver());
  registry.add(make_sim_driver());
}

const DriverRegistry& builtin_drivers() {
  static const DriverRegistry registry = [] {
    DriverRegistry r;
    register_builtin_drivers(r);
    return r;
  }();
  return registry;
}

namespace detail {

void pin_gpus(const std::vector<uint32_t>& gpus, std::map<std::string, std::string>& env) {
  if (gpus.empty()) {
    return;
  }
  std::string list = fmt::format("{}", fmt::join(gpus, ","));
  env["CUDA_VISIBLE_DEVICES"] = list;
  env["HIP_VISIBLE_DEVICES"] = list;
}

Status<DriverError> check_common(const config::EngineConfig& engine, std::string_view driver) {
  if (engine.model.empty()) {
    return make_error(DriverError::kInvalidConfig, fmt::format("{}: [engine] model is required", driver));
  }
  if (engine.port == 0) {
    return make_error(DriverError::kInvalidConfig, fmt::format("{}: [engine] port must be non-zero", driver));
  }
  if (engine.tensor_parallel == 0) {
    return make_error(DriverError::kInvalidConfig,
                      fmt::format("{}: [engine] tensor_parallel must be at least 1", driver));
  }
  return Ok{};
}

Error<DriverError> unsupported(std::string_view driver, std::string_view what) {
  return make_error(DriverError::kUnsupported, fmt::format("{}: {} is not supported", driver, what));
}

std::string served_name_or_model(const config::EngineConfig& engine) {
  return engine.served_name.empty() ? engine.model : engine.served_name;
}

std::string kv_events_config_json(const LaunchOptions& options, bool with_enable_key) {
  return std::string(with_enable_key ? R"({"enable_kv_cache_events":true,)" : "{") +
         R"("publisher":"zmq","endpoint":"tcp://127.0.0.1:)" + std::to_string(options.kv_events_port) +
         R"(","topic":")" + options.kv_events_topic + R"("})";
}

void add_host_port(const config::EngineConfig& engine, std::vector<std::string>& argv) {
  argv.insert(argv.end(), {"--host", engine.host, "--port", std::to_string(engine.port)});
}

void add_kv_events(const LaunchOptions& options, bool with_enable_key, std::vector<std::string>& argv) {
  if (options.kv_events) {
    argv.push_back("--kv-events-config");
    argv.push_back(kv_events_config_json(options, with_enable_key));
  }
}

Error<DriverError> unsupported_offload(std::string_view driver, const LaunchOptions& options,
                                       std::string_view why) {
  return make_error(DriverError::kUnsupported,
                    fmt::format("{}: kv_offload = \"{}\" with role \"{}\" is not supported: {}", driver,
                                to_string(options.kv_offload), routing::to_string(options.role), why));
}

Status<DriverError> require_role_both(const LaunchOptions& options, std::string_view driver,
                                      std::string_view why) {
  if (options.role != routing::NodeRole::kBoth) {
    return unsupported_offload(driver, options, why);
  }
  return Ok{};
}

Status<DriverError> reject_offload(const LaunchOptions& options, std::string_view driver,
                                   std::string_view why) {
  if (options.kv_offload != KvOffload::kNone) {
    return unsupported_offload(driver, options, why);
  }
  return Ok{};
}

namespace {
// Every connector runs with kv_role kv_both, as vLLM's own lines do (the NixlConnector P/D
// scripts and the MultiConnector example in docs/features/disagg_prefill.md) and Dynamo's
// (create_kv_transfer_config): with NIXL the side a request plays is chosen per request by its
// kv_transfer_params, and an offload tier must both store and load (LMCache's kv_consumer skips
// every save, kv_producer every load: LMCache/LMCache lmcache/integration/vllm/vllm_v1_adapter.py
// at e23f2bbc1ad8, build_connector_meta and get_num_new_matched_tokens).
nlohmann::ordered_json connector_json(const VllmConnector& c) {
  nlohmann::ordered_json j;
  j["kv_connector"] = c.name;
  j["kv_role"] = "kv_both";
  if (!c.module_path.empty()) {
    j["kv_connector_module_path"] = c.module_path;
  }
  if (!c.extra.empty()) {
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    for (const auto& [key, value] : c.extra) {
      extra[key] = value;
    }
    j["kv_connector_extra_config"] = std::move(extra);
  }
  return j;
}

// Compact; a value that is not UTF-8 (a path from a flag) becomes U+FFFD instead of throwing.
std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}
}  // namespace

std::string vllm_kv_transfer_json(const VllmConnector& connector) {
  return dump(connector_json(connector));
}

std::string vllm_kv_transfer_json(const VllmConnector& outer, const std::vector<VllmConnector>& children) {
  auto j = connector_json(outer);
  auto list = nlohmann::ordered_json::array();
  for (const auto& child : children) {
    list.push_back(connector_json(child));
  }
  j["kv_connector_extra_config"]["connectors"] = std::move(list);
  return dump(j);
}

Status<DriverError> require_single_tp(const config::EngineConfig& engine, std::string_view driver) {
  if (engine.tensor_parallel != 1) {
    return unsupported(driver, fmt::format("tensor_parallel = {} (the engine has no tensor-parallel flag; "
                                           "it uses the pinned gpus itself)",
                                           engine.tensor_parallel));
  }
  return Ok{};
}

}  // namespace detail
Result<LaunchCommand, DriverError> SpawningDriver::launch_command(const config::EngineConfig& engine,
                                                                  const LaunchOptions& options) const {
  auto st = detail::check_common(engine, name());
  if (st && !traits_.no_pd_reason.empty()) {
    st = detail::require_role_both(options, name(), traits_.no_pd_reason);
  }
  if (st && !traits_.no_offload_reason.empty()) {
    st = detail::reject_offload(options, name(), traits_.no_offload_reason);
  }
  if (st && traits_.single_tp) {
    st = detail::require_single_tp(engine, name());
  }
  LaunchCommand cmd;
  if (st) {
    st = engine_line(engine, options, cmd);
  }
  if (!st) {
    return st.error();
  }
  cmd.argv.insert(cmd.argv.end(), engine.extra_args.begin(), engine.extra_args.end());
  detail::pin_gpus(engine.gpus, cmd.env);
  return cmd;
}

}  // namespace cgn::agent
