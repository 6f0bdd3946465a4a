// The Cognitora configuration (cognitora.toml) as typed structs with defaults. One file serves
// every binary: each reads the sections it needs and ignores the rest, but every key in the file
// must be known to the schema (a typo is an error, not a silently ignored setting).
// docs/configuration.md lists every key; docs/examples/cognitora.toml is a complete example.
//
// Later issues extend these structs: add the field with its default here, read it in config.cpp
// (read_<section>), print it in dump_config, document it, and test the error for a bad value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config_reader.h"
#include "core/result.h"
#include "core/routing_defaults.h"

namespace cgn::config {

// [log]
struct LogConfig {
  std::string level = "info";  // trace|debug|info|warn|error|off
  std::string file;            // empty: stderr
  bool operator==(const LogConfig&) const = default;
};

// [router.limits]: bounds on what a client may send.
struct LimitsConfig {
  uint64_t max_body_bytes = 8u << 20;  // 8 MiB
  uint32_t max_json_depth = 64;
  uint32_t max_messages = 4096;
  uint32_t max_header_bytes = 16u << 10;   // 16 KiB, all request headers together
  uint32_t max_connections = 4096;         // open client connections; one more gets 503
  uint64_t max_buffered_bytes = 1u << 30;  // request bodies in memory, all connections; over: 503
  uint32_t reject_log_interval_s = 10;     // one "request refused" line per client address per interval
  bool operator==(const LimitsConfig&) const = default;
};

// [router.metrics]: who may read /metrics.
struct MetricsConfig {
  std::string listen;  // HOST:PORT of a listener serving only /metrics; empty: the API listener serves it
  Secret key;          // from the variable named by key_env: bearer token /metrics then requires
  bool operator==(const MetricsConfig&) const = default;
};

// [router.admin]: the operator's endpoints (/admin/v1/..., cgn-ctl).
struct AdminConfig {
  Secret key;  // from the variable named by key_env; none: the admin endpoints answer 403
  bool operator==(const AdminConfig&) const = default;
};

// [router.timeouts], milliseconds.
struct TimeoutsConfig {
  uint32_t connect_ms = 2000;          // TCP connect to a node
  uint32_t first_token_ms = 120000;    // request sent -> first byte of the node's answer
  uint32_t idle_ms = 60000;            // longest gap between two streamed chunks
  uint32_t request_ms = 600000;        // whole request, stream included
  uint32_t shutdown_grace_ms = 30000;  // in-flight streams may finish this long after SIGTERM
  uint32_t health_interval_ms = 2000;  // static backend: health poll period per node
  // Agents only: the body waits for the agent's "100 Continue"; none within this is a failed
  // connect (the request goes elsewhere). 0: no Expect: 100-continue.
  uint32_t continue_ms = 2000;
  // A node taken out of routing because it refused a connection (or sent no "100 Continue") is
  // tried again after this long. Polled (static) nodes come back sooner when a poll answers;
  // etcd and gossip nodes, which are not polled, rely on this.
  uint32_t passive_retry_ms = 5000;
  bool operator==(const TimeoutsConfig&) const = default;
};

// [router.routing.weights]: the TTFT estimate (docs/design/principles.md), all in milliseconds.
// Defaults: core/routing_defaults.h (shared with the routing core's RoutingPolicy).
struct ScoreWeights {
  double prefill_ms_per_block = routing_defaults::kPrefillMsPerBlock;
  double queue_ms_per_request = routing_defaults::kQueueMsPerRequest;
  double running_ms_per_request = routing_defaults::kRunningMsPerRequest;
  double inflight_prefill_weight = routing_defaults::kInflightPrefillWeight;
  double uncached_weight = routing_defaults::kUncachedWeight;
  double kv_knee = routing_defaults::kKvKnee;
  double kv_pressure_ms = routing_defaults::kKvPressureMs;
  double power_penalty_ms = routing_defaults::kPowerPenaltyMs;
  double ram_tier_credit = routing_defaults::kRamTierCredit;
  double ssd_tier_credit = routing_defaults::kSsdTierCredit;
  double temperature = routing_defaults::kTemperatureMs;
  bool operator==(const ScoreWeights&) const = default;
};

// [router.routing.load_guard]: filters applied before overlap is considered.
struct LoadGuardConfig {
  uint32_t max_queue_depth = routing_defaults::kMaxQueueDepth;
  double max_kv_used = routing_defaults::kMaxKvUsed;
  uint32_t spread_min_gap = routing_defaults::kSpreadMinGap;
  double spread_ratio = routing_defaults::kSpreadRatio;
  bool operator==(const LoadGuardConfig&) const = default;
};

// [router.routing]
struct RoutingConfig {
  uint32_t block_bytes = routing_defaults::kBlockBytes;
  uint32_t index_ttl_s = routing_defaults::kIndexTtlS;
  uint32_t max_staleness_ms = routing_defaults::kMaxStalenessMs;
  uint64_t index_max_entries = routing_defaults::kIndexMaxEntries;  // 0: from the engines' capacity
  ScoreWeights weights;
  LoadGuardConfig load_guard;
  bool operator==(const RoutingConfig&) const = default;
};

// [router.admission.models."<model>"]: overrides of the default cap for one model.
struct ModelAdmission {
  std::optional<uint32_t> max_queue;          // both roles
  std::optional<uint32_t> prefill_max_queue;  // role-specific, wins over max_queue
  std::optional<uint32_t> decode_max_queue;
  bool operator==(const ModelAdmission&) const = default;
};

// [router.admission]
struct AdmissionConfig {
  uint32_t max_queue = 256;  // in-flight cap per (model, role); 0 = unlimited
  uint32_t retry_after_s = 1;
  std::map<std::string, ModelAdmission> models;

  // The cap for (model, role) where role is "prefill", "decode" or "both".
  uint32_t max_queue_for(std::string_view model, std::string_view role) const;
  bool operator==(const AdmissionConfig&) const = default;
};

// [router.disaggregation]: prefill/decode serving (docs/architecture/disaggregation.md).
struct DisaggregationConfig {
  // When a model has prefill/decode nodes but no prefill node is eligible: "aggregated" serves
  // the whole request on a decode (or both) node; "reject" answers 503.
  std::string fallback = "aggregated";
  bool operator==(const DisaggregationConfig&) const = default;
};

// [router.grpc]: the gRPC API (docs/grpc-api.md), a listener of its own beside HTTP.
struct GrpcConfig {
  std::string listen;         // HOST:PORT; empty: no gRPC listener
  std::string tls_cert;       // PEM; both or neither with tls_key
  std::string tls_key;        // PEM
  std::string tls_client_ca;  // PEM; set: clients must present a certificate it verifies (needs tls_cert)
  bool operator==(const GrpcConfig&) const = default;
};

// [router.carbon]: carbon-aware admission (docs/carbon.md). While the grid's intensity is over
// the threshold, requests marked X-CGN-Priority: low get 429; off by default.
struct CarbonConfig {
  std::string provider = "off";          // kCarbonProviders (router/carbon/registry.h registers them)
  std::string zone;                      // Electricity Maps zone or WattTime region
  std::string url;                       // the provider's base URL; empty: its public API
  double threshold_gco2_per_kwh = 400;   // low priority is deferred while the reading is above
  double static_gco2_per_kwh = 0;        // provider = "static": the reading
  Secret token;                          // Electricity Maps auth-token (token_env)
  std::string username;                  // WattTime login
  Secret password;                       // WattTime password (password_env)
  std::string signal_type = "co2_moer";  // WattTime signal; a rate, never a percentile
  uint32_t poll_interval_ms = 900000;
  uint32_t timeout_ms = 10000;
  uint32_t max_backoff_ms = 3600000;
  bool operator==(const CarbonConfig&) const = default;
};

// [[router.cascade.aliases."<alias>".steps]]: one step of a cascade (docs/cascade.md). Every step
// but the last is gated: its buffered answer is accepted when the confidence statistic over its
// token logprobs is at least `threshold`; the last step is never gated and sets none of the three.
struct CascadeStepConfig {
  std::string model;                     // required: a model some node serves
  std::string statistic;                 // kCascadeStatistics; empty: "mean"
  std::optional<double> threshold;       // required on a gated step, a logprob (<= 0)
  std::optional<uint32_t> first_tokens;  // the statistic over the first N tokens; unset or 0: all
  bool operator==(const CascadeStepConfig&) const = default;
};

// [router.cascade.aliases."<alias>"]: a model name clients send, served by a cascade of steps.
struct CascadeAliasConfig {
  std::vector<CascadeStepConfig> steps;  // cheap -> expensive; at least two
  // Of an X-CGN-Deadline-Ms budget, what gated steps leave for the last step (beyond its
  // estimated time to first token): a gated step is skipped when no more is left, and cut off
  // (escalated as failed) when it would use it.
  uint32_t deadline_reserve_ms = 250;
  bool operator==(const CascadeAliasConfig&) const = default;
};

// [router.cascade]
struct CascadeConfig {
  std::map<std::string, CascadeAliasConfig> aliases;
  bool operator==(const CascadeConfig&) const = default;
};

// [[router.nodes]]: static nodes (state_backend = "static", or extra bare endpoints).
struct NodeConfig {
  std::string url;                  // required, http:// or https://
  std::string name;                 // default: the URL's host:port
  std::string role = "both";        // prefill|decode|both
  std::vector<std::string> models;  // empty: learned from the node (/v1/models)
  std::string agent;                // HOST:PORT of the node's cgn-agent gRPC service; empty: a bare engine
  std::string engine = "vllm";      // kNodeEngines: which /metrics mapping the static backend scrapes
  bool operator==(const NodeConfig&) const = default;
};

// [router]
struct RouterConfig {
  std::string listen = "0.0.0.0:8080";
  std::string policy = "kv";             // kv|round_robin|random|least_load|session
  std::string state_backend = "static";  // static|etcd|gossip
  std::string api_keys_file;             // one key per line; empty: none
  Secret api_keys;                       // from the variable named by api_keys_env; comma separated
  std::string tls_cert;                  // both or neither
  std::string tls_key;
  LimitsConfig limits;
  MetricsConfig metrics;
  AdminConfig admin;
  TimeoutsConfig timeouts;
  RoutingConfig routing;
  AdmissionConfig admission;
  DisaggregationConfig disaggregation;
  CarbonConfig carbon;
  GrpcConfig grpc;
  CascadeConfig cascade;
  std::vector<NodeConfig> nodes;

  // API keys from the environment, split at commas and trimmed (empty when none).
  std::vector<std::string> api_keys_from_env() const;
  bool operator==(const RouterConfig&) const = default;
};

// [state.etcd]
struct EtcdConfig {
  std::vector<std::string> endpoints = {"http://127.0.0.1:2379"};
  uint32_t lease_ttl_s = 5;
  std::string prefix = "/cognitora";
  // https:// endpoints: the CA that signed etcd's certificate (PEM; required), and this client's
  // certificate and key when etcd asks for one (--client-cert-auth). All or none but the CA.
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // etcd's own auth (Authenticate RPC): the user, and its password from the variable named by
  // password_env. Both or neither.
  std::string username;
  Secret password;
  bool operator==(const EtcdConfig&) const = default;
};

// [state.gossip]
struct GossipConfig {
  std::string listen = "0.0.0.0:7946";
  std::vector<std::string> seeds;  // HOST:PORT each
  std::string cluster_id = "cognitora";
  Secret secret;  // from the variable named by secret_env: signs and verifies every packet
  // From the variable named by rotation_secret_env: a second key that is accepted but never used
  // to sign, for the overlap while keys rotate (docs/security.md). Empty: none.
  Secret rotation_secret;
  // No key at all: packets are unsigned and anyone who reaches the port can join. Refused unless
  // this says so (logged as a warning at start).
  bool insecure = false;
  bool operator==(const GossipConfig&) const = default;
};

// [cluster]: the credential the router presents to agents (docs/security.md). A token file holds
// one token per line ('#' starts a comment line); token_env's variable holds them comma separated.
// The first token is the one presented; every one is accepted, so a rotation runs with both.
struct ClusterConfig {
  std::string token_file;
  Secret token_env;                 // from the variable named by token_env
  std::vector<std::string> tokens;  // read from either at load (never printed); empty: none
  bool operator==(const ClusterConfig&) const = default;
};

// [tls]: the one TLS block for the links inside the cluster: every gRPC server and channel (the
// agent's Agent service and the router's calls to it) and, when set, the router -> agent HTTP
// hop. Paths to PEM files. cert_file and key_file both or neither; with them, ca_file is required
// (it verifies the peer).
struct TlsConfig {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // Servers refuse a client without a certificate the CA signed. A verified client certificate
  // then stands in for the cluster token.
  bool require_client_cert = true;
  bool enabled() const { return !cert_file.empty(); }
  bool operator==(const TlsConfig&) const = default;
};

// [state]
struct StateConfig {
  EtcdConfig etcd;
  GossipConfig gossip;
  bool operator==(const StateConfig&) const = default;
};

// [agent]
struct AgentConfig {
  std::string node_id;  // empty: the host name
  std::string listen = "0.0.0.0:9090";
  double watt_limit = 0.0;                     // soft limit in watts; 0: none
  std::string grpc_listen = "0.0.0.0:9091";    // gRPC service Agent (Health); port 0: any free port
  uint32_t scrape_interval_ms = 2000;          // engine /metrics scrape period
  uint32_t probe_interval_ms = 500;            // engine health probe period while not ready
  uint32_t restart_backoff_initial_ms = 1000;  // first restart delay; doubles per crash
  uint32_t restart_backoff_max_ms = 60000;     // cap on the restart delay
  uint32_t stop_grace_ms = 15000;              // SIGTERM to the engine, then SIGKILL after this
  bool engine_outlives_agent = false;          // true: no parent-death signal for the engine
  std::string state_backend = "static";        // static (router polls Health) | etcd (publish) | gossip
  uint32_t publish_interval_ms = 250;          // etcd: at most one KV-prefix txn per interval
  uint32_t max_published_prefixes = 4096;      // etcd: cap on live KV prefix keys (also capacity-bound)
  bool engine_metrics = true;                  // /metrics also relays the engine's own exposition
  bool operator==(const AgentConfig&) const = default;
};

// [engine]
struct EngineConfig {
  std::string kind = "vllm";  // vllm|sglang|trtllm|llamacpp|mlx|cgn-infer|sim|external
  std::string model;
  uint16_t port = 8000;
  // The address a spawned engine's HTTP API binds (--host): loopback, so only the agent reaches
  // it; every other socket of the engine dials out or binds loopback too (docs/security.md).
  std::string host = "127.0.0.1";
  std::string served_name;  // empty: same as model
  uint32_t tensor_parallel = 1;
  std::vector<std::string> extra_args;
  // none|nixl|lmcache|hicache|kvbm|cgn (docs/agent.md: what each driver does with it). The older
  // boolean form is still read: false = "none", true = "cgn".
  std::string kv_offload = "none";
  std::vector<uint32_t> gpus;  // device indices; empty: all visible
  std::string role = "both";   // prefill|decode|both: this node's part in disaggregated serving
  // external: base URL of the engine someone else runs (http://HOST:PORT); nothing is spawned.
  // Empty: http://127.0.0.1:[engine] port.
  std::string url;
  std::string attach_kind;                   // external: whose health/metrics to use; "" = generic
  std::string pd_transfer_backend = "nixl";  // prefill/decode KV transfer: nixl|mooncake (SGLang)
  std::string nixl_side_channel_host;        // vLLM VLLM_NIXL_SIDE_CHANNEL_HOST; "" = engine default
  uint16_t nixl_side_channel_port = 0;       // vLLM VLLM_NIXL_SIDE_CHANNEL_PORT; 0 = engine default
  uint32_t parallel_slots = 4;               // llama.cpp --parallel
  uint32_t page_size = 0;                    // SGLang --page-size; 0 = the engine's default (1)
  // KV events (vLLM/SGLang/sim/external; docs/agent.md): the engine publishes them on
  // tcp://*:kv_events_port, the agent subscribes and withdraws evicted prefixes. Off by default.
  bool kv_events = false;
  uint16_t kv_events_port = 5557;
  bool operator==(const EngineConfig&) const = default;
};

// [kvcached]: the node-local tiered KV block store (docs/kvcached.md). Sizes in bytes.
struct KvcachedConfig {
  std::string listen = "127.0.0.1:9400";                // gRPC service KvCache; port 0: any free port
  std::string metrics_listen = "127.0.0.1:9401";        // HTTP /metrics; port 0: any free port
  std::string socket = "/run/cognitora/kvcached.sock";  // the local fast path; empty: none
  uint64_t ram_bytes = 1ull << 30;
  uint32_t page_bytes = 4096;
  uint64_t max_block_bytes = 64ull << 20;
  double high_watermark = 0.90;
  double spill_fraction = 0.05;
  uint32_t max_lease_ms = 30000;
  std::string ssd_dir;         // empty: no SSD tier
  uint64_t ssd_max_bytes = 0;  // 0: bounded by the filesystem
  uint64_t ssd_segment_bytes = 256ull << 20;
  uint32_t ssd_ttl_s = 0;                      // 0: no TTL
  std::string direct_io = "auto";              // auto|on|off
  uint32_t max_connections = 64;               // local fast path connections at once
  uint32_t max_handles_per_connection = 1024;  // open puts and pinned gets per connection
  bool operator==(const KvcachedConfig&) const = default;
};

// [[power.sources]]: one power / energy source (docs/power.md). Which keys apply depends on kind.
struct PowerSourceConfig {
  std::string name;    // unique; the `source` label; empty: the kind
  std::string kind;    // see kPowerSourceKinds
  std::string url;     // dcgm_exporter: its /metrics URL; redfish: the BMC's base URL
  std::string target;  // cgn_power: HOST:PORT of a cgn-power daemon's [power] listen
  std::string path;    // rapl: powercap root; nvml, rocm_smi: the library; ipmi: ipmitool; "": default
  std::string device;  // static: the device label; redfish: the chassis id
  double watts = 0;    // static: the configured draw
  std::string redfish_schema = "power";  // redfish: power (legacy Power) | environment (EnvironmentMetrics)
  std::string auth = "basic";            // redfish: basic | session
  std::string ca_file;                   // redfish: PEM CA bundle verifying the BMC; "": system CAs
  std::string username;                  // redfish
  Secret password;                       // redfish: from the variable named by password_env
  uint32_t timeout_ms = 2000;            // one reading (HTTP exchange, ipmitool run)
  bool operator==(const PowerSourceConfig&) const = default;
};

// [power]: cgn-power, the node's power and energy reader (docs/power.md).
struct PowerConfig {
  std::string listen = "127.0.0.1:9460";          // gRPC service Power; port 0: any free port
  std::string metrics_listen = "127.0.0.1:9461";  // HTTP /metrics; port 0: any free port
  uint32_t poll_interval_ms = 1000;
  std::vector<PowerSourceConfig> sources;
  bool operator==(const PowerConfig&) const = default;
};

struct CognitoraConfig {
  std::string source;  // file name (or source_name) it was loaded from
  // Top-level state_backend, empty when the file has none. When set it is the value of
  // router.state_backend and agent.state_backend; a different value in either is an error.
  std::string state_backend;
  LogConfig log;
  RouterConfig router;
  ClusterConfig cluster;
  TlsConfig tls;
  StateConfig state;
  AgentConfig agent;
  EngineConfig engine;
  KvcachedConfig kvcached;
  PowerConfig power;
  bool operator==(const CognitoraConfig&) const = default;
};

inline constexpr std::string_view kRoutingPolicies[] = {"kv", "round_robin", "random", "least_load",
                                                        "session"};
inline constexpr std::string_view kStateBackends[] = {"static", "etcd", "gossip"};
inline constexpr std::string_view kEngineKinds[] = {"vllm", "sglang",    "trtllm", "llamacpp",
                                                    "mlx",  "cgn-infer", "sim",    "external"};
// Engines an external engine can be attached as (every spawning kind).
inline constexpr std::string_view kAttachKinds[] = {"vllm", "sglang",    "trtllm", "llamacpp",
                                                    "mlx",  "cgn-infer", "sim"};
inline constexpr std::string_view kKvOffloads[] = {"none", "nixl", "lmcache", "hicache", "kvbm", "cgn"};
inline constexpr std::string_view kDirectIoModes[] = {"auto", "on", "off"};
inline constexpr std::string_view kPowerSourceKinds[] = {"nvml",    "rocm_smi", "dcgm_exporter", "rapl",
                                                         "redfish", "ipmi",     "static",        "cgn_power"};
inline constexpr std::string_view kRedfishSchemas[] = {"power", "environment"};
inline constexpr std::string_view kRedfishAuths[] = {"basic", "session"};
inline constexpr std::string_view kPdTransferBackends[] = {"nixl", "mooncake"};
inline constexpr std::string_view kCarbonProviders[] = {"off", "static", "electricitymaps", "watttime"};
inline constexpr std::string_view kCascadeStatistics[] = {"mean", "min"};
inline constexpr std::string_view kNodeRoles[] = {"prefill", "decode", "both"};
// [[router.nodes]] engine: mlx and cgn-infer have no /metrics mapping (health and models only).
inline constexpr std::string_view kNodeEngines[] = {"vllm",     "sglang", "trtllm",
                                                    "llamacpp", "mlx",    "cgn-infer"};

// Loads and validates a file. Errors name file:line:col and the dotted key; every problem in the
// file is reported, one per line of the message. Secrets are read through `env`.
Result<CognitoraConfig, ConfigError> load_config(const std::string& path,
                                                 const EnvLookup& env = process_env());

// Same, from text; source_name is what messages call the file.
Result<CognitoraConfig, ConfigError> load_config_from_string(std::string_view text,
                                                             const std::string& source_name,
                                                             const EnvLookup& env = process_env());

// The section readers, for tools that embed part of the schema.
void read_config(TableReader& root, CognitoraConfig& cfg);

// The effective configuration as TOML, defaults filled in, for logs and --print-config. Secrets
// appear only as the names of their environment variables, never as values, so loading the dump
// in the same environment gives the same configuration.
std::string dump_config(const CognitoraConfig& cfg);

}  // namespace cgn::config
