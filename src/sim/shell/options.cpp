#include "sim/shell/options.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/cli_parse.h"
#include "core/log.h"
#include "sim/launch.h"

namespace cgn::sim {
namespace {

struct Overrides {
  std::optional<std::string> flavor, model, served, host, mode, fault, fault_rules, kv_config, engine_index,
      kv_events_config, kv_events_encoding, kvcached_target;
  std::optional<int> port;
  std::optional<double> time_scale, load_seconds, kv_abort_timeout_s;
  std::optional<uint32_t> max_waiting, block_size, num_gpu_blocks, max_num_seqs, max_batched_tokens,
      max_model_len, reply_max_tokens, embedding_dims;
  std::optional<double> step_overhead_ms, prefill_us_per_token, prefill_attention_ns_per_pair,
      decode_us_per_seq, decode_attention_ns_per_token, kv_transfer_ms, kv_transfer_us_per_token;
  bool deprecated_metrics = false;
  bool enable_admin = false;
  bool no_metrics = false;
  bool metrics = false;
  bool no_prefix_caching = false;
  std::string port_file;
  std::string log_level = "info";
};

bool is_engine_program(std::string_view base) {
  return base == "vllm" || base == "llama-server" || base == "trtllm-serve" || base == "mlx_lm.server" ||
         base.rfind("python", 0) == 0;
}

// The minimal engine line of a flavour (its defaults: metrics flags, ports).
std::vector<std::string> base_line(Flavour f, const std::string& model) {
  switch (f) {
    case Flavour::kVllm:
      return {"vllm", "serve", model};
    case Flavour::kSglang:
      return {"python", "-m", "sglang.launch_server", "--model-path", model};
    case Flavour::kLlamacpp:
      return {"llama-server", "-m", model};
    case Flavour::kTrtllm:
      return {"trtllm-serve", model};
    case Flavour::kMlx:
      return {"mlx_lm.server", "--model", model};
  }
  return {"vllm", "serve", model};
}

// Takes `--sim-port-file F` / `--sim-log-level L` (or =F) out of an engine line.
void take_shell_flags(std::vector<std::string>& line, Overrides& o) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < line.size(); ++i) {
    const std::string& w = line[i];
    auto take = [&](std::string_view flag, std::string& out) {
      if (w == flag && i + 1 < line.size()) {
        out = line[++i];
        return true;
      }
      if (w.size() > flag.size() && w.compare(0, flag.size(), flag) == 0 && w[flag.size()] == '=') {
        out = w.substr(flag.size() + 1);
        return true;
      }
      return false;
    };
    if (take("--sim-port-file", o.port_file) || take("--sim-log-level", o.log_level)) {
      continue;
    }
    kept.push_back(w);
  }
  line = std::move(kept);
}

// The engines' environment variables, as leading NAME=VALUE words.
std::vector<std::string> env_words() {
  std::vector<std::string> out;
  for (const char* name :
       {"VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_NIXL_SIDE_CHANNEL_PORT", "VLLM_NIXL_ABORT_REQUEST_TIMEOUT",
        "LLAMA_ARG_PORT", "LLAMA_ARG_N_PARALLEL", "LLAMA_ARG_ENDPOINT_METRICS"}) {
    if (const char* v = std::getenv(name); v != nullptr) {
      out.push_back(std::string(name) + "=" + v);
    }
  }
  return out;
}

void add_flags(CLI::App& app, Overrides& o) {
  app.add_option("--flavor,--flavour", o.flavor,
                 "Engine to imitate: vllm, sglang, llamacpp, trtllm, mlx (default vllm)")
      ->check(CLI::IsMember({"vllm", "sglang", "llamacpp", "trtllm", "mlx"}));
  app.add_option("--model", o.model, "Model name or path (required without an engine line)");
  app.add_option("--served-model-name", o.served, "The model id clients use (default: --model)");
  app.add_option("--host", o.host, "IPv4 address to listen on (default 127.0.0.1)");
  app.add_option("--port", o.port, "Port; 0 binds a free port (default: the flavour's port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--port-file", o.port_file,
                 "Write the bound port to this file (PORT\\n, via F.tmp + rename) once it is reserved");
  app.add_option("--mode", o.mode, "Reply text: random (seeded words) or echo (the last user message)")
      ->check(CLI::IsMember({"random", "echo"}));
  app.add_option("--time-scale", o.time_scale, "Multiply every modelled duration (0.1 = ten times faster)")
      ->check(CLI::Range(1e-6, 1e6));
  app.add_option("--load-seconds", o.load_seconds,
                 "Start-up (model load) delay in seconds: vLLM/SGLang/TRT-LLM/MLX keep the port closed, "
                 "llama.cpp answers 503 'Loading model'")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_flag("--deprecated-metrics", o.deprecated_metrics,
               "vLLM: also emit the deprecated metric names (gpu_cache_usage_perc, ...)");
  app.add_flag("--metrics", o.metrics,
               "Serve Prometheus metrics (llama.cpp --metrics, SGLang --enable-metrics)");
  app.add_flag("--no-metrics", o.no_metrics, "Serve no metrics endpoint");
  app.add_flag("--enable-admin", o.enable_admin,
               "Serve POST /admin/evict and GET /admin/state (off by default: any caller could drop the "
               "cache; --sim-enable-admin in an engine line)");
  app.add_option(
      "--fault", o.fault,
      "Fault plan for every request (or rate=F of them): error=429|500|503, drop_after=N, "
      "stall=D[@N], slow_start=D, exit, refuse, rate=F (D: 250ms, 2s); per request: header X-Sim-Fault");
  app.add_option("--fault-rules", o.fault_rules,
                 "File of per-request fault rules: 'prompt:MARKER SPEC' or 'request_id:ID[*] SPEC' per line "
                 "(docs/sim.md)");
  app.add_option("--max-waiting", o.max_waiting, "Waiting requests beyond this are refused with 429");
  app.add_option("--block-size", o.block_size, "KV block size in tokens (default 16)");
  app.add_option("--num-gpu-blocks", o.num_gpu_blocks, "KV blocks in the pool (default 27500)");
  app.add_option("--max-num-seqs", o.max_num_seqs, "Running requests per step (default 256)");
  app.add_option("--max-num-batched-tokens", o.max_batched_tokens, "Token budget per step (default 8192)");
  app.add_option("--max-model-len", o.max_model_len, "Context length (default 131072)");
  app.add_flag("--no-prefix-caching", o.no_prefix_caching, "Disable prefix caching");
  app.add_option("--step-overhead-ms", o.step_overhead_ms, "Fixed cost of one scheduler step (default 6.0)");
  app.add_option("--prefill-us-per-token", o.prefill_us_per_token, "Prefill cost per token (default 65)");
  app.add_option("--prefill-attention-ns-per-pair", o.prefill_attention_ns_per_pair,
                 "Prefill attention per (token, earlier token) pair (default 1.5)");
  app.add_option("--decode-us-per-seq", o.decode_us_per_seq,
                 "Decode cost per sequence per step (default 60)");
  app.add_option("--decode-attention-ns-per-token", o.decode_attention_ns_per_token,
                 "Decode KV read per context token (default 50)");
  app.add_option("--kv-transfer-ms", o.kv_transfer_ms, "P/D: fixed cost of one KV pull (default 2)");
  app.add_option("--kv-transfer-us-per-token", o.kv_transfer_us_per_token,
                 "P/D: KV pull cost per token (default 5)");
  app.add_option(
      "--kv-transfer-config", o.kv_config,
      "vLLM --kv-transfer-config JSON, e.g. {\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}");
  app.add_option("--kv-events-config", o.kv_events_config,
                 "vLLM/SGLang --kv-events-config JSON: publish KV events over ZMQ, e.g. "
                 "{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:5557\"}");
  app.add_option("--kv-events-encoding", o.kv_events_encoding,
                 "KV events: array (msgspec array_like, default) or map (events as maps with \"type\")")
      ->check(CLI::IsMember({"array", "map"}));
  app.add_option(
         "--kv-abort-timeout", o.kv_abort_timeout_s,
         "P/D prefill side: free unclaimed blocks after this many seconds (VLLM_NIXL_ABORT_REQUEST_TIMEOUT, "
         "default 480)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--random-reply-max-tokens", o.reply_max_tokens,
                 "Random mode: a reply without ignore_eos stops after 1..N tokens (default 512)");
  app.add_option("--embedding-dims", o.embedding_dims,
                 "Embedding width when a request sets none (default 1024)")
      ->check(CLI::Range(1, 65536));
  app.add_option("--engine-index", o.engine_index, "vLLM 'engine' metric label (default 0)");
  app.add_option("--kvcached-target", o.kvcached_target,
                 "HOST:PORT of a cgn-kvcached: offload evicted KV blocks there and load them back on a "
                 "prefix miss (kv_offload = \"cgn\")");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error, off");
}

Error<int> fail(const std::string& msg) {
  return cli_exit(2, "cgn-engine-sim: " + msg + "\n");
}

constexpr const char* kDescription =
    "cgn-engine-sim: a simulated LLM inference engine (vLLM, SGLang, llama.cpp, TensorRT-LLM, MLX on the "
    "wire) with a modelled KV cache, scheduler and timing.\n\n"
    "  cgn-engine-sim --flavor vllm --model M --port 0 --port-file F [knobs]\n"
    "  cgn-engine-sim [flags] -- vllm serve M --port 8000 [engine flags]   (any engine's command line)\n"
    "  vllm serve M ...   (a symlink or wrapper named vllm, llama-server, trtllm-serve, mlx_lm.server, "
    "python*)\n\n"
    "Engine lines may also carry --sim-port-file F, --sim-log-level L and the --sim-* knobs of "
    "docs/sim.md; flags before `--` override the engine line. Responses carry the modelled timings in "
    "X-Sim-Queue-Ms, X-Sim-Ttft-Ms, X-Sim-E2e-Ms, X-Sim-Cached-Tokens (and X-Sim-Transferred-Tokens, "
    "X-Sim-Kv-Pull on a P/D decode leg). Admin (with --enable-admin): POST /admin/evict "
    "{\"all\":true}|{\"prompt\":..}|{\"messages\":[..]}, GET /admin/state; side channel (with "
    "--kv-transfer-config): POST /internal/kv/claim.";

// Splits argv into the shell's flags (parsed into `o`) and the engine line, if any.
struct Split {
  std::vector<std::string> engine_line;
  bool have_line = false;
};

CliResult<Split> split_and_parse_flags(const std::vector<std::string>& args, Overrides& o) {
  const std::string base = std::filesystem::path(args.empty() ? "" : args[0]).filename().string();
  Split s;
  if (is_engine_program(base)) {
    s.engine_line = args;
    s.engine_line[0] = base;
    s.have_line = true;
    return s;
  }
  CLI::App app{kDescription, "cgn-engine-sim"};
  add_flags(app, o);
  std::vector<std::string> flags;
  size_t i = 1;
  for (; i < args.size() && args[i] != "--"; ++i) {
    flags.push_back(args[i]);
  }
  if (i < args.size()) {
    s.engine_line.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
    s.have_line = true;
  }
  std::vector<std::string> rev(flags.rbegin(), flags.rend());
  if (auto parsed = parse_command_line(app, rev); !parsed) {
    return parsed.error();
  }
  return s;
}

// The engine line to parse: the one given (shell flags taken out, environment words first), or
// the flavour's minimal line built from the flags.
CliResult<std::vector<std::string>> launch_line(Split& s, Overrides& o) {
  std::vector<std::string> line;
  if (s.have_line) {
    take_shell_flags(s.engine_line, o);
    line = env_words();
    line.insert(line.end(), s.engine_line.begin(), s.engine_line.end());
  } else {
    if (!o.model) {
      return fail("--model is required (or give an engine command line after --); see --help");
    }
    const Flavour f = parse_flavour(o.flavor.value_or("vllm")).value_or(Flavour::kVllm);
    line = base_line(f, *o.model);
    if (o.kv_config) {
      if (f != Flavour::kVllm) {
        return fail("--kv-transfer-config is a vLLM flag");
      }
      line.push_back("--kv-transfer-config");
      line.push_back(*o.kv_config);
    }
    if (o.kv_events_config) {
      if (f != Flavour::kVllm && f != Flavour::kSglang) {
        return fail("--kv-events-config is a vLLM/SGLang flag");
      }
      line.push_back("--kv-events-config");
      line.push_back(*o.kv_events_config);
    }
  }
  if (o.kv_events_encoding) {
    line.push_back("--sim-kv-events-encoding");
    line.push_back(*o.kv_events_encoding);
  }
  return line;
}

// The flags that override what the engine line said: names, address, reply mode, switches.
CliResult<Ok> apply_overrides(const Overrides& o, bool have_line, SimOptions& sim) {
  if (!have_line && !o.no_metrics) {
    sim.metrics_enabled = true;  // flag mode: metrics on unless --no-metrics
  }
  if (o.flavor && have_line) {
    return fail("--flavor conflicts with an engine command line (the program names the flavour)");
  }
  if (o.model && have_line) {
    sim.model = *o.model;
  }
  if (o.served) {
    sim.served_model_name = *o.served;
  } else if (!have_line || o.model) {
    sim.served_model_name = sim.model;
  }
  if (o.host) {
    sim.host = *o.host;
  }
  if (o.port) {
    sim.port = static_cast<uint16_t>(*o.port);
  }
  if (o.mode) {
    sim.reply_mode = *o.mode == "echo" ? ReplyMode::kEcho : ReplyMode::kRandom;
  }
  if (o.time_scale) {
    sim.engine.time_scale = *o.time_scale;
  }
  if (o.load_seconds) {
    sim.load_seconds = *o.load_seconds;
  }
  sim.deprecated_metrics = sim.deprecated_metrics || o.deprecated_metrics;
  sim.admin_enabled = sim.admin_enabled || o.enable_admin;
  if (o.metrics) {
    sim.metrics_enabled = true;
  }
  if (o.no_metrics) {
    sim.metrics_enabled = false;
  }
  if (o.fault_rules) {
    sim.fault_rules_file = *o.fault_rules;
  }
  return Ok{};
}

// --fault-rules (loaded here) and --fault.
CliResult<FaultRules> apply_faults(const Overrides& o, SimOptions& sim) {
  FaultRules fault_rules;
  if (!sim.fault_rules_file.empty()) {
    auto rules = FaultRules::load_file(sim.fault_rules_file);
    if (!rules) {
      return fail("--fault-rules: " + rules.error().message);
    }
    fault_rules = std::move(*rules);
  }
  if (o.fault) {
    auto plan = parse_fault_spec(*o.fault, /*from_header=*/false);
    if (!plan) {
      return fail("--fault: " + plan.error().message);
    }
    sim.faults = *plan;
  }
  return fault_rules;
}

// Capacity knobs and timing coefficients, each checked.
CliResult<Ok> apply_model(const Overrides& o, SimOptions& sim) {
  NodeModel& m = sim.engine.model;
  auto set_u32 = [](const std::optional<uint32_t>& v, uint32_t& out) {
    if (v) {
      out = *v;
    }
  };
  set_u32(o.max_waiting, sim.engine.max_waiting);
  set_u32(o.block_size, m.block_size);
  set_u32(o.num_gpu_blocks, m.num_gpu_blocks);
  set_u32(o.max_num_seqs, m.max_num_seqs);
  set_u32(o.max_batched_tokens, m.max_num_batched_tokens);
  set_u32(o.max_model_len, m.max_model_len);
  set_u32(o.reply_max_tokens, sim.engine.random_reply_max_tokens);
  if (m.block_size == 0 || m.num_gpu_blocks == 0 || m.max_num_seqs == 0 || m.max_num_batched_tokens == 0 ||
      m.max_model_len < 16 || sim.engine.max_waiting == 0 || sim.engine.random_reply_max_tokens == 0) {
    return fail("capacity knobs must be positive (and --max-model-len at least 16)");
  }
  auto set_d = [](const std::optional<double>& v, double scale, double& out) {
    if (v) {
      out = *v * scale;
    }
  };
  set_d(o.step_overhead_ms, 1e6, m.step_overhead_ns);
  set_d(o.prefill_us_per_token, 1e3, m.prefill_ns_per_token);
  set_d(o.prefill_attention_ns_per_pair, 1.0, m.prefill_attention_ns_per_pair);
  set_d(o.decode_us_per_seq, 1e3, m.decode_ns_per_seq);
  set_d(o.decode_attention_ns_per_token, 1.0, m.decode_attention_ns_per_context_token);
  set_d(o.kv_transfer_ms, 1e6, m.kv_transfer_fixed_ns);
  set_d(o.kv_transfer_us_per_token, 1e3, m.kv_transfer_ns_per_token);
  for (double c :
       {m.step_overhead_ns, m.prefill_ns_per_token, m.prefill_attention_ns_per_pair, m.decode_ns_per_seq,
        m.decode_attention_ns_per_context_token, m.kv_transfer_fixed_ns, m.kv_transfer_ns_per_token}) {
    if (!(c >= 0.0) || c > 1e12) {
      return fail("timing coefficients must be in [0, 1e12] ns");
    }
  }
  if (o.kv_abort_timeout_s) {
    sim.engine.kv_abort_timeout = static_cast<Nanos>(*o.kv_abort_timeout_s * 1e9);
  }
  if (o.engine_index) {
    sim.engine_index = o.engine_index->substr(0, 16);
  }
  if (o.kvcached_target) {
    const size_t colon = o.kvcached_target->rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == o.kvcached_target->size()) {
      return fail("--kvcached-target: expected HOST:PORT, got '" + *o.kvcached_target + "'");
    }
    sim.kvcached_target = *o.kvcached_target;
  }
  return Ok{};
}

}  // namespace

CliResult<SimSetup> parse_sim_options(int argc, const char* const* argv) {
  const std::vector<std::string> args(argv, argv + argc);
  Overrides o;
  auto split = split_and_parse_flags(args, o);
  if (!split) {
    return split.error();
  }
  auto line = launch_line(*split, o);
  if (!line) {
    return line.error();
  }
  auto parsed = parse_launch_line(*line);
  if (!parsed) {
    return fail(parsed.error().message);
  }
  SimSetup setup;
  SimOptions& sim = setup.shell.sim;
  sim = std::move(*parsed);
  if (auto r = apply_overrides(o, split->have_line, sim); !r) {
    return r.error();
  }
  auto rules = apply_faults(o, sim);
  if (!rules) {
    return rules.error();
  }
  setup.shell.fault_rules = std::move(*rules);
  if (auto r = apply_model(o, sim); !r) {
    return r.error();
  }
  if (!log::is_level(o.log_level)) {
    return fail("unknown --log-level '" + o.log_level + "'");
  }
  if (o.embedding_dims) {
    setup.shell.embedding_dims = *o.embedding_dims;
  }
  setup.port_file = o.port_file;
  setup.log_level = o.log_level;
  return setup;
}

}  // namespace cgn::sim
