// The declaration of every cognitora.toml key: one Field per key (its struct member, key name,
// range or allowed values, one doc line), grouped in a Section per table. Reading (load_config),
// printing (dump_config) and the reference tables of docs/configuration.md (cgn-config-doc) are
// all derived from these declarations; there is no second list of keys. The type and default
// of each setting are its struct member's declaration (core/config.h).
//
//   Section<TimeoutsConfig> s("router.timeouts");
//   s.add(value(&TimeoutsConfig::connect_ms, "connect_ms", "TCP connect to a node", {1, 86'400'000}));
//
// A rule that spans keys (both or neither, one bound below another) is a check() on the
// section; a rule on one key's value is a then() on its field. Both record errors through the
// TableReader, so they name file, line and key like every other error.
#pragma once

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/config_reader.h"

namespace cgn::config {

// One row of a reference table.
struct DocRow {
  std::string key;
  std::string type;
  std::string default_value;
  std::string range;
  std::string meaning;
};

// One reference table: a TOML table path ("router.limits", "[router.nodes]" for arrays of
// tables) and its rows.
struct DocTable {
  std::string path;
  std::vector<DocRow> rows;
};

// A value as the reference shows it: TOML literals, strings in double quotes.
std::string doc_literal(const toml::node& node);

template <class S>
struct Field {
  std::string key;
  std::string type;   // as the reference names it: integer, float, string, boolean, ...
  std::string range;  // "" when any value of the type is allowed
  std::string doc;
  // Reads the key into the struct; true when present and valid.
  std::function<bool(TableReader&, S&)> get;
  // Adds the key to a printed table (or nothing, for unset optional keys).
  std::function<void(const S&, toml::table&)> put;
  // Run after a successful get, for rules on the value alone.
  std::vector<std::function<void(TableReader&, S&)>> after;
  // A default shown in the reference instead of the printed default value ("the URL's host").
  std::string default_text;
  // Nested tables: their own reference tables.
  std::function<void(std::vector<DocTable>&)> children;

  Field&& then(std::function<void(TableReader&, S&)> fn) && {
    after.push_back(std::move(fn));
    return std::move(*this);
  }
  Field&& shown_default(std::string text) && {
    default_text = std::move(text);
    return std::move(*this);
  }
  // Printed only when not empty (keys whose empty value a reader would refuse).
  Field&& omit_empty() &&;
};

template <class S>
class Section {
 public:
  explicit Section(std::string path) : path_(std::move(path)) {}

  Section& add(Field<S> f) {
    fields_.push_back(std::move(f));
    return *this;
  }
  // A rule spanning keys, run after every key of the section was read.
  Section& check(std::function<void(TableReader&, S&)> fn) {
    checks_.push_back(std::move(fn));
    return *this;
  }

  const std::string& path() const { return path_; }

  void read(TableReader& r, S& s) const {
    for (const auto& f : fields_) {
      if (f.get(r, s)) {
        for (const auto& fn : f.after) {
          fn(r, s);
        }
      }
    }
    for (const auto& fn : checks_) {
      fn(r, s);
    }
  }

  toml::table write(const S& s) const {
    toml::table t;
    for (const auto& f : fields_) {
      f.put(s, t);
    }
    return t;
  }

  // This section's reference table, then its nested tables'.
  void document(std::vector<DocTable>& out) const {
    const S defaults{};
    const toml::table printed = write(defaults);
    DocTable table{path_, {}};
    for (const auto& f : fields_) {
      if (f.children) {
        continue;
      }
      std::string def = f.default_text;
      if (def.empty()) {
        const toml::node* n = printed.get(f.key);
        def = n != nullptr ? "`" + doc_literal(*n) + "`" : "unset";
      }
      table.rows.push_back(DocRow{f.key, f.type, def, f.range, f.doc});
    }
    if (!table.rows.empty()) {
      out.push_back(std::move(table));
    }
    for (const auto& f : fields_) {
      if (f.children) {
        f.children(out);
      }
    }
  }

 private:
  std::string path_;
  std::vector<Field<S>> fields_;
  std::vector<std::function<void(TableReader&, S&)>> checks_;
};

namespace schema_detail {

template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, bool>) {
    return "boolean";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return "string";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "float";
  } else if constexpr (std::is_integral_v<T>) {
    return "integer";
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return "array of strings";
  } else {
    return "array of integers";
  }
}

template <class T>
std::string range_text(const Range<T>& r) {
  if (r.min == std::numeric_limits<T>::lowest() && r.max == std::numeric_limits<T>::max()) {
    return "";
  }
  return fmt::format("{} .. {}", r.min, r.max);
}

inline toml::array to_array(const std::vector<std::string>& v) {
  toml::array a;
  for (const auto& s : v) {
    a.push_back(s);
  }
  return a;
}

template <class T>
void put_value(toml::table& t, std::string_view key, const T& v) {
  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    t.insert(key, to_array(v));
  } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string> ||
                       std::is_floating_point_v<T>) {
    t.insert(key, v);
  } else if constexpr (std::is_integral_v<T>) {
    t.insert(key, static_cast<int64_t>(v));
  } else {
    toml::array a;
    for (auto x : v) {
      a.push_back(static_cast<int64_t>(x));
    }
    t.insert(key, std::move(a));
  }
}

inline std::string choices_text(std::span<const std::string_view> allowed) {
  std::string out;
  for (auto a : allowed) {
    out += out.empty() ? "" : ", ";
    out += fmt::format("`{}`", a);
  }
  return out;
}

}  // namespace schema_detail

template <class S>
Field<S>&& Field<S>::omit_empty() && {
  put = [inner = std::move(put), key = key](const S& s, toml::table& t) {
    toml::table tmp;
    inner(s, tmp);
    const toml::node* n = tmp.get(key);
    if (n == nullptr) {
      return;
    }
    const bool empty =
        (n->is_string() && n->as_string()->get().empty()) || (n->is_array() && n->as_array()->empty());
    if (!empty) {
      t.insert(key, *n);
    }
  };
  return std::move(*this);
}

// A plain typed key: bool, string, integer, float, array of strings, array of integers. A
// range, when given, bounds numbers (or each array element).
template <class S, class T, class R = std::monostate>
Field<S> value(T S::*member, std::string key, std::string doc, R range = {}) {
  Field<S> f;
  f.key = key;
  f.type = schema_detail::type_name<T>();
  if constexpr (!std::is_same_v<R, std::monostate>) {
    f.range = schema_detail::range_text(range);
  }
  f.doc = std::move(doc);
  f.get = [member, key, range](TableReader& r, S& s) {
    if constexpr (std::is_same_v<R, std::monostate>) {
      return r.get(key, s.*member);
    } else {
      return r.get(key, s.*member, range);
    }
  };
  f.put = [member, key](const S& s, toml::table& t) { schema_detail::put_value(t, key, s.*member); };
  return f;
}

// An optional integer key: absent -> nullopt, printed only when set.
template <class S, class T>
Field<S> optional(std::optional<T> S::*member, std::string key, std::string doc, Range<T> range) {
  Field<S> f;
  f.key = key;
  f.type = schema_detail::type_name<T>();
  f.range = schema_detail::range_text(range);
  f.doc = std::move(doc);
  f.get = [member, key, range](TableReader& r, S& s) { return r.get(key, s.*member, range); };
  f.put = [member, key](const S& s, toml::table& t) {
    if (s.*member) {
      schema_detail::put_value(t, key, *(s.*member));
    }
  };
  return f;
}

// A string that must be one of `allowed` (printed only when not empty).
template <class S>
Field<S> one_of(std::string S::*member, std::string key, std::span<const std::string_view> allowed,
                std::string doc) {
  Field<S> f;
  f.key = key;
  f.type = "string";
  f.range = schema_detail::choices_text(allowed);
  f.doc = std::move(doc);
  f.get = [member, key, allowed](TableReader& r, S& s) { return r.get_one_of(key, s.*member, allowed); };
  f.put = [member, key](const S& s, toml::table& t) {
    if (!(s.*member).empty()) {
      t.insert(key, s.*member);
    }
  };
  return f;
}

// Strings with a checked form. Printed only when not empty (an empty one would not read back).
enum class Form { host_port, url, host_port_list, url_list };

template <class S, class T>
Field<S> checked(T S::*member, std::string key, Form form, std::string doc) {
  Field<S> f;
  f.key = key;
  f.type = schema_detail::type_name<T>();
  f.range = form == Form::host_port || form == Form::host_port_list ? "`HOST:PORT`" : "`http(s)://` URL";
  f.doc = std::move(doc);
  f.get = [member, key, form](TableReader& r, S& s) {
    if constexpr (std::is_same_v<T, std::string>) {
      return form == Form::host_port ? r.get_host_port(key, s.*member) : r.get_url(key, s.*member);
    } else {
      return form == Form::host_port_list ? r.get_host_port_list(key, s.*member)
                                          : r.get_url_list(key, s.*member);
    }
  };
  f.put = [member, key, form](const S& s, toml::table& t) {
    if constexpr (std::is_same_v<T, std::string>) {
      if (!(s.*member).empty()) {
        t.insert(key, s.*member);
      }
    } else {
      // Lists always print (an empty list of seeds is a valid value).
      schema_detail::put_value(t, key, s.*member);
    }
  };
  return f;
}

// A key holding the NAME of an environment variable whose value is the secret. Printed as the
// variable's name, never its value.
template <class S>
Field<S> secret_env(Secret S::*member, std::string key, std::string doc) {
  Field<S> f;
  f.key = key;
  f.type = "string";
  f.range = "variable name";
  f.doc = std::move(doc);
  f.get = [member, key](TableReader& r, S& s) { return r.get_secret_env(key, s.*member); };
  f.put = [member, key](const S& s, toml::table& t) {
    if (!(s.*member).env_name().empty()) {
      t.insert(key, (s.*member).env_name());
    }
  };
  return f;
}

// A nested table read by its own section.
template <class S, class T>
Field<S> table(T S::*member, std::string key, std::shared_ptr<const Section<T>> section) {
  Field<S> f;
  f.key = key;
  f.get = [member, key, section](TableReader& r, S& s) {
    return r.table(key, [&](TableReader& t) { section->read(t, s.*member); });
  };
  f.put = [member, key, section](const S& s, toml::table& t) { t.insert(key, section->write(s.*member)); };
  f.children = [section](std::vector<DocTable>& out) { section->document(out); };
  return f;
}

// A key read and printed by hand (arrays of tables, maps keyed by name, keys with an older form).
template <class S>
Field<S> custom(std::string key, std::string type, std::string range, std::string doc,
                std::function<bool(TableReader&, S&)> get, std::function<void(const S&, toml::table&)> put) {
  Field<S> f;
  f.key = std::move(key);
  f.type = std::move(type);
  f.range = std::move(range);
  f.doc = std::move(doc);
  f.get = std::move(get);
  f.put = std::move(put);
  return f;
}

// Every reference table of cognitora.toml, in file order.
std::vector<DocTable> reference_tables();

// The Markdown of one reference table.
std::string render_markdown(const DocTable& table);

// docs/configuration.md with every generated block (between "<!-- BEGIN cgn-config-doc PATH -->"
// and "<!-- END cgn-config-doc -->") replaced by the table the declarations give; the prose around
// the blocks is kept. `drifted` names the blocks that changed, `missing` the tables that have no
// block, `stray` the blocks naming no declared table.
struct DocUpdate {
  std::string text;
  std::vector<std::string> drifted;
  std::vector<std::string> missing;
  std::vector<std::string> stray;
};
DocUpdate update_reference(std::string_view doc, const std::vector<DocTable>& tables);

}  // namespace cgn::config
