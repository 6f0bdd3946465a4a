#include "sim/launch.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "sim/engine_flags.h"

namespace cgn::sim {

namespace {

using Err = Error<LaunchError>;

std::string_view basename(std::string_view p) {
  const size_t slash = p.rfind('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}

template <class T>
bool parse_int(std::string_view s, T& out, T lo, T hi) {
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < static_cast<long long>(lo) ||
      v > static_cast<long long>(hi)) {
    return false;
  }
  out = static_cast<T>(v);
  return true;
}

bool parse_double(std::string_view s, double& out, double lo, double hi) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v) || v < lo || v > hi) {
    return false;
  }
  out = v;
  return true;
}

Err bad_value(std::string_view flag, std::string_view value, std::string_view want) {
  return make_error(LaunchError::kBadValue, "flag " + std::string(flag) + " got '" +
                                                std::string(value.substr(0, 64)) + "', expects " +
                                                std::string(want));
}

// Flags that take no value, per flavour family (so the next word is not eaten).
bool is_switch(std::string_view f) {
  static constexpr std::string_view kSwitches[] = {"--metrics",
                                                   "--enable-metrics",
                                                   "--enable-prefix-caching",
                                                   "--no-enable-prefix-caching",
                                                   "--enforce-eager",
                                                   "--trust-remote-code",
                                                   "--disable-log-requests",
                                                   "--disable-log-stats",
                                                   "--sim-deprecated-metrics",
                                                   "--sim-enable-admin",
                                                   "--enable-chunked-prefill",
                                                   "--no-enable-chunked-prefill",
                                                   "--cont-batching",
                                                   "--no-cont-batching",
                                                   "--flash-attn",
                                                   "-fa",
                                                   "--no-mmap",
                                                   "--mlock",
                                                   "--jinja",
                                                   "--verbose",
                                                   "-v",
                                                   "--enable-log-requests",
                                                   "--skip-server-warmup",
                                                   "--disable-radix-cache",
                                                   "--enable-hierarchical-cache",
                                                   "--log-requests",
                                                   "--no-webui",
                                                   "--embedding",
                                                   "--embeddings",
                                                   "--reranking",
                                                   "--slots",
                                                   "--no-slots",
                                                   "--cache-prompt",
                                                   "--no-cache-prompt",
                                                   "--show-hidden-metrics-for-version"};
  for (auto s : kSwitches) {
    if (s == f) {
      return true;
    }
  }
  return false;
}

struct Parser {
  SimOptions o;
  bool port_given = false;  // --port 0 (or LLAMA_ARG_PORT=0) asks for a free port
  KvEventEncoding kv_encoding = KvEventEncoding::kArray;

  Result<Ok, LaunchError> kv_events(std::string_view json_text) {
    auto c = parse_kv_events_config(json_text, /*enabled_by_default=*/o.flavour == Flavour::kSglang);
    if (!c) {
      return make_error(LaunchError::kBadValue, c.error().message);
    }
    o.kv_events = std::move(*c);
    return Ok{};
  }

  Result<Ok, LaunchError> apply_env(std::string_view name, std::string_view value) {
    if (name == "VLLM_NIXL_SIDE_CHANNEL_HOST") {
      o.engine.side_channel_host = std::string(value);
    } else if (name == "VLLM_NIXL_SIDE_CHANNEL_PORT") {
      if (!parse_int<int>(value, o.engine.side_channel_port, 1, 65535)) {
        return bad_value(name, value, "a port");
      }
    } else if (name == "VLLM_NIXL_ABORT_REQUEST_TIMEOUT") {
      double s = 0;
      if (!parse_double(value, s, 0, 1e6)) {
        return bad_value(name, value, "seconds");
      }
      o.engine.kv_abort_timeout = static_cast<Nanos>(s * 1e9);
    } else if (name == "LLAMA_ARG_PORT") {
      if (!parse_int<uint16_t>(value, o.port, 0, 65535)) {
        return bad_value(name, value, "a port");
      }
      port_given = true;
    } else if (name == "LLAMA_ARG_N_PARALLEL") {
      if (!parse_int<uint32_t>(value, o.engine.model.max_num_seqs, 1, 65536)) {
        return bad_value(name, value, "a slot count");
      }
    } else if (name == "LLAMA_ARG_ENDPOINT_METRICS") {
      o.metrics_enabled = value == "1" || value == "true";
    }
    return Ok{};
  }

  Result<Ok, LaunchError> kv_config(std::string_view flag, std::string_view json_text) {
    auto j = nlohmann::json::parse(json_text.begin(), json_text.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return bad_value(flag, json_text, "a JSON object");
    }
    KvTransferConfig k;
    auto str = [&](const char* key, std::string& out) -> bool {
      auto it = j.find(key);
      if (it == j.end() || it->is_null()) {
        return true;
      }
      if (!it->is_string()) {
        return false;
      }
      out = it->get<std::string>();
      return true;
    };
    if (!str("kv_connector", k.kv_connector) || !str("kv_role", k.kv_role) ||
        !str("engine_id", k.engine_id)) {
      return bad_value(flag, json_text, "string fields kv_connector, kv_role, engine_id");
    }
    if (!k.kv_role.empty() && k.kv_role != "kv_producer" && k.kv_role != "kv_consumer" &&
        k.kv_role != "kv_both") {
      return bad_value(flag, k.kv_role, "kv_role kv_producer, kv_consumer or kv_both");
    }
    o.kv_transfer = std::move(k);
    return Ok{};
  }

  Result<Ok, LaunchError> u32(std::string_view f, std::string_view v, uint32_t& out, uint32_t lo,
                              uint32_t hi) {
    if (!parse_int<uint32_t>(v, out, lo, hi)) {
      return bad_value(f, v, "an integer in range");
    }
    return Ok{};
  }

  Result<Ok, LaunchError> tensor_parallel(std::string_view f, std::string_view v) {
    uint32_t tp = 1;
    auto r = u32(f, v, tp, 1, 1024);
    o.engine.tp_size = static_cast<int>(tp);
    return r;
  }

  // The flags every flavour takes (--port, --host) and the simulator's --sim-* flags; nullopt
  // when `f` is none of them.
  std::optional<Result<Ok, LaunchError>> common_flag(std::string_view f, std::string_view v) {
    if (f == "--port") {
      if (!parse_int<uint16_t>(v, o.port, 0, 65535)) {
        return bad_value(f, v, "a port in 0..65535");
      }
      port_given = true;
      return Ok{};
    }
    if (f == "--host") {
      o.host = std::string(v);
      return Ok{};
    }
    if (f == "--sim-time-scale") {
      if (!parse_double(v, o.engine.time_scale, 1e-6, 1e6)) {
        return bad_value(f, v, "a positive factor");
      }
      return Ok{};
    }
    if (f == "--sim-mode") {
      if (v != "random" && v != "echo") {
        return bad_value(f, v, "random or echo");
      }
      o.reply_mode = v == "echo" ? ReplyMode::kEcho : ReplyMode::kRandom;
      return Ok{};
    }
    if (f == "--sim-deprecated-metrics") {
      o.deprecated_metrics = true;
      return Ok{};
    }
    if (f == "--sim-enable-admin") {
      o.admin_enabled = true;
      return Ok{};
    }
    if (f == "--sim-load-seconds") {
      if (!parse_double(v, o.load_seconds, 0, 3600)) {
        return bad_value(f, v, "seconds in 0..3600");
      }
      return Ok{};
    }
    return sim_fault_or_event_flag(f, v);
  }

  std::optional<Result<Ok, LaunchError>> sim_fault_or_event_flag(std::string_view f, std::string_view v) {
    if (f == "--sim-fault") {
      auto plan = parse_fault_spec(v, /*from_header=*/false);
      if (!plan) {
        return make_error(LaunchError::kBadValue, "flag --sim-fault: " + plan.error().message);
      }
      o.faults = *plan;
      return Ok{};
    }
    if (f == "--sim-fault-rules") {
      if (v.empty()) {
        return bad_value(f, v, "a file name");
      }
      o.fault_rules_file = std::string(v);
      return Ok{};
    }
    if (f == "--sim-max-waiting") {
      return u32(f, v, o.engine.max_waiting, 1, 10'000'000);
    }
    if (f == "--sim-kv-events-encoding") {
      if (v != "array" && v != "map") {
        return bad_value(f, v, "array or map");
      }
      kv_encoding = v == "map" ? KvEventEncoding::kMap : KvEventEncoding::kArray;
      return Ok{};
    }
    if (f == "--kv-events-config" && (o.flavour == Flavour::kVllm || o.flavour == Flavour::kSglang)) {
      return kv_events(v);
    }
    if (f == "--sim-engine-index") {
      o.engine_index = std::string(v.substr(0, 16));
      return Ok{};
    }
    return std::nullopt;
  }

  Result<Ok, LaunchError> vllm_flag(std::string_view f, std::string_view v) {
    NodeModel& m = o.engine.model;
    if (f == "--model") {
      o.model = std::string(v);
    } else if (f == "--served-model-name") {
      o.served_model_name = std::string(v);
    } else if (f == "--kv-transfer-config") {
      return kv_config(f, v);
    } else if (f == "--block-size") {
      return u32(f, v, m.block_size, 1, 1024);
    } else if (f == "--max-num-seqs") {
      return u32(f, v, m.max_num_seqs, 1, 65536);
    } else if (f == "--max-num-batched-tokens") {
      return u32(f, v, m.max_num_batched_tokens, 1, 1 << 24);
    } else if (f == "--max-model-len") {
      return u32(f, v, m.max_model_len, 16, 1 << 24);
    } else if (f == "--num-gpu-blocks-override") {
      return u32(f, v, m.num_gpu_blocks, 1, 1 << 24);
    } else if (f == "--tensor-parallel-size" || f == "-tp") {
      return tensor_parallel(f, v);
    } else if (f == "--enable-prefix-caching") {
      o.engine.enable_prefix_caching = true;
    } else if (f == "--no-enable-prefix-caching") {
      o.engine.enable_prefix_caching = false;
    } else {
      return other_engine_flag(f);
    }
    return Ok{};
  }

  // A flag the simulator does not model: ignored when the engine's parser takes it.
  Result<Ok, LaunchError> other_engine_flag(std::string_view f) {
    if (auto refused = engine_flag_error(o.flavour, f)) {
      return make_error(LaunchError::kUnknownFlag, *refused);
    }
    o.ignored_flags.emplace_back(f);
    return Ok{};
  }

  Result<Ok, LaunchError> llamacpp_flag(std::string_view f, std::string_view v) {
    NodeModel& m = o.engine.model;
    if (f == "-m" || f == "--model") {
      o.model = std::string(v);
    } else if (f == "-a" || f == "--alias") {
      o.served_model_name = std::string(v);
    } else if (f == "-np" || f == "--parallel") {
      return u32(f, v, m.max_num_seqs, 1, 65536);
    } else if (f == "--metrics") {
      o.metrics_enabled = true;
    } else if (f == "-c" || f == "--ctx-size") {
      return u32(f, v, m.max_model_len, 16, 1 << 24);
    } else if (f == "-b" || f == "--batch-size") {
      return u32(f, v, m.max_num_batched_tokens, 1, 1 << 24);
    } else {
      o.ignored_flags.emplace_back(f);
    }
    return Ok{};
  }

  Result<Ok, LaunchError> sglang_flag(std::string_view f, std::string_view v) {
    NodeModel& m = o.engine.model;
    if (f == "--model-path" || f == "--model") {
      o.model = std::string(v);
    } else if (f == "--served-model-name") {
      o.served_model_name = std::string(v);
    } else if (f == "--enable-metrics") {
      o.metrics_enabled = true;
    } else if (f == "--max-running-requests") {
      return u32(f, v, m.max_num_seqs, 1, 65536);
    } else if (f == "--chunked-prefill-size") {
      return u32(f, v, m.max_num_batched_tokens, 1, 1 << 24);
    } else if (f == "--context-length") {
      return u32(f, v, m.max_model_len, 16, 1 << 24);
    } else if (f == "--page-size") {
      return u32(f, v, m.block_size, 1, 1024);
    } else if (f == "--tp" || f == "--tp-size" || f == "--tensor-parallel-size") {
      return tensor_parallel(f, v);
    } else {
      return other_engine_flag(f);
    }
    return Ok{};
  }

  Result<Ok, LaunchError> trtllm_flag(std::string_view f, std::string_view v) {
    NodeModel& m = o.engine.model;
    if (f == "--max_batch_size") {
      return u32(f, v, m.max_num_seqs, 1, 65536);
    } else if (f == "--max_num_tokens") {
      return u32(f, v, m.max_num_batched_tokens, 1, 1 << 24);
    } else if (f == "--max_seq_len") {
      return u32(f, v, m.max_model_len, 16, 1 << 24);
    } else if (f == "--tp_size") {
      return tensor_parallel(f, v);
    } else {
      o.ignored_flags.emplace_back(f);
    }
    return Ok{};
  }

  Result<Ok, LaunchError> mlx_flag(std::string_view f, std::string_view v) {
    if (f == "--model") {
      o.model = std::string(v);
    } else {
      o.ignored_flags.emplace_back(f);
    }
    return Ok{};
  }

  // Handles one flag with its value (value is empty for switches).
  Result<Ok, LaunchError> flag(std::string_view f, std::string_view v) {
    if (auto r = common_flag(f, v)) {
      return std::move(*r);
    }
    switch (o.flavour) {
      case Flavour::kVllm:
        return vllm_flag(f, v);
      case Flavour::kLlamacpp:
        return llamacpp_flag(f, v);
      case Flavour::kSglang:
        return sglang_flag(f, v);
      case Flavour::kTrtllm:
        return trtllm_flag(f, v);
      case Flavour::kMlx:
        return mlx_flag(f, v);
    }
    return Ok{};
  }

  // Leading NAME=VALUE environment assignments; returns the index of the first other word.
  Result<size_t, LaunchError> env_prefix(std::span<const std::string> argv) {
    size_t i = 0;
    for (; i < argv.size(); ++i) {
      const std::string_view w = argv[i];
      const size_t eq = w.find('=');
      if (eq == std::string_view::npos || eq == 0 || w[0] == '-' ||
          w.substr(0, eq).find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") !=
              std::string_view::npos) {
        break;
      }
      auto r = apply_env(w.substr(0, eq), w.substr(eq + 1));
      if (!r) {
        return r.error();
      }
    }
    return i;
  }

  // The program at argv[i] (and its module or `serve` word): sets the flavour, returns the index
  // past it; `positional_model` says whether a bare word names the model.
  Result<size_t, LaunchError> program(std::span<const std::string> argv, size_t i, bool& positional_model) {
    if (i >= argv.size()) {
      return make_error(LaunchError::kUnknownProgram, "launch line names no program");
    }
    const std::string_view prog = basename(argv[i]);
    positional_model = false;
    if (prog == "vllm") {
      if (i + 1 >= argv.size() || argv[i + 1] != "serve") {
        return make_error(LaunchError::kUnknownProgram, "expected 'vllm serve MODEL'");
      }
      o.flavour = Flavour::kVllm;
      positional_model = true;
      return i + 2;
    }
    if (prog == "llama-server") {
      o.flavour = Flavour::kLlamacpp;
      o.metrics_enabled = false;
      return i + 1;
    }
    if (prog == "trtllm-serve") {
      o.flavour = Flavour::kTrtllm;
      positional_model = true;
      return i + 1;
    }
    if (prog == "mlx_lm.server") {
      o.flavour = Flavour::kMlx;
      o.metrics_enabled = false;
      return i + 1;
    }
    if (prog.rfind("python", 0) == 0) {
      return python_module(argv, i);
    }
    return make_error(LaunchError::kUnknownProgram,
                      "unknown program '" + std::string(prog.substr(0, 64)) + "'");
  }

  Result<size_t, LaunchError> python_module(std::span<const std::string> argv, size_t i) {
    const std::string_view mod =
        i + 2 < argv.size() && argv[i + 1] == "-m" ? std::string_view(argv[i + 2]) : std::string_view();
    if (mod == "sglang.launch_server") {
      o.flavour = Flavour::kSglang;
      o.metrics_enabled = false;
    } else if (mod == "vllm.entrypoints.openai.api_server") {
      o.flavour = Flavour::kVllm;
    } else if (mod == "mlx_lm.server") {
      o.flavour = Flavour::kMlx;
      o.metrics_enabled = false;
    } else {
      return make_error(LaunchError::kUnknownProgram,
                        "unknown python module '" + std::string(mod.substr(0, 64)) + "'");
    }
    return i + 3;
  }

  // Flags from argv[i] on: --flag value, --flag=value, switches.
  Result<Ok, LaunchError> flags(std::span<const std::string> argv, size_t i, bool positional_model) {
    for (; i < argv.size(); ++i) {
      std::string_view w = argv[i];
      if (w.size() < 2 || w[0] != '-') {
        if (o.model.empty() && positional_model) {
          o.model = std::string(w);
          continue;
        }
        o.ignored_flags.emplace_back(w);
        continue;
      }
      std::string_view value;
      const size_t eq = w.find('=');
      if (eq != std::string_view::npos) {
        value = w.substr(eq + 1);
        w = w.substr(0, eq);
      } else if (!is_switch(w) && w.rfind("--no-", 0) != 0) {
        auto v = separate_value(argv, i, w);
        if (!v) {
          return v.error();
        }
        value = *v;
      }
      auto r = flag(w, value);
      if (!r) {
        return r.error();
      }
    }
    return Ok{};
  }

  // The value of flag `w` given as the next word (advancing i), empty when there is none.
  static Result<std::string_view, LaunchError> separate_value(std::span<const std::string> argv, size_t& i,
                                                              std::string_view w) {
    if (w == "--sim-deprecated-metrics") {
      return std::string_view();
    }
    if (i + 1 < argv.size() &&
        (argv[i + 1].empty() || argv[i + 1][0] != '-' ||
         (argv[i + 1].size() > 1 && std::isdigit(static_cast<unsigned char>(argv[i + 1][1]))))) {
      return std::string_view(argv[++i]);
    }
    if (w.rfind("--sim-", 0) == 0 || w == "--port" || w == "--model" || w == "-m" || w == "--model-path" ||
        w == "--kv-transfer-config" || w == "--kv-events-config") {
      return make_error(LaunchError::kMissingValue, "flag " + std::string(w) + " needs a value");
    }
    return std::string_view();
  }

  // Defaults that depend on what the line said (served name, port, engine id).
  Result<SimOptions, LaunchError> finish() {
    if (o.model.empty()) {
      return make_error(LaunchError::kMissingModel, "the launch line names no model");
    }
    if (o.served_model_name.empty()) {
      o.served_model_name = o.model;
    }
    if (o.kv_events) {
      o.kv_events->encoding = kv_encoding;
    }
    if (o.port == 0 && !port_given) {
      o.port = flavour_traits(o.flavour).default_port;
    }
    if (o.kv_transfer && !o.kv_transfer->engine_id.empty()) {
      o.engine.engine_id = o.kv_transfer->engine_id;
    } else {
      o.engine.engine_id = "sim-" + std::string(flavour_name(o.flavour)) + "-" + std::to_string(o.port);
    }
    return std::move(o);
  }
};

}  // namespace

Result<SimOptions, LaunchError> parse_launch_line(std::span<const std::string> argv) {
  if (argv.size() > kMaxLaunchArgs) {
    return make_error(LaunchError::kTooLarge, "launch line has more than 1024 words");
  }
  for (const auto& a : argv) {
    if (a.size() > kMaxLaunchArgBytes) {
      return make_error(LaunchError::kTooLarge, "a launch-line word is longer than 64 KiB");
    }
  }
  Parser p;
  auto env_end = p.env_prefix(argv);
  if (!env_end) {
    return env_end.error();
  }
  bool positional_model = false;
  auto flags_at = p.program(argv, *env_end, positional_model);
  if (!flags_at) {
    return flags_at.error();
  }
  size_t i = *flags_at;
  if (positional_model && i < argv.size() && !argv[i].empty() && argv[i][0] != '-') {
    p.o.model = argv[i];
    ++i;
  }
  if (auto r = p.flags(argv, i, positional_model); !r) {
    return r.error();
  }
  return p.finish();
}

}  // namespace cgn::sim
