#include "sim/json_schema_gen.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "core/openai_error.h"

namespace cgn::sim {

namespace {

using nlohmann::json;
using Err = Error<SchemaError>;

constexpr std::array<std::string_view, 19> kKeywords = {"type",
                                                        "enum",
                                                        "const",
                                                        "properties",
                                                        "required",
                                                        "additionalProperties",
                                                        "items",
                                                        "prefixItems",
                                                        "minItems",
                                                        "maxItems",
                                                        "minLength",
                                                        "maxLength",
                                                        "minimum",
                                                        "maximum",
                                                        "exclusiveMinimum",
                                                        "exclusiveMaximum",
                                                        "anyOf",
                                                        "oneOf",
                                                        "allOf"};
constexpr std::array<std::string_view, 4> kRefKeywords = {"$ref", "$defs", "definitions", "format"};
constexpr std::array<std::string_view, 12> kAnnotations = {
    "title",    "description", "default",  "examples",  "$schema",  "$id",
    "$comment", "deprecated",  "readOnly", "writeOnly", "nullable", "strict"};
constexpr std::array<std::string_view, 6> kFormats = {"date-time", "date", "time", "email", "uuid", "uri"};

template <size_t N>
bool in(const std::array<std::string_view, N>& set, std::string_view k) {
  return std::find(set.begin(), set.end(), k) != set.end();
}

Err invalid(std::string msg) {
  return make_error(SchemaError::kInvalid, std::move(msg));
}

// "'<key>' <what>", built by appending (GCC 12 warns falsely on chained operator+).
Err invalid_key(std::string_view key, std::string_view what) {
  std::string msg;
  msg.reserve(key.size() + what.size() + 3);
  msg.push_back('\'');
  msg.append(key);
  msg.append("' ");
  msg.append(what);
  return invalid(std::move(msg));
}

struct Checker {
  std::vector<std::string> unimplemented;
  size_t nodes = 0;

  Status<SchemaError> node(const json& s, int depth) {
    if (s.is_boolean()) {
      return Ok{};
    }
    if (!s.is_object()) {
      return invalid("a JSON schema must be an object or a boolean");
    }
    if (depth > kMaxSchemaDepth || ++nodes > kMaxSchemaNodes) {
      return make_error(SchemaError::kTooLarge,
                        "the JSON schema nests deeper than 32 or has over 4096 parts");
    }
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (in(kAnnotations, k)) {
        continue;
      }
      if (!in(kKeywords, k) && !in(kRefKeywords, k)) {
        if (std::find(unimplemented.begin(), unimplemented.end(), k) == unimplemented.end()) {
          unimplemented.push_back(k);
        }
        continue;
      }
      if (auto r = keyword(k, *it, depth); !r) {
        return r;
      }
    }
    return Ok{};
  }

  Status<SchemaError> schema_map(const json& m, int depth, std::string_view key) {
    if (!m.is_object()) {
      return invalid_key(key, "must be an object");
    }
    for (const json& sub : m) {
      if (auto r = node(sub, depth + 1); !r) {
        return r;
      }
    }
    return Ok{};
  }

  Status<SchemaError> schema_list(const json& l, int depth, std::string_view key) {
    if (!l.is_array() || l.empty()) {
      return invalid_key(key, "must be a non-empty array");
    }
    for (const json& sub : l) {
      if (auto r = node(sub, depth + 1); !r) {
        return r;
      }
    }
    return Ok{};
  }

  Status<SchemaError> keyword(const std::string& k, const json& v, int depth) {
    if (k == "properties" || k == "$defs" || k == "definitions") {
      return schema_map(v, depth, k);
    }
    if (k == "anyOf" || k == "oneOf" || k == "allOf" || k == "prefixItems") {
      return schema_list(v, depth, k);
    }
    if (k == "items" || k == "additionalProperties") {
      return node(v, depth + 1);
    }
    if (k == "enum" && (!v.is_array() || v.empty())) {
      return invalid("'enum' must be a non-empty array");
    }
    if (k == "required" && !v.is_array()) {
      return invalid("'required' must be an array");
    }
    if (k == "$ref" && !v.is_string()) {
      return invalid("'$ref' must be a string");
    }
    if (k == "format" && (!v.is_string() || !in(kFormats, v.get<std::string>()))) {
      if (std::find(unimplemented.begin(), unimplemented.end(), "format") == unimplemented.end()) {
        unimplemented.emplace_back("format");
      }
    }
    if ((k == "minItems" || k == "maxItems" || k == "minLength" || k == "maxLength") &&
        (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 4096)) {
      return invalid_key(k, "must be an integer in 0..4096");
    }
    if ((k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") &&
        !v.is_number()) {
      return invalid_key(k, "must be a number");
    }
    if (k == "type" && !v.is_string() && !(v.is_array() && !v.empty())) {
      return invalid("'type' must be a type name or a non-empty list of them");
    }
    return Ok{};
  }
};

// Python json.dumps(obj) with default separators.
void dump_python(std::string& out, const json& v) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      out += first ? "\"" : ", \"";
      first = false;
      append_json_escaped(out, it.key());
      out += "\": ";
      dump_python(out, *it);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i != 0) {
        out += ", ";
      }
      dump_python(out, v[i]);
    }
    out += ']';
  } else if (v.is_string()) {
    out += '"';
    append_json_escaped(out, v.get_ref<const std::string&>());
    out += '"';
  } else {
    out += v.dump();
  }
}

struct Generator {
  const json& root;
  int depth = 0;  // value() nesting, bounded: a recursive $ref stops here

  struct Nest {
    int& d;
    explicit Nest(int& depth) : d(++depth) {}
    ~Nest() { --d; }
  };

  Result<const json*, SchemaError> resolve(const json& s) {
    auto ref = s.find("$ref");
    if (ref == s.end()) {
      return &s;
    }
    const std::string& r = ref->get_ref<const std::string&>();
    for (std::string_view prefix : {"#/$defs/", "#/definitions/"}) {
      if (r.starts_with(prefix)) {
        auto defs = root.find(std::string(prefix.substr(2, prefix.size() - 3)));
        if (defs != root.end() && defs->is_object()) {
          if (auto d = defs->find(r.substr(prefix.size())); d != defs->end()) {
            return &*d;
          }
        }
      }
    }
    if (r == "#") {
      return &root;
    }
    return invalid_key("$ref", "does not name a schema in #/$defs or #/definitions");
  }

  static std::string type_of(const json& s) {
    auto t = s.find("type");
    if (t == s.end()) {
      if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
        return "object";
      }
      return s.contains("items") || s.contains("prefixItems") ? "array" : "";
    }
    if (t->is_string()) {
      return t->get<std::string>();
    }
    for (const json& n : *t) {
      if (n.is_string() && n != "null") {
        return n.get<std::string>();
      }
    }
    return "null";
  }

  static double number_in(const json& s, bool integer) {
    double lo = -INFINITY;
    double hi = INFINITY;
    if (auto m = s.find("minimum"); m != s.end())
      lo = m->get<double>();
    if (auto m = s.find("exclusiveMinimum"); m != s.end())
      lo = std::max(lo, m->get<double>() + (integer ? 1 : 0.5));
    if (auto m = s.find("maximum"); m != s.end())
      hi = m->get<double>();
    if (auto m = s.find("exclusiveMaximum"); m != s.end())
      hi = std::min(hi, m->get<double>() - (integer ? 1 : 0.5));
    double v = std::isfinite(lo) ? lo : std::min(1.0, hi);
    return integer ? std::ceil(v) : v;
  }

  static std::string string_for(const json& s) {
    if (auto f = s.find("format"); f != s.end()) {
      static const std::array<std::string_view, 6> kValues = {"2024-01-01T00:00:00Z",
                                                              "2024-01-01",
                                                              "00:00:00Z",
                                                              "sim@example.com",
                                                              "00000000-0000-4000-8000-000000000000",
                                                              "https://example.com/"};
      const auto i = std::find(kFormats.begin(), kFormats.end(), f->get<std::string>()) - kFormats.begin();
      return std::string(kValues[static_cast<size_t>(i)]);
    }
    const size_t min_len = s.value("minLength", 0);
    const size_t max_len = s.value("maxLength", 4096);
    std::string v = "sim";
    if (v.size() < min_len) {
      v.append(min_len - v.size(), 'x');
    }
    v.resize(std::min(v.size(), max_len));
    return v;
  }

  Result<json, SchemaError> object_for(const json& s) {
    json out = json::object();
    if (auto p = s.find("properties"); p != s.end()) {
      for (auto it = p->begin(); it != p->end(); ++it) {
        auto v = value(*it);
        if (!v) {
          return v.error();
        }
        out[it.key()] = std::move(*v);
      }
    }
    if (auto req = s.find("required"); req != s.end()) {
      for (const json& name : *req) {
        if (name.is_string() && !out.contains(name.get<std::string>())) {
          auto ap = s.find("additionalProperties");
          auto v = ap != s.end() && ap->is_object() ? value(*ap) : Result<json, SchemaError>(json("sim"));
          if (!v) {
            return v.error();
          }
          out[name.get<std::string>()] = std::move(*v);
        }
      }
    }
    return out;
  }

  Result<json, SchemaError> array_for(const json& s) {
    json out = json::array();
    const size_t max_items = s.value("maxItems", size_t{4096});
    size_t n = std::min<size_t>(std::max<size_t>(s.value("minItems", size_t{1}), 1), max_items);
    if (auto pre = s.find("prefixItems"); pre != s.end()) {
      for (const json& sub : *pre) {
        if (out.size() >= max_items) {
          break;
        }
        auto v = value(sub);
        if (!v) {
          return v.error();
        }
        out.push_back(std::move(*v));
      }
    }
    auto items = s.find("items");
    while (out.size() < n && items != s.end()) {
      auto v = value(*items);
      if (!v) {
        return v.error();
      }
      out.push_back(std::move(*v));
    }
    while (items == s.end() && out.size() < n) {
      out.push_back("sim");
    }
    return out;
  }

  Result<json, SchemaError> merged_all_of(const json& s) {
    json merged = s;
    merged.erase("allOf");
    for (const json& sub : s["allOf"]) {
      auto r = resolve(sub);
      if (!r) {
        return r.error();
      }
      if (!(*r)->is_object()) {
        continue;
      }
      for (auto it = (*r)->begin(); it != (*r)->end(); ++it) {
        if (it.key() == "properties") {
          merged["properties"].update(*it);
        } else if (it.key() == "required") {
          for (const json& n : *it)
            merged["required"].push_back(n);
        } else if (!merged.contains(it.key())) {
          merged[it.key()] = *it;
        }
      }
    }
    return merged;
  }

  Result<json, SchemaError> value(const json& schema) {
    Nest nest(depth);
    if (depth > 2 * kMaxSchemaDepth) {
      return make_error(SchemaError::kTooLarge, "the JSON schema (with its $refs) nests deeper than 64");
    }
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) {
        return invalid("the JSON schema 'false' admits no value");
      }
      return json("sim");
    }
    auto resolved = resolve(schema);
    if (!resolved) {
      return resolved.error();
    }
    const json& s = **resolved;
    if (auto c = s.find("const"); c != s.end())
      return *c;
    if (auto e = s.find("enum"); e != s.end())
      return (*e)[0];
    for (const char* k : {"anyOf", "oneOf"}) {
      if (auto a = s.find(k); a != s.end())
        return value((*a)[0]);
    }
    if (s.contains("allOf")) {
      auto m = merged_all_of(s);
      if (!m) {
        return m.error();
      }
      return value(*m);
    }
    const std::string t = type_of(s);
    if (t == "object")
      return object_for(s);
    if (t == "array")
      return array_for(s);
    if (t == "string")
      return json(string_for(s));
    if (t == "integer")
      return json(static_cast<int64_t>(std::clamp(number_in(s, true), -9e15, 9e15)));
    if (t == "number")
      return json(number_in(s, false));
    if (t == "boolean")
      return json(true);
    if (t == "null")
      return json(nullptr);
    if (t.empty())
      return json("sim");
    return invalid_key(t, "is not a JSON schema type");
  }
};

}  // namespace

Status<SchemaError> check_schema(const json& schema) {
  Checker c;
  if (auto r = c.node(schema, 0); !r) {
    return r;
  }
  if (!c.unimplemented.empty()) {
    std::string msg = "Grammar error: Unimplemented keys: [";
    for (size_t i = 0; i < c.unimplemented.size(); ++i) {
      msg += i == 0 ? "\"" : ", \"";
      append_json_escaped(msg, c.unimplemented[i]);
      msg += '"';
    }
    msg += ']';
    return make_error(SchemaError::kUnsupported, std::move(msg));
  }
  return Ok{};
}

Result<std::string, SchemaError> generate_json(const json& schema) {
  if (auto r = check_schema(schema); !r) {
    return r.error();
  }
  Generator g{schema};
  auto v = g.value(schema);
  if (!v) {
    return v.error();
  }
  std::string out;
  dump_python(out, *v);
  return out;
}

}  // namespace cgn::sim
