#include "sim/engine_flags.h"

#include <algorithm>
#include <span>
#include <vector>

namespace cgn::sim {

namespace {

// vLLM: every flag `vllm serve` registers (make_arg_parser: its own, FrontendArgs,
// AsyncEngineArgs, EngineArgs), option strings as written there.
constexpr std::string_view kVllmFlags[] = {
    // make_arg_parser and argparse
    "-h", "--help", "--headless", "--api-server-count", "-asc", "--config", "--grpc",
    // BaseFrontendArgs, FrontendArgs
    "--lora-modules", "--chat-template", "--chat-template-content-format", "--trust-request-chat-template",
    "--default-chat-template-kwargs", "--response-role", "--return-tokens-as-token-ids",
    "--enable-auto-tool-choice", "--exclude-tools-when-tool-choice-none", "--tool-call-parser",
    "--tool-parser-plugin", "--tool-server", "--log-config-file", "--max-log-len",
    "--enable-prompt-tokens-details", "--enable-per-request-metrics", "--enable-server-load-tracking",
    "--enable-force-include-usage", "--enable-tokenizer-info-endpoint", "--enable-log-outputs",
    "--enable-log-deltas", "--cohere-is-reasoning-model", "--cohere-format", "--log-error-stack",
    "--tokens-only", "--fingerprint-mode", "--fingerprint-value", "--host", "--port",
    "--data-parallel-supervisor-port", "--dp-supervisor-probe-interval-s", "--dp-supervisor-probe-timeout-s",
    "--dp-supervisor-probe-failure-threshold", "--uds", "--uvicorn-log-level", "--disable-uvicorn-access-log",
    "--disable-access-log-for-endpoints", "--allow-credentials", "--allowed-origins", "--allowed-methods",
    "--allowed-headers", "--api-key", "--ssl-keyfile", "--ssl-certfile", "--ssl-ca-certs",
    "--enable-ssl-refresh", "--ssl-cert-reqs", "--ssl-ciphers", "--root-path", "--middleware",
    "--enable-request-id-headers", "--disable-fastapi-docs", "--h11-max-incomplete-event-size",
    "--h11-max-header-count", "--enable-offline-docs", "--enable-flash-late-interaction",
    // AsyncEngineArgs
    "--enable-log-requests", "--disable-log-requests",
    // EngineArgs: ModelConfig
    "--model", "--runner", "--convert", "--task", "--tokenizer", "--tokenizer-mode", "--trust-remote-code",
    "--dtype", "--seed", "--hf-config-path", "--allowed-local-media-path", "--allowed-media-domains",
    "--revision", "--code-revision", "--rope-scaling", "--rope-theta", "--tokenizer-revision",
    "--max-model-len", "--quantization", "-q", "--enforce-eager", "--max-logprobs", "--logprobs-mode",
    "--disable-sliding-window", "--disable-cascade-attn", "--skip-tokenizer-init", "--enable-prompt-embeds",
    "--served-model-name", "--config-format", "--hf-token", "--hf-overrides", "--pooler-config",
    "--override-pooler-config", "--logits-processor-pattern", "--generation-config",
    "--override-generation-config", "--enable-sleep-mode", "--model-impl", "--override-attention-dtype",
    "--logits-processors", "--io-processor-plugin",
    // LoadConfig
    "--load-format", "--download-dir", "--safetensors-load-strategy", "--model-loader-extra-config",
    "--ignore-patterns", "--use-tqdm-on-load", "--pt-load-map-location",
    // StructuredOutputsConfig (and the deprecated guided-decoding flags)
    "--reasoning-parser", "--guided-decoding-backend", "--guided-decoding-disable-fallback",
    "--guided-decoding-disable-any-whitespace", "--guided-decoding-disable-additional-properties",
    // ParallelConfig
    "--distributed-executor-backend", "--pipeline-parallel-size", "-pp", "--tensor-parallel-size", "-tp",
    "--decode-context-parallel-size", "-dcp", "--data-parallel-size", "-dp", "--data-parallel-rank", "-dpn",
    "--data-parallel-start-rank", "-dpr", "--data-parallel-size-local", "-dpl", "--data-parallel-address",
    "-dpa", "--data-parallel-rpc-port", "-dpp", "--data-parallel-backend", "-dpb",
    "--data-parallel-hybrid-lb", "--enable-expert-parallel", "--all2all-backend", "--enable-dbo",
    "--dbo-decode-token-threshold", "--dbo-prefill-token-threshold", "--disable-nccl-for-dp-synchronization",
    "--enable-eplb", "--eplb-config", "--expert-placement-strategy", "--num-redundant-experts",
    "--eplb-window-size", "--eplb-step-interval", "--eplb-log-balancedness", "--max-parallel-loading-workers",
    "--ray-workers-use-nsight", "--disable-custom-all-reduce", "--worker-cls", "--worker-extension-cls",
    "--enable-multimodal-encoder-data-parallel",
    // CacheConfig
    "--block-size", "--gpu-memory-utilization", "--kv-cache-memory-bytes", "--swap-space", "--kv-cache-dtype",
    "--num-gpu-blocks-override", "--enable-prefix-caching", "--prefix-caching-hash-algo", "--cpu-offload-gb",
    "--calculate-kv-scales", "--kv-sharing-fast-prefill", "--mamba-cache-dtype", "--mamba-ssm-cache-dtype",
    "--mamba-block-size",
    // MultiModalConfig
    "--limit-mm-per-prompt", "--enable-mm-embeds", "--media-io-kwargs", "--mm-processor-kwargs",
    "--mm-processor-cache-gb", "--disable-mm-preprocessor-cache", "--mm-processor-cache-type",
    "--mm-shm-cache-max-object-size-mb", "--mm-encoder-tp-mode", "--mm-encoder-attn-backend",
    "--interleave-mm-strings", "--skip-mm-profiling", "--video-pruning-rate",
    // LoRAConfig
    "--enable-lora", "--max-loras", "--max-lora-rank", "--lora-extra-vocab-size", "--lora-dtype",
    "--max-cpu-loras", "--fully-sharded-loras", "--default-mm-loras",
    // ObservabilityConfig
    "--show-hidden-metrics-for-version", "--otlp-traces-endpoint", "--collect-detailed-traces",
    // SchedulerConfig
    "--max-num-batched-tokens", "--max-num-seqs", "--max-num-partial-prefills", "--max-long-partial-prefills",
    "--long-prefill-token-threshold", "--num-lookahead-slots", "--scheduling-policy",
    "--enable-chunked-prefill", "--disable-chunked-mm-input", "--scheduler-cls", "--external-parameters",
    "--disable-hybrid-kv-cache-manager", "--async-scheduling",
    // CompilationConfig
    "--cudagraph-capture-sizes", "--cuda-graph-sizes", "--max-cudagraph-capture-size",
    // VllmConfig
    "--speculative-config", "--kv-transfer-config", "--kv-events-config", "--compilation-config", "-O",
    "--additional-config", "--structured-outputs-config",
    // Other
    "--disable-log-stats", "--aggregate-engine-logging",
    // vLLM 0.20 flags newer than the arg_utils.py read above, used by the vLLM DeepSeek-V4-Flash recipe
    // (vllm-project/recipes models/deepseek-ai/DeepSeek-V4-Flash.yaml at ec99fcc6, min_vllm_version 0.20.0)
    "--attention-config", "--moe-backend"};

// vLLM's BooleanOptionalAction flags (bool fields through get_kwargs, and the explicit ones):
// each also takes --no-<name>.
constexpr std::string_view kVllmBooleans[] = {"--trust-request-chat-template",
                                              "--return-tokens-as-token-ids",
                                              "--enable-auto-tool-choice",
                                              "--exclude-tools-when-tool-choice-none",
                                              "--enable-prompt-tokens-details",
                                              "--enable-per-request-metrics",
                                              "--enable-server-load-tracking",
                                              "--enable-force-include-usage",
                                              "--enable-tokenizer-info-endpoint",
                                              "--enable-log-outputs",
                                              "--enable-log-deltas",
                                              "--cohere-is-reasoning-model",
                                              "--log-error-stack",
                                              "--tokens-only",
                                              "--disable-uvicorn-access-log",
                                              "--allow-credentials",
                                              "--enable-ssl-refresh",
                                              "--enable-request-id-headers",
                                              "--disable-fastapi-docs",
                                              "--enable-offline-docs",
                                              "--enable-flash-late-interaction",
                                              "--enable-log-requests",
                                              "--disable-log-requests",
                                              "--trust-remote-code",
                                              "--enforce-eager",
                                              "--disable-sliding-window",
                                              "--disable-cascade-attn",
                                              "--skip-tokenizer-init",
                                              "--enable-prompt-embeds",
                                              "--enable-sleep-mode",
                                              "--use-tqdm-on-load",
                                              "--data-parallel-hybrid-lb",
                                              "--enable-expert-parallel",
                                              "--enable-dbo",
                                              "--disable-nccl-for-dp-synchronization",
                                              "--enable-eplb",
                                              "--eplb-log-balancedness",
                                              "--ray-workers-use-nsight",
                                              "--disable-custom-all-reduce",
                                              "--enable-prefix-caching",
                                              "--calculate-kv-scales",
                                              "--kv-sharing-fast-prefill",
                                              "--enable-mm-embeds",
                                              "--interleave-mm-strings",
                                              "--skip-mm-profiling",
                                              "--enable-lora",
                                              "--fully-sharded-loras",
                                              "--enable-chunked-prefill",
                                              "--disable-chunked-mm-input",
                                              "--disable-hybrid-kv-cache-manager",
                                              "--async-scheduling"};

// vLLM's JSON flags: "--<flag>.key value" sets one key (FlexibleArgumentParser).
constexpr std::string_view kVllmJsonFlags[] = {"--speculative-config",
                                               "--kv-transfer-config",
                                               "--kv-events-config",
                                               "--compilation-config",
                                               "--additional-config",
                                               "--eplb-config",
                                               "--structured-outputs-config",
                                               "--hf-overrides",
                                               "--rope-scaling",
                                               "--pooler-config",
                                               "--limit-mm-per-prompt",
                                               "--media-io-kwargs",
                                               "--mm-processor-kwargs",
                                               "--override-generation-config",
                                               "--model-loader-extra-config",
                                               "--attention-config"};

// SGLang: ServerArgs fields (flag = "--" + field name with '-' for '_') and their aliases.
constexpr std::string_view kSglangFlags[] = {
    "-h", "--help", "--config",
    // Model and tokenizer
    "--model-path", "--model", "--tokenizer-path", "--tokenizer-mode", "--tokenizer-backend",
    "--tokenizer-worker-num", "--detokenizer-worker-num", "--skip-tokenizer-init", "--load-format",
    "--model-loader-extra-config", "--trust-remote-code", "--context-length", "--is-embedding",
    "--enable-multimodal", "--revision", "--model-impl", "--json-model-override-args",
    // Quantization and data type
    "--dtype", "--quantization", "--quantization-param-path", "--kv-cache-dtype", "--enable-fp32-lm-head",
    // Memory and scheduling
    "--mem-fraction-static", "--max-running-requests", "--max-queued-requests", "--max-total-tokens",
    "--chunked-prefill-size", "--max-prefill-tokens", "--prefill-max-requests", "--schedule-policy",
    "--enable-priority-scheduling", "--schedule-conservativeness", "--page-size", "--swa-full-tokens-ratio",
    "--disable-hybrid-swa-memory", "--radix-eviction-policy", "--disable-radix-cache",
    "--disable-chunked-prefix-cache", "--disable-overlap-schedule", "--num-continuous-decode-steps",
    "--enable-mixed-chunk",
    // Distributed topology and parallelism
    "--nccl-port", "--dist-timeout", "--dist-init-addr", "--nccl-init-addr", "--nnodes", "--node-rank",
    "--tp-size", "--tensor-parallel-size", "--dcp-size", "--pp-size", "--pipeline-parallel-size", "--dp-size",
    "--data-parallel-size", "--load-balance-method", "--enable-dp-attention", "--enable-dp-lm-head",
    "--enable-p2p-check",
    // Kernel backends, MoE (the DeepSeek-V4-Flash recipe's; fields disable_flashinfer_autotune and
    // moe_runner_backend)
    "--disable-flashinfer-autotune", "--moe-runner-backend",
    // Device
    "--device", "--base-gpu-id", "--gpu-id-step", "--random-seed", "--watchdog-timeout", "--sleep-on-idle",
    // HTTP server, SSL
    "--host", "--port", "--fastapi-root-path", "--skip-server-warmup", "--warmups", "--ssl-keyfile",
    "--ssl-certfile", "--ssl-ca-certs", "--enable-ssl-refresh",
    // API
    "--api-key", "--admin-api-key", "--served-model-name", "--weight-version", "--chat-template",
    "--completion-template", "--file-storage-path", "--enable-cache-report", "--reasoning-parser",
    "--tool-call-parser", "--tool-server", "--sampling-defaults", "--allow-auto-truncate",
    // Streaming
    "--stream-interval", "--stream-response-default-include-usage", "--incremental-streaming-output",
    // Logging, metrics
    "--log-level", "--log-level-http", "--log-requests", "--log-requests-level", "--crash-dump-folder",
    "--show-time-cost", "--enable-metrics", "--enable-metrics-for-all-schedulers",
    "--enable-request-time-stats-logging", "--kv-events-config",
    // Hierarchical cache, LMCache
    "--enable-hierarchical-cache", "--hicache-ratio", "--hicache-size", "--hicache-write-policy",
    "--hicache-io-backend", "--hicache-mem-layout", "--hicache-storage-backend", "--enable-lmcache",
    "--lmcache-config-file",
    // P/D disaggregation
    "--disaggregation-mode", "--disaggregation-transfer-backend", "--disaggregation-bootstrap-port",
    // Speculative decoding
    "--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-steps",
    "--speculative-eagle-topk", "--speculative-num-draft-tokens"};

struct Table {
  std::span<const std::string_view> flags;
  std::span<const std::string_view> booleans;  // with a --no- form
  std::span<const std::string_view> json;      // with a .key form
  bool underscores;                            // '_' reads as '-' in a flag name
  std::string_view prog;                       // argparse's prog
  std::string_view usage;
};

const Table* table_for(Flavour f) {
  static const Table kVllm{kVllmFlags, kVllmBooleans, kVllmJsonFlags,
                           true,       "vllm serve",  "usage: vllm serve [model_tag] [options]"};
  static const Table kSglang{kSglangFlags,
                             {},
                             {},
                             false,
                             "launch_server.py",
                             "usage: launch_server.py [-h] --model-path MODEL_PATH [options]"};
  switch (f) {
    case Flavour::kVllm:
      return &kVllm;
    case Flavour::kSglang:
      return &kSglang;
    default:
      return nullptr;
  }
}

bool contains(std::span<const std::string_view> set, std::string_view s) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

// Every option string `s` is a form of: the flags, and --no-<flag> for booleans.
bool exact(const Table& t, std::string_view s) {
  if (contains(t.flags, s)) {
    return true;
  }
  return s.starts_with("--no-") && contains(t.booleans, "--" + std::string(s.substr(5)));
}

std::string error(const Table& t, const std::string& what) {
  return std::string(t.usage) + "\n" + std::string(t.prog) + ": error: " + what;
}

}  // namespace

std::string_view engine_flags_source(Flavour flavour) {
  switch (flavour) {
    case Flavour::kVllm:
      return "vLLM: vllm/engine/arg_utils.py at 99d7eb5d, vllm/entrypoints/openai/cli_args.py at 00522333";
    case Flavour::kSglang:
      return "SGLang: python/sglang/srt/server_args.py at 001067ff (common fields)";
    default:
      return "";
  }
}

std::optional<std::string> engine_flag_error(Flavour flavour, std::string_view flag) {
  const Table* t = table_for(flavour);
  if (t == nullptr || flag.size() < 2 || flag[0] != '-') {
    return std::nullopt;
  }
  std::string name(flag);
  if (flag.starts_with("--") && t->underscores) {
    // FlexibleArgumentParser: between "--" and the first '.', '_' is '-'; "--json-flag.key".
    const size_t dot = name.find('.');
    std::replace(name.begin(), name.begin() + static_cast<std::ptrdiff_t>(std::min(dot, name.size())), '_',
                 '-');
    if (dot != std::string::npos) {
      const std::string base = name.substr(0, dot);
      if (contains(t->json, base)) {
        return std::nullopt;
      }
      return error(*t, "unrecognized arguments: " + std::string(flag));
    }
  }
  if (exact(*t, name)) {
    return std::nullopt;
  }
  if (!name.starts_with("--")) {
    // A short option with its value attached: -O3, -tp4 are -O 3 and -tp 4 to argparse.
    for (const auto& f : t->flags) {
      if (!f.starts_with("--") && name.size() > f.size() && name.starts_with(f)) {
        return std::nullopt;
      }
    }
    return error(*t, "unrecognized arguments: " + std::string(flag));
  }
  // argparse's abbreviations: a unique prefix of one option string.
  std::vector<std::string> matches;
  for (const auto& f : t->flags) {
    if (f.starts_with(name)) {
      matches.emplace_back(f);
    }
  }
  if (matches.size() == 1) {
    return std::nullopt;
  }
  if (matches.empty()) {
    return error(*t, "unrecognized arguments: " + std::string(flag));
  }
  std::string list;
  for (const auto& m : matches) {
    list += (list.empty() ? "" : ", ") + m;
  }
  return error(*t, "ambiguous option: " + std::string(flag) + " could match " + list);
}

}  // namespace cgn::sim
