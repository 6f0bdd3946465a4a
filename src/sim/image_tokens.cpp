#include "sim/image_tokens.h"

#include <nlohmann/json.hpp>

#include "sim/tokenizer.h"

namespace cgn::sim {

Status<ImageError> append_image_placeholder(const nlohmann::json& part, std::string& out) {
  auto img = part.find("image_url");
  if (img == part.end() || !img->is_object() || !img->contains("url") || !(*img)["url"].is_string()) {
    return make_error(ImageError::kBadPart, "'messages[].content[].image_url.url' must be a string");
  }
  const std::string& url = (*img)["url"].get_ref<const std::string&>();
  if (url.empty()) {
    return make_error(ImageError::kBadPart, "'messages[].content[].image_url.url' must not be empty");
  }
  uint64_t h = 0x696d616765ULL;  // "image"
  for (unsigned char c : url) {
    h = mix64(h ^ c);
  }
  if (!out.empty() && out.back() != '\n') {
    out += '\n';
  }
  // 576 pieces of 4 bytes; the last one's 4th byte is the line's '\n'.
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
  const size_t bytes = kImageTokens * kPieceBytes - 1;
  out.reserve(out.size() + bytes + 1);
  for (size_t i = 0; i < bytes; ++i) {
    if (i % 8 == 0) {
      h = mix64(h + i);
    }
    out += kAlphabet[(h >> ((i % 8) * 6)) & 63];
  }
  out += '\n';
  return Ok{};
}

}  // namespace cgn::sim
