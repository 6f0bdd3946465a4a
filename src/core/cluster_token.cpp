#include "core/cluster_token.h"

namespace cgn::auth {

namespace {

// Compares every byte whatever the first difference (no early exit on content).
bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

bool ClusterToken::accepts(std::string_view candidate) const {
  if (tokens_.empty()) {
    return true;
  }
  bool ok = false;
  for (const auto& t : tokens_) {
    ok |= equal_constant_time(t, candidate);
  }
  return ok;
}

}  // namespace cgn::auth
