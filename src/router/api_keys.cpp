#include "router/api_keys.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <sstream>

#include "core/text.h"

namespace cgn::router {

namespace {

std::array<uint8_t, 32> sha256(std::string_view s) {
  std::array<uint8_t, 32> out{};
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), out.data());
  return out;
}

// Blanks around a key, and the CR of a CRLF line.
std::string_view trim(std::string_view s) {
  return text::trim(s, " \t\r");
}

// Why a key is not acceptable, or empty when it is.
std::string key_problem(std::string_view key, const KeysLimits& limits) {
  if (key.size() < limits.min_key_bytes) {
    return "key shorter than " + std::to_string(limits.min_key_bytes) + " bytes";
  }
  if (key.size() > limits.max_key_bytes) {
    return "key longer than " + std::to_string(limits.max_key_bytes) + " bytes";
  }
  for (char c : key) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      return "key contains a space, control or non-ASCII byte";
    }
  }
  return {};
}

}  // namespace

Result<ApiKeys, KeysError> ApiKeys::parse(std::string_view text, std::string_view source,
                                          const KeysLimits& limits) {
  if (text.size() > limits.max_file_bytes) {
    return make_error(KeysError::kFormat, std::string(source) + ": larger than " +
                                              std::to_string(limits.max_file_bytes) + " bytes");
  }
  ApiKeys keys;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    if (auto why = key_problem(line, limits); !why.empty()) {
      return make_error(KeysError::kFormat, std::string(source) + ":" + std::to_string(line_no) + ": " + why);
    }
    if (keys.digests_.size() >= limits.max_keys) {
      return make_error(KeysError::kFormat,
                        std::string(source) + ": more than " + std::to_string(limits.max_keys) + " keys");
    }
    keys.digests_.push_back(sha256(line));
  }
  return keys;
}

Result<ApiKeys, KeysError> ApiKeys::load_file(const std::string& path, const KeysLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_error(KeysError::kRead, "cannot read API keys file \"" + path + "\"");
  }
  std::string text;
  text.resize(limits.max_file_bytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return parse(text, path, limits);
}

Status<KeysError> ApiKeys::add(const std::vector<std::string>& keys, std::string_view source,
                               const KeysLimits& limits) {
  size_t i = 0;
  for (const auto& k : keys) {
    ++i;
    if (auto why = key_problem(k, limits); !why.empty()) {
      return make_error(KeysError::kFormat, std::string(source) + " key #" + std::to_string(i) + ": " + why);
    }
    if (digests_.size() >= limits.max_keys) {
      return make_error(KeysError::kFormat, std::string(source) + ": too many keys");
    }
    digests_.push_back(sha256(k));
  }
  return Ok{};
}

std::string_view bearer_token(std::string_view v) {
  v = trim(v);
  if (v.size() < 7) {
    return {};
  }
  static constexpr std::string_view kScheme = "bearer ";
  for (size_t i = 0; i < kScheme.size(); ++i) {
    const char c = v[i];
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower != kScheme[i]) {
      return {};
    }
  }
  return trim(v.substr(kScheme.size()));
}

bool ApiKeys::check_token(std::string_view token) const {
  if (digests_.empty()) {
    return true;
  }
  const auto presented = sha256(token);
  int matched = 0;
  for (const auto& d : digests_) {
    matched |= static_cast<int>(CRYPTO_memcmp(d.data(), presented.data(), d.size()) == 0);
  }
  return matched != 0 && !token.empty();
}

bool ApiKeys::check_authorization(std::string_view header_value) const {
  if (digests_.empty()) {
    return true;
  }
  return check_token(bearer_token(header_value));
}

}  // namespace cgn::router
