#include "sim/tokenizer.h"

#include <array>
#include <cstring>

namespace cgn::sim {

namespace {

// 64 common three-letter words; generated replies are drawn from these.
constexpr std::array<std::string_view, 64> kWords = {
    " the", " and", " for", " are", " but", " not", " you", " all", " any", " can", " had", " her", " was",
    " one", " our", " out", " day", " get", " has", " him", " his", " how", " man", " new", " now", " old",
    " see", " two", " way", " who", " boy", " did", " its", " let", " put", " say", " she", " too", " use",
    " sky", " sea", " sun", " map", " key", " box", " cat", " dog", " red", " big", " low", " top", " end",
    " far", " few", " set", " run", " own", " air", " art", " job", " law", " war", " age", " act"};

struct PieceTable {
  std::array<TokenId, kWords.size()> ids{};
  PieceTable() {
    for (size_t i = 0; i < kWords.size(); ++i) {
      ids[i] = piece_id(kWords[i]);
    }
  }
};

const PieceTable& piece_table() {
  static const PieceTable table;
  return table;
}

inline TokenId id_of(const char* p, size_t len) {
  uint32_t v = 0;
  std::memcpy(&v, p, len);  // little-endian hosts only (x86-64, aarch64)
  const uint64_t key = (static_cast<uint64_t>(v) | (static_cast<uint64_t>(len) << 32)) ^ kTokenSeed;
  return static_cast<TokenId>(mix64(key) % kTextVocab);
}

}  // namespace

TokenId piece_id(std::string_view piece) {
  const size_t len = piece.size() < kPieceBytes ? piece.size() : kPieceBytes;
  return id_of(piece.data(), len);
}

void encode(std::string_view text, std::vector<TokenId>& ids, std::vector<uint32_t>* piece_ends) {
  ids.reserve(ids.size() + text.size() / kPieceBytes + 1);
  const char* base = text.data();
  size_t pos = 0;
  const size_t n = text.size();
  while (pos < n) {
    const void* nl = std::memchr(base + pos, '\n', n - pos);
    const size_t chunk_end = nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - base) + 1 : n;
    while (pos < chunk_end) {
      const size_t len = chunk_end - pos < kPieceBytes ? chunk_end - pos : kPieceBytes;
      ids.push_back(id_of(base + pos, len));
      pos += len;
      if (piece_ends != nullptr) {
        piece_ends->push_back(static_cast<uint32_t>(pos));
      }
    }
  }
}

std::vector<TokenId> encode(std::string_view text) {
  std::vector<TokenId> ids;
  encode(text, ids);
  return ids;
}

GeneratedPiece generated_piece(uint64_t seed, uint32_t k) {
  const uint64_t r = mix64(seed ^ (0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(k) + 1)));
  const size_t i = r & (kWords.size() - 1);
  return {kWords[i], piece_table().ids[i]};
}

uint64_t prompt_seed(std::span<const TokenId> prompt) {
  uint64_t h = kTokenSeed ^ prompt.size();
  for (TokenId t : prompt) {
    h = mix64(h ^ t);
  }
  return h;
}

std::string render_chat(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  size_t total = 16;
  for (const auto& m : messages) {
    total += m.role.size() + m.content.size() + 12;
  }
  std::string out;
  out.reserve(total);
  for (const auto& m : messages) {
    out += "<|";
    out += m.role;
    out += "|>\n";
    out += m.content;
    out += "<|end|>\n";
  }
  if (add_generation_prompt) {
    out += "<|assistant|>\n";
  }
  return out;
}

}  // namespace cgn::sim
