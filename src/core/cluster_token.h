// The cluster credential: a shared bearer token the router presents to every agent
// ([cluster] token_file / token_env, docs/security.md). Agents require it on their data path
// (/v1/*) and their gRPC service when one is configured; a client certificate verified by mutual
// TLS stands in for it. Several tokens may be configured so that a rotation can overlap: the
// first is the one presented, every one is accepted.
//
// Immutable after construction; thread-safe. The tokens never appear in logs, metrics or errors.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cgn::auth {

// HTTP request header and gRPC metadata key (lower case, as gRPC requires) carrying the token.
inline constexpr std::string_view kClusterTokenHeader = "X-CGN-Cluster-Token";
inline constexpr const char* kClusterTokenMetadata = "x-cgn-cluster-token";

class ClusterToken {
 public:
  ClusterToken() = default;  // none configured: every caller is accepted
  explicit ClusterToken(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}

  bool configured() const { return !tokens_.empty(); }
  // The token this process presents; "" when none is configured.
  std::string_view presented() const { return tokens_.empty() ? std::string_view{} : tokens_.front(); }
  // Whether `candidate` is one of the tokens (constant time in the candidate's bytes); true when
  // none is configured.
  bool accepts(std::string_view candidate) const;

 private:
  std::vector<std::string> tokens_;
};

}  // namespace cgn::auth
