#include "core/digest_cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <vector>

#include "core/canonical.h"
#include "core/cli_parse.h"

namespace cgn {
namespace {

bool read_input(const std::string& path, std::string& out) {
  if (path == "-") {
    out.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return !std::cin.bad();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return false;
  }
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

// What the digests are computed over: the canonical prompt and tools, and the model.
struct Canonical {
  std::string model;
  std::string prompt;
  std::string tools;
};

CliResult<Canonical> canonical_input(const DigestCliOptions& o, std::string body) {
  Canonical c;
  if (o.raw) {
    if (o.model.empty()) {
      return cli_exit(2, "cgn-digest: --raw needs --model\n");
    }
    c.model = o.model;
    c.prompt = std::move(body);
    if (!o.tools_json.empty()) {
      auto tools = canonical_json(o.tools_json);
      if (!tools) {
        return cli_exit(2, "cgn-digest: --tools-json: " + tools.error().message + "\n");
      }
      c.tools = std::move(*tools);
    }
    return c;
  }
  static const std::map<std::string, Endpoint> kEndpoints = {{"chat", Endpoint::kChat},
                                                             {"completions", Endpoint::kCompletions},
                                                             {"embeddings", Endpoint::kEmbeddings}};
  auto parsed = parse_openai_request(kEndpoints.at(o.endpoint), body);
  if (!parsed) {
    return cli_exit(1, to_api_error(parsed.error()).body() + "\n");
  }
  c.model = parsed->model;
  c.prompt = std::move(parsed->canonical_prompt);
  c.tools = std::move(parsed->canonical_tools);
  return c;
}

void print_output(const DigestCliOptions& o, const Canonical& c) {
  if (o.show_canonical) {
    std::fwrite(c.prompt.data(), 1, c.prompt.size(), stdout);
    return;
  }
  const DigestSeedFields fields{.model = c.model, .canonical_tools = c.tools};
  if (o.seed_material) {
    for (unsigned char ch : digest_seed_material(fields)) {
      std::printf("%02x", ch);
    }
    std::printf("\n");
    return;
  }
  const Digest seed = make_digest_seed(fields);
  if (o.seed_only) {
    std::printf("%s\n", to_hex(seed).c_str());
    return;
  }
  std::vector<Digest> digests;
  compute_prefix_digests(seed, c.prompt, o.block_bytes, digests, c.prompt.size() / o.block_bytes);
  for (const Digest& d : digests) {
    std::printf("%s\n", to_hex(d).c_str());
  }
}

}  // namespace

CliResult<DigestCliOptions> parse_digest_options(int argc, const char* const* argv) {
  DigestCliOptions o;
  CLI::App app{
      "Prints the Cognitora prefix digests of an OpenAI request body (docs/architecture/digests.md)"};
  app.add_option("input", o.input, "request body file, or - for stdin");
  app.add_option("--endpoint", o.endpoint, "chat, completions or embeddings")
      ->check(CLI::IsMember({"chat", "completions", "embeddings"}));
  app.add_option("--block-bytes", o.block_bytes, "digest block size: a multiple of 64 in [64, 1024]");
  app.add_flag("--raw", o.raw, "input is canonical prompt bytes, not a request body (needs --model)");
  app.add_option("--model", o.model, "model for the seed (--raw only)");
  app.add_option("--tools-json", o.tools_json, "JSON `tools` array for the seed (--raw only)");
  app.add_flag("--seed", o.seed_only, "print only the seed");
  app.add_flag("--seed-material", o.seed_material, "print only the seed's key material (hex)");
  app.add_flag("--canonical", o.show_canonical, "print the canonical prompt bytes instead of digests");
  app.add_flag("--simd", o.show_simd, "print the BLAKE3 SIMD level and exit");
  if (auto parsed = parse_command_line(app, argc, argv); !parsed) {
    return parsed.error();
  }
  return o;
}

int run_digest_command(const DigestCliOptions& o) {
  if (o.show_simd) {
    std::printf("%s\n", blake3_simd_level());
    return 0;
  }
  if (!valid_block_bytes(o.block_bytes)) {
    std::fprintf(stderr, "cgn-digest: --block-bytes must be a multiple of 64 in [64, 1024], got %u\n",
                 o.block_bytes);
    return 2;
  }
  std::string body;
  if (!read_input(o.input, body)) {
    std::fprintf(stderr, "cgn-digest: cannot read %s\n", o.input.c_str());
    return 2;
  }
  auto c = canonical_input(o, std::move(body));
  if (!c) {
    return print_cli_exit(c.error());
  }
  print_output(o, *c);
  return 0;
}

}  // namespace cgn
