// Gateway API keys: bearer tokens from a keys file and/or the environment (docs/design/principles.md).
//
// Keys file format: one key per line; blank lines and lines starting with '#' are ignored;
// surrounding spaces and tabs are trimmed. Bounded: the file at most 1 MiB, a key 16..512 bytes
// of printable ASCII without spaces, at most 100000 keys. Errors name the line, never the key.
//
// Checking is constant-time in the key: the presented token and every configured key are hashed
// with SHA-256 and all digests are compared with CRYPTO_memcmp, without stopping at a match, so
// neither the position of a mismatch nor which key matched shows in the timing. Keys are never
// logged: only their count is.
//
// Thread-safety: immutable after construction; check() is safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace cgn::router {

enum class KeysError { kRead, kFormat };

struct KeysLimits {
  size_t max_file_bytes = 1u << 20;
  size_t min_key_bytes = 16;
  size_t max_key_bytes = 512;
  size_t max_keys = 100000;
};

class ApiKeys {
 public:
  ApiKeys() = default;  // open: no keys configured

  // Parses keys-file text (source names the file in messages).
  static Result<ApiKeys, KeysError> parse(std::string_view text, std::string_view source,
                                          const KeysLimits& limits = {});
  static Result<ApiKeys, KeysError> load_file(const std::string& path, const KeysLimits& limits = {});
  // Adds keys (from the environment); each must satisfy the same format rules.
  Status<KeysError> add(const std::vector<std::string>& keys, std::string_view source,
                        const KeysLimits& limits = {});

  bool enabled() const { return !digests_.empty(); }
  size_t size() const { return digests_.size(); }

  // True when the Authorization header value is "Bearer <a configured key>" (scheme
  // case-insensitive). Always true when no keys are configured.
  bool check_authorization(std::string_view header_value) const;
  // True when `token` is a configured key (constant-time in the key).
  bool check_token(std::string_view token) const;

 private:
  using Sha = std::array<uint8_t, 32>;
  std::vector<Sha> digests_;
};

// The token of an "Authorization: Bearer <token>" value; empty when it is not one.
std::string_view bearer_token(std::string_view header_value);

}  // namespace cgn::router
