// The test vectors of docs/architecture/digests.md, parsed out of the
// markdown and recomputed, so that the documented construction and the code
// can never drift apart and the format never changes by accident.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/canonical.h"
#include "core/digest.h"
#include "testing/process.h"

namespace cgn {
namespace {

struct Vector {
  std::map<std::string, std::string> fields;
  std::vector<std::string> digests;
  std::string get(const std::string& key) const {
    auto it = fields.find(key);
    return it == fields.end() ? "" : it->second;
  }
};

// Every ```digest-vector fenced block: `key: value` lines, `digest` repeated.
std::vector<Vector> load_vectors() {
  const std::string doc = testing::read_file(testing::source_path("docs/architecture/digests.md"));
  std::vector<Vector> out;
  std::istringstream in(doc);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (!inside) {
      if (line == "```digest-vector") {
        inside = true;
        out.emplace_back();
      }
      continue;
    }
    if (line == "```") {
      inside = false;
      continue;
    }
    const size_t colon = line.find(": ");
    if (colon == std::string::npos) {
      ADD_FAILURE() << "bad vector line: " << line;
      continue;
    }
    const std::string key = line.substr(0, colon);
    const std::string value = line.substr(colon + 2);
    if (key == "digest") {
      out.back().digests.push_back(value);
    } else {
      out.back().fields[key] = value;
    }
  }
  EXPECT_FALSE(inside) << "unterminated digest-vector block";
  return out;
}

std::string hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    s.push_back(kHex[c >> 4]);
    s.push_back(kHex[c & 0xf]);
  }
  return s;
}

Endpoint endpoint_from(const std::string& name) {
  if (name == "completions") {
    return Endpoint::kCompletions;
  }
  if (name == "embeddings") {
    return Endpoint::kEmbeddings;
  }
  return Endpoint::kChat;
}

TEST(DigestVectors, documented_vectors_cover_raw_chat_and_completions) {
  const auto vectors = load_vectors();
  EXPECT_GE(vectors.size(), 8u);
  size_t raw = 0;
  size_t chat = 0;
  size_t completions = 0;
  for (const auto& v : vectors) {
    raw += !v.get("input").empty();
    chat += v.get("endpoint") == "chat";
    completions += v.get("endpoint") == "completions";
  }
  EXPECT_GE(raw, 3u);
  EXPECT_GE(chat, 2u);
  EXPECT_GE(completions, 2u);
}

TEST(DigestVectors, every_documented_vector_recomputes_exactly) {
  for (const auto& v : load_vectors()) {
    SCOPED_TRACE(v.get("name"));
    std::string canonical;
    std::string model;
    std::string tools;
    if (!v.get("input").empty()) {
      std::istringstream spec(v.get("input"));
      std::string kind;
      size_t n = 0;
      spec >> kind >> n;
      ASSERT_EQ(kind, "pattern");
      canonical.resize(n);
      for (size_t i = 0; i < n; ++i) {
        canonical[i] = static_cast<char>(i % 251);
      }
      model = v.get("model");
      if (!v.get("tools").empty()) {
        auto t = canonical_json(v.get("tools"));
        ASSERT_TRUE(t.ok()) << t.error().message;
        tools = *t;
      }
    } else {
      auto parsed = parse_openai_request(endpoint_from(v.get("endpoint")), v.get("body"));
      ASSERT_TRUE(parsed.ok()) << parsed.error().message;
      canonical = parsed->canonical_prompt;
      model = parsed->model;
      tools = parsed->canonical_tools;
    }
    const DigestSeedFields fields{.model = model, .canonical_tools = tools};
    if (!v.get("seed_material").empty()) {
      EXPECT_EQ(hex(digest_seed_material(fields)), v.get("seed_material"));
    }
    if (!v.get("canonical").empty()) {
      EXPECT_EQ(hex(canonical), v.get("canonical"));
    }
    const Digest seed = make_digest_seed(fields);
    EXPECT_EQ(to_hex(seed), v.get("seed"));
    std::vector<Digest> digests;
    compute_prefix_digests(seed, canonical, static_cast<uint32_t>(std::stoul(v.get("block_bytes"))), digests);
    ASSERT_EQ(std::to_string(digests.size()), v.get("digest_count"));
    ASSERT_EQ(digests.size(), v.digests.size());
    for (size_t i = 0; i < digests.size(); ++i) {
      EXPECT_EQ(to_hex(digests[i]), v.digests[i]) << "digest " << i;
    }
  }
}

}  // namespace
}  // namespace cgn
