// cgn-digest's command line and what it prints: the prefix digests of an OpenAI request body, one
// lowercase hex digest per line, exactly as the router and the agent compute them
// (docs/architecture/digests.md).
//
//   cgn-digest [--endpoint chat|completions|embeddings] [--block-bytes 256] [FILE|-]
//   cgn-digest --raw --model M [--tools-json T] FILE   # FILE holds canonical bytes
#pragma once

#include <cstdint>
#include <string>

#include "core/cli_exit.h"
#include "core/digest.h"

namespace cgn {

struct DigestCliOptions {
  std::string input = "-";  // a file, or - for stdin
  std::string endpoint = "chat";
  uint32_t block_bytes = kDefaultBlockBytes;
  bool raw = false;
  std::string model;
  std::string tools_json;
  bool seed_only = false;
  bool seed_material = false;
  bool show_canonical = false;
  bool show_simd = false;
};

// --help: status 0 and the help text; a bad flag or value: CLI11's status and message.
CliResult<DigestCliOptions> parse_digest_options(int argc, const char* const* argv);

// Reads the input and prints what the options ask for on stdout; errors on stderr. Returns the
// exit status (0; 1: the body is not a valid request, its OpenAI error printed; 2: bad options or
// unreadable input).
int run_digest_command(const DigestCliOptions& o);

}  // namespace cgn
