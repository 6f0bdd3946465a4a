// cgn-digest: prints the prefix digests of an OpenAI request body, one
// lowercase hex digest per line, exactly as the router and the agent compute
// them. For operators (which prefix does a request hit?) and for tests that
// check two processes agree.
//
//   cgn-digest [--endpoint chat|completions|embeddings] [--block-bytes 256] [FILE|-]
//   cgn-digest --raw --model M [--tools-json T] FILE   # FILE holds canonical bytes
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "core/canonical.h"
#include "core/digest.h"

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Prints the Cognitora prefix digests of an OpenAI request body (docs/architecture/digests.md)"};
  std::string input = "-";
  std::string endpoint_str = "chat";
  uint32_t block_bytes = cgn::kDefaultBlockBytes;
  bool raw = false;
  std::string model;
  std::string tools_json;
  bool seed_only = false;
  bool seed_material = false;
  bool show_canonical = false;
  bool show_simd = false;
  app.add_option("input", input, "request body file, or - for stdin");
  app.add_option("--endpoint", endpoint_str, "chat, completions or embeddings")
      ->check(CLI::IsMember({"chat", "completions", "embeddings"}));
  app.add_option("--block-bytes", block_bytes, "digest block size: a multiple of 64 in [64, 1024]");
  app.add_flag("--raw", raw, "input is canonical prompt bytes, not a request body (needs --model)");
  app.add_option("--model", model, "model for the seed (--raw only)");
  app.add_option("--tools-json", tools_json, "JSON `tools` array for the seed (--raw only)");
  app.add_flag("--seed", seed_only, "print only the seed");
  app.add_flag("--seed-material", seed_material, "print only the seed's key material (hex)");
  app.add_flag("--canonical", show_canonical, "print the canonical prompt bytes instead of digests");
  app.add_flag("--simd", show_simd, "print the BLAKE3 SIMD level and exit");
  CLI11_PARSE(app, argc, argv);

  if (show_simd) {
    std::printf("%s\n", cgn::blake3_simd_level());
    return 0;
  }
  if (!cgn::valid_block_bytes(block_bytes)) {
    std::fprintf(stderr, "cgn-digest: --block-bytes must be a multiple of 64 in [64, 1024], got %u\n",
                 block_bytes);
    return 2;
  }
  std::string body;
  if (!read_input(input, body)) {
    std::fprintf(stderr, "cgn-digest: cannot read %s\n", input.c_str());
    return 2;
  }

  std::string canonical_prompt;
  std::string canonical_tools;
  if (raw) {
    if (model.empty()) {
      std::fprintf(stderr, "cgn-digest: --raw needs --model\n");
      return 2;
    }
    canonical_prompt = std::move(body);
    if (!tools_json.empty()) {
      auto tools = cgn::canonical_json(tools_json);
      if (!tools) {
        std::fprintf(stderr, "cgn-digest: --tools-json: %s\n", tools.error().message.c_str());
        return 2;
      }
      canonical_tools = std::move(*tools);
    }
  } else {
    static const std::map<std::string, cgn::Endpoint> kEndpoints = {
        {"chat", cgn::Endpoint::kChat},
        {"completions", cgn::Endpoint::kCompletions},
        {"embeddings", cgn::Endpoint::kEmbeddings}};
    auto parsed = cgn::parse_openai_request(kEndpoints.at(endpoint_str), body);
    if (!parsed) {
      std::fprintf(stderr, "%s\n", cgn::to_api_error(parsed.error()).body().c_str());
      return 1;
    }
    model = parsed->model;
    canonical_prompt = std::move(parsed->canonical_prompt);
    canonical_tools = std::move(parsed->canonical_tools);
  }

  if (show_canonical) {
    std::fwrite(canonical_prompt.data(), 1, canonical_prompt.size(), stdout);
    return 0;
  }
  const cgn::DigestSeedFields fields{.model = model, .canonical_tools = canonical_tools};
  if (seed_material) {
    for (unsigned char c : cgn::digest_seed_material(fields)) {
      std::printf("%02x", c);
    }
    std::printf("\n");
    return 0;
  }
  const cgn::Digest seed = cgn::make_digest_seed(fields);
  if (seed_only) {
    std::printf("%s\n", cgn::to_hex(seed).c_str());
    return 0;
  }
  std::vector<cgn::Digest> digests;
  cgn::compute_prefix_digests(seed, canonical_prompt, block_bytes, digests,
                              canonical_prompt.size() / block_bytes);
  for (const cgn::Digest& d : digests) {
    std::printf("%s\n", cgn::to_hex(d).c_str());
  }
  return 0;
}
