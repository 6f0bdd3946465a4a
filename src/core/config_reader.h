// A small binder from TOML (toml++) to typed structs. Each module declares its own section
// struct and a function that reads it through a TableReader:
//
//   struct AgentConfig { std::string node_id; std::string listen = "0.0.0.0:9090"; };
//   void read_agent(cgn::config::TableReader& r, AgentConfig& c) {
//     r.get("node_id", c.node_id);
//     r.get_host_port("listen", c.listen);
//   }
//   ...
//   root.table("agent", [&](TableReader& t) { read_agent(t, cfg.agent); });
//
// A field left out of the file keeps the struct's default. Every key a reader does not consume is an
// error ("unknown key"); every error names the file, line, column and dotted key path, e.g.
//   cognitora.toml:12:9: key 'router.listen' expected string, got integer
// Errors are collected, not thrown: one load reports every problem in the file at once.
#pragma once

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/result.h"

namespace cgn::config {

// What went wrong; the first problem found decides the code of a failed load.
enum class ConfigError {
  io,            // the file cannot be read
  too_large,     // the input exceeds the size bound
  syntax,        // not valid TOML
  unknown_key,   // a key no reader consumed
  wrong_type,    // e.g. a string where an integer belongs
  missing_key,   // a required key is absent
  out_of_range,  // a number outside its allowed range
  bad_value,     // a value of the right type that is still not allowed (enum, address, ...)
  missing_env,   // a *_env key names an environment variable that is not set
};

std::string_view to_string(ConfigError e);

// Looks up an environment variable; injectable so tests are hermetic.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// The real process environment (getenv).
EnvLookup process_env();

// A secret read from the environment (API keys, gossip secret). It never prints its value:
// fmt and streams render "<redacted>" so an accidental log line is safe. Only reveal() gives the
// value, and only code that needs it (the auth check, the gossip HMAC) should call it.
class Secret {
 public:
  Secret() = default;
  Secret(std::string value, std::string env_name)
      : value_(std::move(value)), env_name_(std::move(env_name)) {}

  bool empty() const { return value_.empty(); }
  const std::string& reveal() const { return value_; }
  // The environment variable it came from ("" if none).
  const std::string& env_name() const { return env_name_; }
  // "<redacted>" or "<unset>", for dumps and logs.
  std::string redacted() const { return value_.empty() ? "<unset>" : "<redacted>"; }
  bool operator==(const Secret&) const = default;

 private:
  std::string value_;
  std::string env_name_;
};

// One problem found while reading.
struct Diagnostic {
  ConfigError code{};
  std::string message;  // "file:line:col: ..."
  uint32_t line = 0;    // 0 when toml++ had no position
  uint32_t column = 0;
};

// Shared by every TableReader of one load: the source name, the environment and the
// collected diagnostics. Not thread-safe; one load runs on one thread.
class ConfigContext {
 public:
  explicit ConfigContext(std::string source_name, EnvLookup env = process_env());

  const std::string& source_name() const { return source_name_; }
  const EnvLookup& env() const { return env_; }

  // "file:line:col" for a region; just "file" when toml++ has no position for it.
  std::string location(const toml::source_region& where) const;

  void add(ConfigError code, const toml::source_region& where, std::string_view what);
  bool ok() const { return diagnostics_.empty(); }
  // In the order found (schema order).
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  // One error: every message on its own line in file order (line, then column), and the code of
  // the first of them.
  Error<ConfigError> to_error() const;

 private:
  std::string source_name_;
  EnvLookup env_;
  std::vector<Diagnostic> diagnostics_;
};

// An inclusive numeric range for get().
template <class T>
struct Range {
  T min = std::numeric_limits<T>::lowest();
  T max = std::numeric_limits<T>::max();
};

// Reads typed fields from one TOML table and records which keys were asked for; finish() reports
// every other key as unknown. table(), tables() and named_tables() call finish() on the readers
// they create; the root reader's owner calls it. Holds references: the table and the context must
// outlive it. Not thread-safe.
class TableReader {
 public:
  // path: the dotted key path of this table ("" for the document root, "router.nodes[2]", ...).
  TableReader(ConfigContext& ctx, const toml::table& table, std::string path);

  const std::string& path() const { return path_; }
  ConfigContext& context() { return ctx_; }
  bool has(std::string_view key) const { return table_.contains(key); }
  // Whether the nested table `table` holds `key` (read or not), for rules spanning sections.
  bool has_in(std::string_view table, std::string_view key) const {
    const auto* t = table_.get_as<toml::table>(table);
    return t != nullptr && t->contains(key);
  }
  // True when the key is present and a TOML boolean (for keys that also accept an older form).
  bool holds_bool(std::string_view key) const {
    const auto* n = table_.get(key);
    return n != nullptr && n->is_boolean();
  }
  // The dotted path of a key in this table, for messages.
  std::string key_path(std::string_view key) const;

  // Optional fields: absent -> `out` keeps its default and the call returns false; present and
  // valid -> stored, returns true; present but invalid -> error recorded, `out` untouched, false.
  bool get(std::string_view key, bool& out);
  bool get(std::string_view key, std::string& out);
  // Accepts a TOML float or integer; NaN and infinities are always out of range.
  bool get(std::string_view key, double& out, Range<double> range = {});
  template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) bool get(std::string_view key, T& out,
                                                                       Range<T> range = {}) {
    int64_t v = 0;
    Range<int64_t> r{clamp_bound<T>(range.min), clamp_bound<T>(range.max)};
    if (!get_int(key, v, r)) {
      return false;
    }
    out = static_cast<T>(v);
    return true;
  }
  bool get(std::string_view key, std::vector<std::string>& out);
  template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) bool get(std::string_view key,
                                                                       std::vector<T>& out,
                                                                       Range<T> range = {}) {
    std::vector<int64_t> v;
    Range<int64_t> r{clamp_bound<T>(range.min), clamp_bound<T>(range.max)};
    if (!get_int_array(key, v, r)) {
      return false;
    }
    out.assign(v.begin(), v.end());
    return true;
  }
  // An optional value: absent -> std::nullopt.
  template <class T, class... Extra>
  bool get(std::string_view key, std::optional<T>& out, Extra&&... extra) {
    T v{};
    if (!get(key, v, std::forward<Extra>(extra)...)) {
      return false;
    }
    out = std::move(v);
    return true;
  }

  // Required fields: like get(), but absence is an error ("missing required key").
  template <class T, class... Extra>
  bool require(std::string_view key, T& out, Extra&&... extra) {
    if (!has(key)) {
      missing(key);
      return false;
    }
    return get(key, out, std::forward<Extra>(extra)...);
  }

  // A string that must be one of `allowed`.
  bool get_one_of(std::string_view key, std::string& out, std::initializer_list<std::string_view> allowed);
  bool get_one_of(std::string_view key, std::string& out, std::span<const std::string_view> allowed);
  // A string naming an enum value.
  template <class E>
  bool get_enum(std::string_view key, E& out, std::initializer_list<std::pair<std::string_view, E>> names) {
    std::string s;
    std::vector<std::string_view> allowed;
    for (const auto& [n, v] : names) {
      allowed.push_back(n);
    }
    if (!get_choice(key, s, allowed)) {
      return false;
    }
    for (const auto& [n, v] : names) {
      if (n == s) {
        out = v;
      }
    }
    return true;
  }
  // A "HOST:PORT" listen or peer address (port 0..65535; host non-empty, IPv6 in brackets).
  bool get_host_port(std::string_view key, std::string& out);
  // A URL starting with http:// or https://.
  bool get_url(std::string_view key, std::string& out);
  // Arrays of the two above; each bad element is reported with its index.
  bool get_host_port_list(std::string_view key, std::vector<std::string>& out);
  bool get_url_list(std::string_view key, std::vector<std::string>& out);
  // `key` holds the NAME of an environment variable; its value becomes the secret. A missing
  // variable is an error naming it. Absent key -> out untouched, false.
  bool get_secret_env(std::string_view key, Secret& out);

  // Records an error at `key` (its value's position, or this table's when absent), for checks
  // the typed getters cannot express (e.g. "tls_cert and tls_key go together").
  void fail(std::string_view key, ConfigError code, std::string_view what);

  // A nested table: if present, calls fn(reader) and then reports its unknown keys. A present
  // key that is not a table is a type error. Returns true when the table was present.
  bool table(std::string_view key, const std::function<void(TableReader&)>& fn);
  // An array of tables ([[x]]): fn(reader, index) per element, unknown keys reported per element.
  bool tables(std::string_view key, const std::function<void(TableReader&, size_t)>& fn);
  // Every not-yet-consumed key whose value is a table, for maps keyed by a name chosen in the file
  // (e.g. [router.admission.models."llama-3"]): fn(name, reader). Values that are not tables are
  // left for finish() to report.
  void named_tables(const std::function<void(const std::string& name, TableReader&)>& fn);

  // Reports every key of this table not consumed by a getter as an unknown key (with a
  // "did you mean" hint when a consumed or known key is close). Idempotent.
  void finish();

 private:
  template <class T>
  static int64_t clamp_bound(T v) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      return v > static_cast<T>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                     : static_cast<int64_t>(v);
    } else {
      return static_cast<int64_t>(v);
    }
  }
  bool get_int(std::string_view key, int64_t& out, Range<int64_t> range);
  bool get_int_array(std::string_view key, std::vector<int64_t>& out, Range<int64_t> range);
  bool get_choice(std::string_view key, std::string& out, const std::vector<std::string_view>& allowed);
  bool get_checked_list(std::string_view key, std::vector<std::string>& out, bool (*valid)(std::string_view),
                        std::string_view expected);
  const toml::node* take(std::string_view key);
  void missing(std::string_view key);
  void wrong_type(const std::string& path, const toml::node& node, std::string_view expected);

  ConfigContext& ctx_;
  const toml::table& table_;
  std::string path_;
  std::set<std::string, std::less<>> consumed_;
  bool finished_ = false;
};

// The TOML type name of a node as users see it: "string", "integer", "float", "boolean", "table",
// "array", "date", "time", "date-time".
std::string_view toml_type_name(const toml::node& node);

// A string value as messages show it: in double quotes, control bytes as \xNN, cut after 64 bytes.
std::string quoted(std::string_view s);

// "HOST:PORT" with a non-empty host (name, IPv4, or [IPv6]) and a port in 0..65535.
bool valid_host_port(std::string_view s);
// "http://" or "https://" followed by a host, no whitespace or control bytes.
bool valid_http_url(std::string_view s);

// Parses TOML text (bounded to max_bytes) into a table, or a syntax/too_large error naming
// source:line:col.
inline constexpr size_t kMaxConfigBytes = 1 << 20;
Result<toml::table, ConfigError> parse_toml(std::string_view text, const std::string& source_name,
                                            size_t max_bytes = kMaxConfigBytes);

}  // namespace cgn::config

// A Secret formats as "<redacted>" (or "<unset>"), so it cannot leak through a log line.
template <>
struct fmt::formatter<cgn::config::Secret> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const cgn::config::Secret& s, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(s.redacted(), ctx);
  }
};
