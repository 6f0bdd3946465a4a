#include "cluster/state_store.h"

#include <charconv>

namespace cgn::cluster {

const char* to_string(StateError e) {
  switch (e) {
    case StateError::kConfig:
      return "config";
    case StateError::kStart:
      return "start";
  }
  return "unknown";
}

const char* to_string(NodeEvent::Kind k) {
  switch (k) {
    case NodeEvent::Kind::kUpsert:
      return "upsert";
    case NodeEvent::Kind::kRemove:
      return "remove";
    case NodeEvent::Kind::kPrefixes:
      return "prefixes";
    case NodeEvent::Kind::kPolicy:
      return "policy";
    case NodeEvent::Kind::kBackend:
      return "backend";
  }
  return "unknown";
}

Result<NodeEndpoint, StateError> parse_node_url(std::string_view url) {
  auto fail = [&](std::string_view why) {
    return make_error(StateError::kConfig, "node URL \"" + std::string(url) + "\": " + std::string(why));
  };
  NodeEndpoint ep;
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
    ep.port = 80;
  } else if (url.starts_with("https://")) {
    rest = url.substr(8);
    ep.port = 443;
    ep.tls = true;
  } else {
    return fail("must start with http:// or https://");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  while (!path.empty() && path.back() == '/') {
    path.remove_suffix(1);
  }
  if (path.find_first_of("?#") != std::string_view::npos) {
    return fail("must not carry a query or fragment");
  }
  if (authority.find('@') != std::string_view::npos) {
    return fail("must not carry credentials");
  }
  std::string_view host;
  std::string_view port;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return fail("unclosed '[' in host");
    }
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return fail("junk after ']'");
      }
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
    }
  }
  if (host.empty()) {
    return fail("has no host");
  }
  if (!port.empty() || authority.ends_with(':')) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (ec != std::errc{} || p != port.data() + port.size() || v == 0 || v > 65535) {
      return fail("has an invalid port");
    }
    ep.port = static_cast<uint16_t>(v);
  }
  ep.host = std::string(host);
  ep.base_path = std::string(path);
  return ep;
}

}  // namespace cgn::cluster
