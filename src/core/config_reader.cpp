#include "core/config_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <tuple>

namespace cgn::config {

std::string_view to_string(ConfigError e) {
  switch (e) {
    case ConfigError::io:
      return "io";
    case ConfigError::too_large:
      return "too_large";
    case ConfigError::syntax:
      return "syntax";
    case ConfigError::unknown_key:
      return "unknown_key";
    case ConfigError::wrong_type:
      return "wrong_type";
    case ConfigError::missing_key:
      return "missing_key";
    case ConfigError::out_of_range:
      return "out_of_range";
    case ConfigError::bad_value:
      return "bad_value";
    case ConfigError::missing_env:
      return "missing_env";
  }
  return "unknown";
}

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    // Read once at load, before any thread could call setenv (Cognitora never does).
    const char* v = std::getenv(std::string(name).c_str());  // NOLINT(concurrency-mt-unsafe)
    if (v == nullptr) {
      return std::nullopt;
    }
    return std::string(v);
  };
}

std::string_view toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

namespace {

// Quotes a key for a dotted path when it is not a bare TOML key.
std::string path_segment(std::string_view key) {
  bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (bare) {
    return std::string(key);
  }
  std::string out = "\"";
  for (char c : key) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
      continue;
    }
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace

std::string quoted(std::string_view s) {
  constexpr size_t kMax = 64;
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMax) {
    out += "...";
  }
  out += '"';
  return out;
}

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1);
  std::vector<size_t> cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    prev[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

bool valid_port(std::string_view p) {
  if (p.empty() || p.size() > 5) {
    return false;
  }
  int v = 0;
  for (char c : p) {
    if (c < '0' || c > '9') {
      return false;
    }
    v = v * 10 + (c - '0');
  }
  return v <= 65535;
}

bool valid_host(std::string_view h) {
  if (h.empty() || h.size() > 253) {
    return false;
  }
  if (h.front() == '[') {
    return h.size() > 2 && h.back() == ']' && std::all_of(h.begin() + 1, h.end() - 1, [](char c) {
             return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
           });
  }
  return std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_';
  });
}

}  // namespace

bool valid_host_port(std::string_view s) {
  auto colon = s.rfind(':');
  return colon != std::string_view::npos && valid_host(s.substr(0, colon)) && valid_port(s.substr(colon + 1));
}

bool valid_http_url(std::string_view v) {
  std::string_view rest;
  if (v.starts_with("http://")) {
    rest = v.substr(7);
  } else if (v.starts_with("https://")) {
    rest = v.substr(8);
  }
  return !rest.empty() && rest.front() != '/' &&
         std::none_of(v.begin(), v.end(), [](char c) { return static_cast<unsigned char>(c) <= 0x20; });
}

// ---------------------------------------------------------------------------------------------------
// ConfigContext

ConfigContext::ConfigContext(std::string source_name, EnvLookup env)
    : source_name_(std::move(source_name)), env_(std::move(env)) {}

std::string ConfigContext::location(const toml::source_region& where) const {
  if (where.begin.line == 0) {
    return source_name_;
  }
  return fmt::format("{}:{}:{}", source_name_, where.begin.line, where.begin.column);
}

void ConfigContext::add(ConfigError code, const toml::source_region& where, std::string_view what) {
  diagnostics_.push_back(
      Diagnostic{code, fmt::format("{}: {}", location(where), what), where.begin.line, where.begin.column});
}

Error<ConfigError> ConfigContext::to_error() const {
  if (diagnostics_.empty()) {
    return make_error(ConfigError::bad_value, source_name_ + ": unknown configuration error");
  }
  std::vector<const Diagnostic*> sorted;
  for (const auto& d : diagnostics_) {
    sorted.push_back(&d);
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic* a, const Diagnostic* b) {
    return std::tie(a->line, a->column) < std::tie(b->line, b->column);
  });
  std::string msg;
  for (const Diagnostic* d : sorted) {
    if (!msg.empty()) {
      msg += '\n';
    }
    msg += d->message;
  }
  return make_error(sorted.front()->code, std::move(msg));
}

// ---------------------------------------------------------------------------------------------------
// TableReader

TableReader::TableReader(ConfigContext& ctx, const toml::table& table, std::string path)
    : ctx_(ctx), table_(table), path_(std::move(path)) {}

std::string TableReader::key_path(std::string_view key) const {
  if (path_.empty()) {
    return path_segment(key);
  }
  return path_ + "." + path_segment(key);
}

const toml::node* TableReader::take(std::string_view key) {
  consumed_.emplace(key);
  return table_.get(key);
}

void TableReader::missing(std::string_view key) {
  consumed_.emplace(key);
  ctx_.add(ConfigError::missing_key, table_.source(),
           fmt::format("missing required key '{}'", key_path(key)));
}

void TableReader::wrong_type(const std::string& path, const toml::node& node, std::string_view expected) {
  ctx_.add(ConfigError::wrong_type, node.source(),
           fmt::format("key '{}' expected {}, got {}", path, expected, toml_type_name(node)));
}

void TableReader::fail(std::string_view key, ConfigError code, std::string_view what) {
  const toml::node* n = table_.get(key);
  ctx_.add(code, n != nullptr ? n->source() : table_.source(),
           fmt::format("key '{}' {}", key_path(key), what));
}

bool TableReader::get(std::string_view key, bool& out) {
  const toml::node* n = take(key);
  if (n == nullptr) {
    return false;
  }
  if (auto v = n->value<bool>(); v && n->is_boolean()) {
    out = *v;
    return true;
  }
  wrong_type(key_path(key), *n, "boolean");
  return false;
}

bool TableReader::get(std::string_view key, std::string& out) {
  const toml::node* n = take(key);
  if (n == nullptr) {
    return false;
  }
  if (const auto* s = n->as_string()) {
    out = s->get();
    return true;
  }
  wrong_type(key_path(key), *n, "string");
  return false;
}

bool TableReader::get_int(std::string_view key, int64_t& out, Range<int64_t> range) {
  const toml::node* n = take(key);
  if (n == nullptr) {
    return false;
  }
  const auto* i = n->as_integer();
  if (i == nullptr) {
    wrong_type(key_path(key), *n, "integer");
    return false;
  }
  int64_t v = i->get();
  if (v < range.min || v > range.max) {
    ctx_.add(
        ConfigError::out_of_range, n->source(),
        fmt::format("key '{}' expected integer in [{}, {}], got {}", key_path(key), range.min, range.max, v));
    return false;
  }
  out = v;
  return true;
}

bool TableReader::get(std::string_view key, double& out, Range<double> range) {
  const toml::node* n = take(key);
  if (n == nullptr) {
    return false;
  }
  double v = 0;
  if (const auto* f = n->as_floating_point()) {
    v = f->get();
  } else if (const auto* i = n->as_integer()) {
    v = static_cast<double>(i->get());  // `weight = 1` is as good as `weight = 1.0`
  } else {
    wrong_type(key_path(key), *n, "number");
    return false;
  }
  if (!std::isfinite(v) || v < range.min || v > range.max) {
    ctx_.add(
        ConfigError::out_of_range, n->source(),
        fmt::format("key '{}' expected number in [{}, {}], got {}", key_path(key), range.min, range.max, v));
    return false;
  }
  out = v;
  return true;
}

bool TableReader::get(std::string_view key, std::vector<std::string>& out) {
  const toml::node* n = take(key);
  if (n == nullptr) {
    return false;
  }
  const auto* arr = n->as_array();
  if (arr == nullptr) {
    wrong_type(key_path(key), *n, "array of strings");
    return false;
  }
  std::vector<std::string> v;
  bool ok = true;
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::node& e = *arr->get(i);
    if (const auto* s = e.as_string()) {
      v.push_back(s->get());
    } else {
      wrong_type(fmt::format("{}[{}]", key_path(key), i), e, "string");
      ok = false;
    }
  }
  if (ok) {
    out = std::move(v);
  }
  return ok;
}

bool TableReader::get_int_array(std::string_view key, std::vector<int64_t>& out, Range<int64_t> range) {
  const toml::node* n = take(key);
  if (n == nullptr) {
    return false;
  }
  const auto* arr = n->as_array();
  if (arr == nullptr) {
    wrong_type(key_path(key), *n, "array of integers");
    return false;
  }
  std::vector<int64_t> v;
  bool ok = true;
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::node& e = *arr->get(i);
    std::string p = fmt::format("{}[{}]", key_path(key), i);
    if (const auto* x = e.as_integer()) {
      if (x->get() < range.min || x->get() > range.max) {
        ctx_.add(
            ConfigError::out_of_range, e.source(),
            fmt::format("key '{}' expected integer in [{}, {}], got {}", p, range.min, range.max, x->get()));
        ok = false;
      } else {
        v.push_back(x->get());
      }
    } else {
      wrong_type(p, e, "integer");
      ok = false;
    }
  }
  if (ok) {
    out = std::move(v);
  }
  return ok;
}

bool TableReader::get_choice(std::string_view key, std::string& out,
                             const std::vector<std::string_view>& allowed) {
  std::string s;
  if (!get(key, s)) {
    return false;
  }
  if (std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
    fail(key, ConfigError::bad_value,
         fmt::format("expected one of {}, got {}", fmt::join(allowed, "|"), quoted(s)));
    return false;
  }
  out = std::move(s);
  return true;
}

bool TableReader::get_one_of(std::string_view key, std::string& out,
                             std::initializer_list<std::string_view> allowed) {
  return get_choice(key, out, std::vector<std::string_view>(allowed));
}

bool TableReader::get_one_of(std::string_view key, std::string& out,
                             std::span<const std::string_view> allowed) {
  return get_choice(key, out, std::vector<std::string_view>(allowed.begin(), allowed.end()));
}

bool TableReader::get_host_port(std::string_view key, std::string& out) {
  std::string s;
  if (!get(key, s)) {
    return false;
  }
  if (!valid_host_port(s)) {
    fail(key, ConfigError::bad_value, fmt::format("expected HOST:PORT, got {}", quoted(s)));
    return false;
  }
  out = std::move(s);
  return true;
}

bool TableReader::get_url(std::string_view key, std::string& out) {
  std::string s;
  if (!get(key, s)) {
    return false;
  }
  if (!valid_http_url(s)) {
    fail(key, ConfigError::bad_value, fmt::format("expected an http:// or https:// URL, got {}", quoted(s)));
    return false;
  }
  out = std::move(s);
  return true;
}

bool TableReader::get_checked_list(std::string_view key, std::vector<std::string>& out,
                                   bool (*valid)(std::string_view), std::string_view expected) {
  std::vector<std::string> v;
  if (!get(key, v)) {
    return false;
  }
  bool ok = true;
  const toml::array& arr = *table_.get(key)->as_array();
  for (size_t i = 0; i < v.size(); ++i) {
    if (!valid(v[i])) {
      ctx_.add(ConfigError::bad_value, arr.get(i)->source(),
               fmt::format("key '{}[{}]' expected {}, got {}", key_path(key), i, expected, quoted(v[i])));
      ok = false;
    }
  }
  if (ok) {
    out = std::move(v);
  }
  return ok;
}

bool TableReader::get_host_port_list(std::string_view key, std::vector<std::string>& out) {
  return get_checked_list(key, out, valid_host_port, "HOST:PORT");
}

bool TableReader::get_url_list(std::string_view key, std::vector<std::string>& out) {
  return get_checked_list(key, out, valid_http_url, "an http:// or https:// URL");
}

bool TableReader::get_secret_env(std::string_view key, Secret& out) {
  std::string var;
  if (!get(key, var)) {
    return false;
  }
  if (var.empty()) {
    fail(key, ConfigError::bad_value, "expected the name of an environment variable, got \"\"");
    return false;
  }
  std::optional<std::string> value = ctx_.env() ? ctx_.env()(var) : std::nullopt;
  if (!value || value->empty()) {
    fail(key, ConfigError::missing_env,
         fmt::format("names environment variable '{}', which is {}", var, value ? "empty" : "not set"));
    return false;
  }
  out = Secret(std::move(*value), std::move(var));
  return true;
}

bool TableReader::table(std::string_view key, const std::function<void(TableReader&)>& fn) {
  const toml::node* n = take(key);
  if (n == nullptr) {
    return false;
  }
  const auto* t = n->as_table();
  if (t == nullptr) {
    wrong_type(key_path(key), *n, "table");
    return false;
  }
  TableReader sub(ctx_, *t, key_path(key));
  fn(sub);
  sub.finish();
  return true;
}

bool TableReader::tables(std::string_view key, const std::function<void(TableReader&, size_t)>& fn) {
  const toml::node* n = take(key);
  if (n == nullptr) {
    return false;
  }
  const auto* arr = n->as_array();
  if (arr == nullptr) {
    wrong_type(key_path(key), *n, "array of tables");
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::node& e = *arr->get(i);
    std::string p = fmt::format("{}[{}]", key_path(key), i);
    const auto* t = e.as_table();
    if (t == nullptr) {
      wrong_type(p, e, "table");
      ok = false;
      continue;
    }
    TableReader sub(ctx_, *t, p);
    fn(sub, i);
    sub.finish();
  }
  return ok;
}

void TableReader::named_tables(const std::function<void(const std::string& name, TableReader&)>& fn) {
  for (const auto& [k, v] : table_) {
    if (consumed_.contains(k.str()) || !v.is_table()) {
      continue;
    }
    consumed_.emplace(k.str());
    TableReader sub(ctx_, *v.as_table(), key_path(k.str()));
    fn(std::string(k.str()), sub);
    sub.finish();
  }
}

void TableReader::finish() {
  if (finished_) {
    return;
  }
  finished_ = true;
  for (const auto& [k, v] : table_) {
    if (consumed_.contains(k.str())) {
      continue;
    }
    std::string hint;
    size_t best = 3;
    for (const auto& known : consumed_) {
      if (table_.contains(known)) {
        continue;  // already used by a key of its own; suggesting it would mislead
      }
      size_t d = edit_distance(k.str(), known);
      if (d < best && d < std::max<size_t>(known.size(), 2)) {
        best = d;
        hint = fmt::format(" (did you mean '{}'?)", known);
      }
    }
    ctx_.add(ConfigError::unknown_key, k.source(),
             fmt::format("unknown key '{}'{}", key_path(k.str()), hint));
  }
}

// ---------------------------------------------------------------------------------------------------

Result<toml::table, ConfigError> parse_toml(std::string_view text, const std::string& source_name,
                                            size_t max_bytes) {
  if (text.size() > max_bytes) {
    return make_error(ConfigError::too_large,
                      fmt::format("{}: {} bytes exceeds the {}-byte limit for a config file", source_name,
                                  text.size(), max_bytes));
  }
  try {
    return toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    toml::source_region where = e.source();
    std::string loc = where.begin.line == 0
                          ? source_name
                          : fmt::format("{}:{}:{}", source_name, where.begin.line, where.begin.column);
    return make_error(ConfigError::syntax, fmt::format("{}: TOML syntax error: {}", loc, e.description()));
  } catch (const std::exception& e) {
    return make_error(ConfigError::syntax, fmt::format("{}: TOML syntax error: {}", source_name, e.what()));
  }
}

}  // namespace cgn::config
