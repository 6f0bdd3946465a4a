// The launch flags vLLM's and SGLang's argument parsers accept, so that cgn-engine-sim, started
// in an engine's place (the recipes' CGN_ENGINE=sim, the agents' drivers), refuses a flag the
// engine would refuse, with the engine's own argparse error (exit 2), instead of ignoring a typo.
//
// Sources, at the versions named in docs/sim.md: vLLM's EngineArgs/AsyncEngineArgs.add_cli_args
// (vllm/engine/arg_utils.py), FrontendArgs and make_arg_parser (vllm/entrypoints/openai/
// cli_args.py) - every flag they register; SGLang's ServerArgs (python/sglang/srt/server_args.py),
// where every field is a flag - the fields of the common deployments (model, memory, scheduling,
// parallelism, HTTP/API, logging and metrics, HiCache, LMCache, P/D, speculative decoding), not
// all of its several hundred: a real SGLang flag missing here is refused too, and is added here
// with its field name.
//
// Matching follows argparse: an exact flag, or an unambiguous prefix of one (allow_abbrev, which
// neither engine turns off); "--flag=value" is matched by its name. vLLM's FlexibleArgumentParser
// also takes '_' for '-' in a flag name, "--json-flag.key value" for a JSON flag, and "-O3" for
// -O; its boolean flags (BooleanOptionalAction) take a --no- form. llama.cpp, TensorRT-LLM and MLX
// lines have no table: every flag passes, as before.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sim/flavour.h"

namespace cgn::sim {

// nullopt when `flag` (a launch-line word starting with '-', without its "=value") is accepted by
// the engine's parser; otherwise its usage error, as the engine prints it.
std::optional<std::string> engine_flag_error(Flavour flavour, std::string_view flag);

// Where a flavour's table comes from ("" for flavours without one).
std::string_view engine_flags_source(Flavour flavour);

}  // namespace cgn::sim
