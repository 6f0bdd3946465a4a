#include "sim/tokenizer.h"

#include <gtest/gtest.h>

#include <cstring>

namespace cgn::sim {
namespace {

// The documented algorithm, written out independently of tokenizer.cpp.
std::vector<TokenId> reference_encode(std::string_view text) {
  std::vector<TokenId> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    for (size_t p = start; p < end; p += 4) {
      const size_t len = std::min<size_t>(4, end - p);
      uint64_t v = 0;
      for (size_t i = 0; i < len; ++i) {
        v |= static_cast<uint64_t>(static_cast<unsigned char>(text[p + i])) << (8 * i);
      }
      out.push_back(
          static_cast<TokenId>(mix64((v | (static_cast<uint64_t>(len) << 32)) ^ kTokenSeed) % kTextVocab));
    }
    start = end;
  }
  return out;
}

TEST(Tokenizer, EncodeFollowsTheDocumentedAlgorithm) {
  for (std::string_view text : {"", "a", "abcd", "abcde", "hello world\nsecond line\n\n", "x\ny\nzz\n",
                                "<|user|>\nWhat is the capital of France?<|end|>\n<|assistant|>\n"}) {
    EXPECT_EQ(encode(text), reference_encode(text)) << text;
  }
}

TEST(Tokenizer, SameTextGivesSameIdsAndDifferentPiecesDiffer) {
  EXPECT_EQ(encode("stable across runs"), encode("stable across runs"));
  EXPECT_NE(piece_id("abcd"), piece_id("abce"));
  EXPECT_NE(piece_id("ab"), piece_id(std::string_view("ab\0\0", 4)));  // length is part of the key
}

TEST(Tokenizer, ConcatenationAfterNewlineIsPrefixStable) {
  const std::string a = "first line of a system prompt\nanother\n";
  const std::string b = "the user question goes here";
  std::vector<TokenId> joined = encode(a + b);
  std::vector<TokenId> parts = encode(a);
  const std::vector<TokenId> tail = encode(b);
  parts.insert(parts.end(), tail.begin(), tail.end());
  EXPECT_EQ(joined, parts);
}

TEST(Tokenizer, AboutFourBytesPerTokenOnProse) {
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text += "The quick brown fox jumps over the lazy dog and keeps running through the field.\n";
  }
  const double bytes_per_token = static_cast<double>(text.size()) / static_cast<double>(encode(text).size());
  EXPECT_GT(bytes_per_token, 3.5);
  EXPECT_LE(bytes_per_token, 4.0);
}

TEST(Tokenizer, GeneratedPiecesRetokeniseToTheSameIds) {
  std::string text;
  std::vector<TokenId> ids;
  for (uint32_t k = 0; k < 50; ++k) {
    const GeneratedPiece p = generated_piece(42, k);
    ASSERT_EQ(p.text.size(), 4u);
    text.append(p.text);
    ids.push_back(p.id);
  }
  EXPECT_EQ(encode(text), ids);
  EXPECT_EQ(generated_piece(42, 7).id, generated_piece(42, 7).id);
}

TEST(Tokenizer, ChatTurnNPromptIsATokenPrefixOfTurnNPlusOne) {
  std::vector<ChatMessage> turn1 = {{"system", "You are helpful."}, {"user", "Tell me about KV caches."}};
  const std::vector<TokenId> p1 = encode(render_chat(turn1));
  std::string reply;
  std::vector<TokenId> reply_ids;
  for (uint32_t k = 0; k < 20; ++k) {
    reply.append(generated_piece(7, k).text);
    reply_ids.push_back(generated_piece(7, k).id);
  }
  std::vector<ChatMessage> turn2 = turn1;
  turn2.push_back({"assistant", reply});
  turn2.push_back({"user", "And prefix caching?"});
  const std::vector<TokenId> p2 = encode(render_chat(turn2));
  ASSERT_GT(p2.size(), p1.size() + reply_ids.size());
  EXPECT_TRUE(std::equal(p1.begin(), p1.end(), p2.begin()));
  EXPECT_TRUE(std::equal(reply_ids.begin(), reply_ids.end(), p2.begin() + static_cast<ptrdiff_t>(p1.size())));
}

TEST(Tokenizer, PieceEndsMapTokensBackToText) {
  const std::string text = "echo me\nplease";
  std::vector<TokenId> ids;
  std::vector<uint32_t> ends;
  encode(text, ids, &ends);
  ASSERT_EQ(ids.size(), ends.size());
  EXPECT_EQ(ends.back(), text.size());
  uint32_t begin = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ids[i], piece_id(std::string_view(text).substr(begin, ends[i] - begin)));
    begin = ends[i];
  }
}

}  // namespace
}  // namespace cgn::sim
