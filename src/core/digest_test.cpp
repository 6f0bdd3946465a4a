// BLAKE3 against the real b3sum binary, and the prefix digest construction
// (docs/architecture/digests.md) checked link by link against b3sum, against
// the slow reference path, and across processes (cgn-digest).
#include "core/digest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/canonical.h"
#include "testing/process.h"

namespace cgn {
namespace {

using std::chrono::seconds;

// The official BLAKE3 test-vector inputs: byte i is i mod 251.
constexpr size_t kOfficialLengths[] = {0,    1,    1023, 1024, 1025, 2048, 2049, 3072, 3073,  4096,  4097,
                                       5120, 5121, 6144, 6145, 7168, 7169, 8192, 8193, 16384, 31744, 102400};
constexpr char kOfficialKey[] = "whats the Elvish word for friend";
constexpr char kOfficialContext[] = "BLAKE3 2019-12-27 16:29:52 test vectors context";

std::string official_input(size_t len) {
  std::string s(len, '\0');
  for (size_t i = 0; i < len; ++i) {
    s[i] = static_cast<char>(i % 251);
  }
  return s;
}

std::string random_bytes(size_t len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(len, '\0');
  for (auto& c : s) {
    c = static_cast<char>(rng() & 0xff);
  }
  return s;
}

Digest key_from(std::string_view bytes) {
  Digest k{};
  std::memcpy(k.data(), bytes.data(), std::min(bytes.size(), k.size()));
  return k;
}

std::string as_bytes(const Digest& d) {
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

// Runs a shell command line as a child process and returns its output lines.
std::vector<std::string> run_lines(const std::string& command_line) {
  testing::Process p({"/bin/sh", "-c", command_line});
  const int rc = p.wait(std::chrono::milliseconds(60000));
  EXPECT_EQ(rc, 0) << command_line << "\n" << p.log();
  std::vector<std::string> lines;
  std::istringstream in(p.log());
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

// Writes each input to a file in dir and returns the file paths.
std::vector<std::string> write_inputs(const testing::TempDir& dir, const std::vector<std::string>& inputs) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < inputs.size(); ++i) {
    paths.push_back(dir.file("in" + std::to_string(i)));
    testing::write_file(paths.back(), inputs[i]);
  }
  return paths;
}

// b3sum over several files in one process: one hex hash per file, in order.
std::vector<std::string> b3sum(const std::string& flags, const std::vector<std::string>& paths,
                               const std::string& stdin_path = "") {
  std::string cmd = "b3sum --no-names " + flags;
  for (const auto& p : paths) {
    cmd += " '" + p + "'";
  }
  if (!stdin_path.empty()) {
    cmd += " < '" + stdin_path + "'";
  }
  return run_lines(cmd);
}

std::vector<std::string> official_inputs() {
  std::vector<std::string> inputs;
  for (size_t len : kOfficialLengths) {
    inputs.push_back(official_input(len));
  }
  return inputs;
}

TEST(Blake3, plain_hash_matches_b3sum_on_official_inputs) {
  testing::TempDir dir;
  const auto inputs = official_inputs();
  const auto expected = b3sum("", write_inputs(dir, inputs));
  ASSERT_EQ(expected.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(to_hex(blake3_hash(inputs[i])), expected[i]) << "length " << inputs[i].size();
  }
}

TEST(Blake3, keyed_hash_matches_b3sum_keyed_on_official_inputs) {
  testing::TempDir dir;
  const auto inputs = official_inputs();
  testing::write_file(dir.file("key"), kOfficialKey);
  const auto expected = b3sum("--keyed", write_inputs(dir, inputs), dir.file("key"));
  ASSERT_EQ(expected.size(), inputs.size());
  const Digest key = key_from(kOfficialKey);
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(to_hex(blake3_keyed_hash(key, inputs[i])), expected[i]) << "length " << inputs[i].size();
  }
}

TEST(Blake3, derive_key_matches_b3sum_derive_key_on_official_inputs) {
  testing::TempDir dir;
  const auto inputs = official_inputs();
  const auto expected =
      b3sum(std::string("--derive-key '") + kOfficialContext + "'", write_inputs(dir, inputs));
  ASSERT_EQ(expected.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(to_hex(blake3_derive_key(kOfficialContext, inputs[i])), expected[i])
        << "length " << inputs[i].size();
  }
}

// The reported level agrees with the CPU flags the kernel lists, in
// blake3_dispatch.c's order (AVX-512 needs both F and VL).
TEST(Blake3, simd_level_follows_the_cpu_flags_in_dispatch_order) {
  const std::set<std::string> known = {"avx512", "avx2", "sse41", "sse2", "neon", "portable"};
  const std::string level = blake3_simd_level();
  EXPECT_TRUE(known.count(level)) << level;
#if defined(__x86_64__)
  const std::string cpuinfo = testing::read_file("/proc/cpuinfo");
  const size_t flags_at = cpuinfo.find("\nflags");
  ASSERT_NE(flags_at, std::string::npos);
  std::set<std::string> flags;
  std::istringstream line(cpuinfo.substr(cpuinfo.find(':', flags_at) + 1,
                                         cpuinfo.find('\n', flags_at + 1) - cpuinfo.find(':', flags_at) - 1));
  for (std::string f; line >> f;) {
    flags.insert(f);
  }
  std::string expected = "sse2";
  if (flags.count("avx512f") && flags.count("avx512vl")) {
    expected = "avx512";
  } else if (flags.count("avx2")) {
    expected = "avx2";
  } else if (flags.count("sse4_1")) {
    expected = "sse41";
  }
  EXPECT_EQ(level, expected);
#endif
}

TEST(Digest, block_bytes_must_be_a_multiple_of_64_in_64_to_1024) {
  for (uint32_t b = 0; b <= 2048; ++b) {
    EXPECT_EQ(valid_block_bytes(b), b >= 64 && b <= 1024 && b % 64 == 0) << b;
  }
}

// Every link, checked against the real b3sum binary: leaf_i = b3sum(block_i)
// and digest_i = b3sum --keyed (key = digest_{i-1}) of leaf_i.
TEST(Digest, every_chain_link_is_b3sum_keyed_hash_of_b3sum_leaf) {
  testing::TempDir dir;
  const uint32_t block = 192;
  const std::string data = official_input(block * 4 + 17);
  const Digest seed = make_digest_seed({.model = "m"});
  std::vector<Digest> digests;
  compute_prefix_digests(seed, data, block, digests);
  ASSERT_EQ(digests.size(), 4u);

  std::vector<std::string> blocks;
  for (size_t i = 0; i < digests.size(); ++i) {
    blocks.push_back(data.substr(i * block, block));
  }
  const auto leaves = b3sum("", write_inputs(dir, blocks));
  ASSERT_EQ(leaves.size(), blocks.size());
  Digest prev = seed;
  for (size_t i = 0; i < digests.size(); ++i) {
    const Digest leaf = blake3_hash(blocks[i]);
    EXPECT_EQ(to_hex(leaf), leaves[i]);
    const std::string leaf_path = dir.file("leaf" + std::to_string(i));
    const std::string key_path = dir.file("key" + std::to_string(i));
    testing::write_file(leaf_path, as_bytes(leaf));
    testing::write_file(key_path, as_bytes(prev));
    const auto link = b3sum("--keyed", {leaf_path}, key_path);
    ASSERT_EQ(link.size(), 1u);
    EXPECT_EQ(to_hex(digests[i]), link[0]) << "link " << i;
    prev = digests[i];
  }
}

// The seed's key material, rebuilt here byte by byte from the documented TLV
// layout, then derived by the real b3sum binary.
TEST(Digest, seed_is_b3sum_derive_key_of_documented_tlv_fields) {
  testing::TempDir dir;
  const std::string model = "meta-llama/Llama-3.1-8B-Instruct";
  const std::string tools = R"([{"function":{"name":"f"},"type":"function"}])";
  auto tlv = [](uint8_t tag, std::string_view v) {
    std::string out(1, static_cast<char>(tag));
    const auto n = static_cast<uint32_t>(v.size());
    for (int i = 0; i < 4; ++i) {
      out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    }
    return out + std::string(v);
  };
  const std::string version(std::string("\x01\x00\x00\x00", 4));
  const std::string without_tools = tlv(1, version) + tlv(2, model);
  const std::string with_tools = without_tools + tlv(3, as_bytes(blake3_hash(tools)));
  const auto expected = b3sum("--derive-key '" + std::string(kDigestSeedContext) + "'",
                              write_inputs(dir, {without_tools, with_tools}));
  ASSERT_EQ(expected.size(), 2u);
  EXPECT_EQ(to_hex(make_digest_seed({.model = model})), expected[0]);
  EXPECT_EQ(to_hex(make_digest_seed({.model = model, .canonical_tools = tools})), expected[1]);
}

TEST(Digest, seed_depends_on_every_field_and_nothing_else) {
  const Digest base = make_digest_seed({.model = "a"});
  EXPECT_EQ(base, make_digest_seed({.model = "a"}));
  EXPECT_NE(base, make_digest_seed({.model = "b"}));
  EXPECT_NE(base, make_digest_seed({.format_version = 2, .model = "a"}));
  EXPECT_NE(base, make_digest_seed({.model = "a", .canonical_tools = "[]x"}));
  // Length prefixes keep fields from running together.
  EXPECT_NE(make_digest_seed({.model = "ab", .canonical_tools = "c"}),
            make_digest_seed({.model = "a", .canonical_tools = "bc"}));
}

TEST(Digest, fast_path_equals_reference_for_every_block_size_and_length) {
  for (uint32_t block = 64; block <= 1024; block += 64) {
    for (size_t len : {size_t{0}, size_t{block - 1}, size_t{block}, size_t{block + 1}, size_t{block * 65 + 3},
                       size_t{block * 130}}) {
      const std::string data = random_bytes(len, block * 7919 + static_cast<uint32_t>(len));
      std::string model = "m";
      model += std::to_string(block);
      const Digest seed = make_digest_seed({.model = model});
      std::vector<Digest> fast;
      std::vector<Digest> ref;
      compute_prefix_digests(seed, data, block, fast);
      compute_prefix_digests_reference(seed, data, block, ref);
      EXPECT_EQ(fast.size(), len / block);
      EXPECT_EQ(fast, ref) << "block " << block << " length " << len;
    }
  }
}

TEST(Digest, partial_tail_block_is_not_indexed) {
  const Digest seed = make_digest_seed({.model = "m"});
  const std::string data = random_bytes(256 * 3, 1);
  std::vector<Digest> full;
  std::vector<Digest> with_tail;
  compute_prefix_digests(seed, data, 256, full);
  compute_prefix_digests(seed, data + std::string(255, 'x'), 256, with_tail);
  EXPECT_EQ(full.size(), 3u);
  EXPECT_EQ(full, with_tail);
}

TEST(Digest, appends_to_out_and_stops_at_max_digests) {
  const Digest seed = make_digest_seed({.model = "m"});
  const std::string data = random_bytes(64 * 200, 2);
  std::vector<Digest> all;
  compute_prefix_digests(seed, data, 64, all);
  ASSERT_EQ(all.size(), 200u);
  std::vector<Digest> capped = {Digest{}};
  compute_prefix_digests(seed, data, 64, capped, 70);
  ASSERT_EQ(capped.size(), 71u);
  EXPECT_EQ(capped[0], Digest{});
  EXPECT_TRUE(std::equal(capped.begin() + 1, capped.end(), all.begin()));
}

TEST(Digest, invalid_block_bytes_appends_nothing) {
  const Digest seed = make_digest_seed({.model = "m"});
  const std::string data = random_bytes(4096, 3);
  for (uint32_t bad : {0u, 32u, 100u, 1088u, 2048u}) {
    std::vector<Digest> out;
    compute_prefix_digests(seed, data, bad, out);
    EXPECT_TRUE(out.empty()) << bad;
  }
}

TEST(Digest, chain_resumes_from_last_digest_at_a_block_boundary) {
  const Digest seed = make_digest_seed({.model = "m"});
  const std::string data = random_bytes(256 * 90, 4);
  std::vector<Digest> whole;
  compute_prefix_digests(seed, data, 256, whole);
  std::vector<Digest> parts;
  compute_prefix_digests(seed, std::string_view(data).substr(0, 256 * 37 + 100), 256, parts);
  ASSERT_EQ(parts.size(), 37u);
  const Digest last = parts.back();
  compute_prefix_digests(last, std::string_view(data).substr(256 * 37), 256, parts);
  EXPECT_EQ(parts, whole);
}

TEST(Digest, digests_are_positional_and_depend_on_the_whole_prefix) {
  const Digest seed = make_digest_seed({.model = "m"});
  const std::string a = random_bytes(256, 5);
  const std::string b = random_bytes(256, 6);
  std::vector<Digest> ab;
  std::vector<Digest> ba;
  std::vector<Digest> bb;
  compute_prefix_digests(seed, a + b, 256, ab);
  compute_prefix_digests(seed, b + a, 256, ba);
  compute_prefix_digests(seed, b + b, 256, bb);
  // The same block at another position, or after another prefix, digests differently.
  EXPECT_NE(ab[1], ba[0]);
  EXPECT_NE(ab[0], ba[1]);
  EXPECT_NE(ab[1], bb[1]);
  // Another seed changes every digest.
  std::vector<Digest> other;
  compute_prefix_digests(make_digest_seed({.model = "n"}), a + b, 256, other);
  EXPECT_NE(other[0], ab[0]);
  EXPECT_NE(other[1], ab[1]);
}

// Two processes (and this one) agree: nothing in a digest comes from process
// state. cgn-digest is run twice as a child process over the same body.
TEST(Digest, two_processes_compute_identical_digests) {
  testing::TempDir dir;
  std::string body =
      R"({"model":"qwen","tools":[{"type":"function","function":{"name":"get","parameters":{}}}],)"
      R"("messages":[{"role":"system","content":")" +
      std::string(3000, 's') + R"("},{"role":"user","content":"hello"}]})";
  testing::write_file(dir.file("body.json"), body);
  auto parsed = parse_openai_request(Endpoint::kChat, body);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  for (uint32_t block : {64u, 256u, 1024u}) {
    std::vector<Digest> in_process;
    compute_prefix_digests(make_digest_seed(digest_seed_fields(*parsed)), parsed->canonical_prompt, block,
                           in_process);
    std::vector<std::string> expected;
    for (const auto& d : in_process) {
      expected.push_back(to_hex(d));
    }
    ASSERT_FALSE(expected.empty());
    std::string cmd = "'";
    cmd.append(testing::bin_path("cgn-digest")).append("' --block-bytes ").append(std::to_string(block));
    cmd.append(" '").append(dir.file("body.json")).append("'");
    EXPECT_EQ(run_lines(cmd), expected) << "first process, block " << block;
    EXPECT_EQ(run_lines(cmd), expected) << "second process, block " << block;
  }
}

}  // namespace
}  // namespace cgn
