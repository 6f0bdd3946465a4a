// A deterministic stand-in for a real tokenizer: about 4 bytes per token,
// identical on every run and machine, and fast enough to tokenise the
// benchmark's ~150 MB of prompts in well under a second.
//
// Algorithm (stable; tests recompute it):
//   1. Pre-split the text into lines: a chunk ends right after every '\n'.
//   2. Cut each chunk into pieces of 4 bytes from its start; the last piece of
//      a chunk may be shorter.
//   3. A piece's id is mix64(le32(piece bytes, zero padded) | len << 32 ^
//      kTokenSeed) % kTextVocab.
// Consequence used across the simulator: when A ends with '\n',
// encode(A + B) == encode(A) + encode(B). The chat template ends every
// message with '\n', so turn N+1's prompt tokens start with turn N's prompt
// tokens, and generated pieces (exactly 4 bytes) re-tokenise to the same ids.
//
// Thread safety: all functions are pure; a Tokenizer has no mutable state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cgn::sim {

using TokenId = uint32_t;

inline constexpr uint32_t kTextVocab = 128000;                 // ids of text pieces: [0, kTextVocab)
inline constexpr uint32_t kVocabSize = 128256;                 // Llama-3 vocabulary size
inline constexpr TokenId kEosToken = 128009;                   // Llama-3 <|eot_id|>
inline constexpr uint64_t kTokenSeed = 0x636f676e69746f72ULL;  // "cognitor"
inline constexpr size_t kPieceBytes = 4;

// splitmix64's finaliser: a stable 64-bit mixer (no std::hash anywhere).
constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// The id of one piece of at most 4 bytes.
TokenId piece_id(std::string_view piece);

// Appends the token ids of text to ids. When piece_ends is given, appends the
// end offset (exclusive, in bytes of text) of every piece, so callers can map
// tokens back to text (echo mode).
void encode(std::string_view text, std::vector<TokenId>& ids, std::vector<uint32_t>* piece_ends = nullptr);
std::vector<TokenId> encode(std::string_view text);

// Generated text: token k of a reply seeded with seed is one of 64 pieces of
// the form " xyz" (a space and a three-letter word), so replies read as words
// and re-tokenise to the same ids.
struct GeneratedPiece {
  std::string_view text;
  TokenId id;
};
GeneratedPiece generated_piece(uint64_t seed, uint32_t k);

// The default seed of a request that sets none: a hash of its prompt, so the
// same prompt always gets the same reply.
uint64_t prompt_seed(std::span<const TokenId> prompt);

// A chat message as the simulator's chat template sees it.
struct ChatMessage {
  std::string role;
  std::string content;
};

// The simulator's deterministic chat template:
//   for each message: "<|" role "|>\n" content "<|end|>\n"
//   then, when add_generation_prompt: "<|assistant|>\n"
// Turn N+1 (turn N's messages + the assistant reply + a new user message)
// renders to a string that starts with turn N's rendering minus its final
// generation prompt, which is itself the start of the reply message, so the
// whole turn-N prompt is a byte prefix of turn N+1.
std::string render_chat(std::span<const ChatMessage> messages, bool add_generation_prompt = true);

}  // namespace cgn::sim
