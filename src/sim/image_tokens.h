// Image parts in chat messages, counted as tokens the way vLLM does for the
// LLaVA-1.5 family (llava-hf/llava-1.5-7b-hf: a 336x336 CLIP ViT-L/14 tower,
// so every image, whatever its size, becomes (336/14)^2 = 576 <image> tokens
// in the prompt). The simulator has no images to look at: an
// {"type":"image_url","image_url":{"url":U}} part becomes a line of
// placeholder text that the tokenizer cuts into exactly 576 pieces, derived
// from a hash of U (a data: URL carries the image bytes), so the same image
// hits the prefix cache again and a different one does not — as vLLM's
// multimodal hashes do.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/result.h"

namespace cgn::sim {

inline constexpr uint32_t kImageTokens = 576;
inline constexpr size_t kMaxImagesPerPrompt = 16;

enum class ImageError { kBadPart };

// Appends the image part's placeholder to `out` on a line of its own (a '\n' first when
// `out` does not end with one): kImageTokens tokens, the last ending the line.
Status<ImageError> append_image_placeholder(const nlohmann::json& part, std::string& out);

}  // namespace cgn::sim
