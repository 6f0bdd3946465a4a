#include "state/etcd/keys.h"

namespace cgn::etcd::keys {

EtcdStatus check_node_id(std::string_view node) {
  if (node.empty() || node.find('/') != std::string_view::npos || node.find('\0') != std::string_view::npos) {
    return make_error(EtcdErrc::kInvalidArgument,
                      "node id '" + std::string(node) + "' must be non-empty and hold no '/' or NUL");
  }
  return Ok{};
}

std::string node_key(std::string_view node) {
  return std::string(kNodesPrefix) + std::string(node);
}

std::string kv_prefix(std::string_view node) {
  return std::string(kKvPrefix) + std::string(node) + "/";
}

std::string kv_key(std::string_view node, const Digest& digest) {
  return kv_prefix(node) + to_hex(digest);
}

std::string cordon_key(std::string_view node) {
  return std::string(kCordonPrefix) + std::string(node);
}

std::optional<std::string> node_of(std::string_view key, std::string_view prefix) {
  if (!key.starts_with(prefix)) {
    return std::nullopt;
  }
  std::string_view rest = key.substr(prefix.size());
  if (!check_node_id(rest).ok()) {
    return std::nullopt;
  }
  return std::string(rest);
}

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  return -1;
}
}  // namespace

std::optional<std::pair<std::string, Digest>> parse_kv_key(std::string_view key) {
  if (!key.starts_with(kKvPrefix)) {
    return std::nullopt;
  }
  std::string_view rest = key.substr(kKvPrefix.size());
  auto slash = rest.find('/');
  if (slash == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view node = rest.substr(0, slash);
  std::string_view hex = rest.substr(slash + 1);
  Digest d{};
  if (!check_node_id(node).ok() || hex.size() != d.size() * 2) {
    return std::nullopt;
  }
  for (size_t i = 0; i < d.size(); ++i) {
    int hi = hex_value(hex[2 * i]);
    int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return std::nullopt;
    }
    d[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return std::make_pair(std::string(node), d);
}

}  // namespace cgn::etcd::keys
