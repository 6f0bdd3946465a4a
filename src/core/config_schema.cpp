#include "core/config_schema.h"

#include <fmt/format.h>

#include <algorithm>

namespace cgn::config {

std::string doc_literal(const toml::node& node) {
  if (const auto* s = node.as_string()) {
    return fmt::format("\"{}\"", s->get());
  }
  if (const auto* i = node.as_integer()) {
    return fmt::format("{}", i->get());
  }
  if (const auto* d = node.as_floating_point()) {
    const double v = d->get();
    return v == std::floor(v) && std::abs(v) < 1e15 ? fmt::format("{:.1f}", v) : fmt::format("{}", v);
  }
  if (const auto* b = node.as_boolean()) {
    return b->get() ? "true" : "false";
  }
  if (const auto* a = node.as_array()) {
    std::string out = "[";
    for (size_t i = 0; i < a->size(); ++i) {
      out += (i == 0 ? "" : ", ") + doc_literal(*a->get(i));
    }
    return out + "]";
  }
  return "{}";
}

std::string render_markdown(const DocTable& table) {
  std::string out = "| key | type | default | range | meaning |\n|---|---|---|---|---|\n";
  for (const DocRow& r : table.rows) {
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", r.key, r.type, r.default_value, r.range, r.meaning);
  }
  return out;
}

namespace {

std::string begin_marker(std::string_view path) {
  return fmt::format("<!-- BEGIN cgn-config-doc {} -->\n", path.empty() ? "(top level)" : path);
}
constexpr std::string_view kEndMarker = "<!-- END cgn-config-doc -->";

}  // namespace

DocUpdate update_reference(std::string_view doc, const std::vector<DocTable>& tables) {
  DocUpdate u;
  u.text = std::string(doc);
  for (const DocTable& t : tables) {
    const std::string begin = begin_marker(t.path);
    const size_t b = u.text.find(begin);
    const size_t e = b == std::string::npos ? b : u.text.find(kEndMarker, b);
    if (e == std::string::npos) {
      u.missing.push_back(t.path.empty() ? "(top level)" : t.path);
      continue;
    }
    const size_t body = b + begin.size();
    const std::string want = render_markdown(t);
    if (u.text.compare(body, e - body, want) != 0) {
      u.drifted.push_back(t.path.empty() ? "(top level)" : t.path);
      u.text.replace(body, e - body, want);
    }
  }
  // Blocks for tables the declarations no longer have.
  constexpr std::string_view kBegin = "<!-- BEGIN cgn-config-doc ";
  for (size_t at = u.text.find(kBegin); at != std::string::npos; at = u.text.find(kBegin, at + 1)) {
    const size_t end = u.text.find(" -->", at);
    const std::string path = u.text.substr(at + kBegin.size(), end - at - kBegin.size());
    const bool known = std::any_of(tables.begin(), tables.end(), [&](const DocTable& t) {
      return (t.path.empty() ? "(top level)" : t.path) == path;
    });
    if (!known) {
      u.stray.push_back(path);
    }
  }
  return u;
}

}  // namespace cgn::config
