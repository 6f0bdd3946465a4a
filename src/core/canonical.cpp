#include "core/canonical.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <utility>

namespace cgn {
namespace {

namespace dom = simdjson::dom;
using ParseError = Error<RequestError>;
using ParseStatus = Status<RequestError>;

ParseError fail(RequestError code, std::string message) {
  return make_error(code, std::move(message));
}

// Checked accessors: the caller has tested the type. They copy the value out
// of simdjson's result wrapper (binding a reference into the temporary
// wrapper, as `for (x : e.get_array().value_unsafe())` does, dangles).
dom::array as_array(dom::element e) {
  dom::array a;
  [[maybe_unused]] const simdjson::error_code err = e.get_array().get(a);
  assert(err == simdjson::SUCCESS);
  return a;
}
dom::object as_object(dom::element e) {
  dom::object o;
  [[maybe_unused]] const simdjson::error_code err = e.get_object().get(o);
  assert(err == simdjson::SUCCESS);
  return o;
}
std::string_view as_string(dom::element e) {
  std::string_view s;
  [[maybe_unused]] const simdjson::error_code err = e.get_string().get(s);
  assert(err == simdjson::SUCCESS);
  return s;
}

const char* type_name(dom::element e) {
  switch (e.type()) {
    case dom::element_type::ARRAY:
      return "an array";
    case dom::element_type::OBJECT:
      return "an object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
      return "an integer";
    case dom::element_type::DOUBLE:
      return "a number";
    case dom::element_type::STRING:
      return "a string";
    case dom::element_type::BOOL:
      return "a boolean";
    case dom::element_type::NULL_VALUE:
      return "null";
  }
  return "unknown";
}

ParseError wrong_type(const std::string& path, const char* expected, dom::element got) {
  return fail(RequestError::kWrongType,
              fmt::format("'{}' must be {}, got {}", path, expected, type_name(got)));
}

// One reusable parser per thread: simdjson's DOM parser is fastest when its
// buffers are reused. Elements returned by parse_json point into it and are
// valid until the next parse on the same thread.
dom::parser& thread_parser() {
  thread_local dom::parser parser;
  return parser;
}

// Buffers for bodies up to this size are kept between calls; a thread that
// parsed a larger body (up to max_body_bytes, ~8x that in parser buffers)
// gives the memory back when the call that needed it is done.
constexpr size_t kRetainedParserCapacity = size_t{1024} * 1024;

// Scope of one public parse call: every element is dead once it ends.
class ParserScope {
 public:
  ParserScope() = default;
  ParserScope(const ParserScope&) = delete;
  ParserScope& operator=(const ParserScope&) = delete;
  ~ParserScope() {
    dom::parser& parser = thread_parser();
    if (parser.capacity() > kRetainedParserCapacity) {
      parser = dom::parser{};
    }
  }
};

Result<dom::element, RequestError> parse_json(std::string_view body, const RequestLimits& limits,
                                              const char* what) {
  if (body.size() > limits.max_body_bytes) {
    return fail(RequestError::kTooLarge, fmt::format("{} is {} bytes, over the limit of {} bytes", what,
                                                     body.size(), limits.max_body_bytes));
  }
  if (body.empty()) {
    // Checked here: simdjson would memcpy from a possibly null pointer.
    return fail(RequestError::kMalformedJson, fmt::format("{} is empty", what));
  }
  dom::parser& parser = thread_parser();
  const size_t depth = std::max<size_t>(limits.max_json_depth, 1);
  if (parser.max_depth() != depth) {
    if (parser.allocate(std::max<size_t>(body.size(), 64), depth) != simdjson::SUCCESS) {
      return fail(RequestError::kTooLarge, fmt::format("{} could not be allocated for parsing", what));
    }
  }
  dom::element root;
  const simdjson::error_code code = parser.parse(body.data(), body.size()).get(root);
  switch (code) {
    case simdjson::SUCCESS:
      return root;
    case simdjson::DEPTH_ERROR:
      return fail(RequestError::kTooDeep,
                  fmt::format("{} nests arrays and objects deeper than {} levels", what, depth));
    case simdjson::CAPACITY:
    case simdjson::MEMALLOC:
      return fail(RequestError::kTooLarge, fmt::format("{} is too large to parse", what));
    case simdjson::UTF8_ERROR:
      return fail(RequestError::kMalformedJson, fmt::format("{} is not valid UTF-8", what));
    case simdjson::EMPTY:
      return fail(RequestError::kMalformedJson, fmt::format("{} is empty", what));
    default:
      return fail(RequestError::kMalformedJson,
                  fmt::format("{} is not valid JSON ({})", what, simdjson::error_message(code)));
  }
}

// ---------------------------------------------------------------------------
// Canonical JSON
// ---------------------------------------------------------------------------

void write_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t run = 0;  // start of the current run of bytes that need no escaping
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') {
      continue;
    }
    out.append(s.substr(run, i - run));
    run = i + 1;
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\b':
        out.append("\\b");
        break;
      case '\f':
        out.append("\\f");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        out.append("\\u00");
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xf]);
    }
  }
  out.append(s.substr(run));
  out.push_back('"');
}

void write_canonical(dom::element e, std::string& out) {
  switch (e.type()) {
    case dom::element_type::ARRAY: {
      out.push_back('[');
      bool first = true;
      for (dom::element child : as_array(e)) {
        if (!first) {
          out.push_back(',');
        }
        first = false;
        write_canonical(child, out);
      }
      out.push_back(']');
      return;
    }
    case dom::element_type::OBJECT: {
      std::vector<std::pair<std::string_view, dom::element>> fields;
      for (dom::key_value_pair kv : as_object(e)) {
        fields.emplace_back(kv.key, kv.value);
      }
      // Stable sort keeps duplicates in document order, so the last one of a
      // run of equal keys is the one that wins.
      std::stable_sort(fields.begin(), fields.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      out.push_back('{');
      bool first = true;
      for (size_t i = 0; i < fields.size(); ++i) {
        if (i + 1 < fields.size() && fields[i + 1].first == fields[i].first) {
          continue;
        }
        if (!first) {
          out.push_back(',');
        }
        first = false;
        write_json_string(out, fields[i].first);
        out.push_back(':');
        write_canonical(fields[i].second, out);
      }
      out.push_back('}');
      return;
    }
    case dom::element_type::INT64:
      fmt::format_to(std::back_inserter(out), "{}", e.get_int64().value_unsafe());
      return;
    case dom::element_type::UINT64:
      fmt::format_to(std::back_inserter(out), "{}", e.get_uint64().value_unsafe());
      return;
    case dom::element_type::DOUBLE: {
      const double d = e.get_double().value_unsafe();
      // An integral value within the exactly representable range prints as
      // the integer it equals, so 1.0, 1e0 and 1 agree (and -0 is 0).
      if (std::trunc(d) == d && std::fabs(d) < 9007199254740992.0) {
        fmt::format_to(std::back_inserter(out), "{}", static_cast<int64_t>(d));
        return;
      }
      char buf[64];
      auto res = std::to_chars(buf, buf + sizeof buf, d);
      // A large integral double may come out as 21+ digits with no '.' or
      // 'e', which JSON parsers read as an (overflowing) integer: use the
      // exponent form so the text reads back as the same double.
      if (std::string_view(buf, static_cast<size_t>(res.ptr - buf)).find_first_of(".e") ==
          std::string_view::npos) {
        res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
      }
      out.append(buf, res.ptr);
      return;
    }
    case dom::element_type::STRING:
      write_json_string(out, as_string(e));
      return;
    case dom::element_type::BOOL:
      out.append(e.get_bool().value_unsafe() ? "true" : "false");
      return;
    case dom::element_type::NULL_VALUE:
      out.append("null");
      return;
  }
}

// ---------------------------------------------------------------------------
// Chat canonical bytes. These three writers are the only code that lays out a
// chat message, shared by the request parser and append_assistant_message.
// ---------------------------------------------------------------------------

void begin_message(std::string& out, std::string_view role, std::string_view name,
                   std::string_view tool_call_id) {
  out.append(role);
  out.push_back(kUnitSep);
  if (!name.empty()) {
    out.append(name);
    out.push_back(kUnitSep);
  }
  if (!tool_call_id.empty()) {
    out.append(tool_call_id);
    out.push_back(kUnitSep);
  }
}

void append_tool_call(std::string& out, std::string_view name, std::string_view arguments) {
  out.push_back(kGroupSep);
  out.append(name);
  out.push_back(kUnitSep);
  out.append(arguments);
}

void end_message(std::string& out) {
  out.push_back(kRecordSep);
}

// A field seen while scanning an object; the last occurrence wins.
struct Field {
  dom::element value;
  bool present = false;
  void set(dom::element v) {
    value = v;
    present = true;
  }
  bool present_non_null() const { return present && !value.is_null(); }
};

// A field's JSON path, base[index]suffix (no [index] when index is kNone),
// formatted only when an error names it: the happy path never allocates one.
struct Path {
  static constexpr size_t kNone = static_cast<size_t>(-1);
  std::string_view base;
  size_t index = kNone;
  std::string_view suffix;

  std::string str() const {
    std::string out(base);
    if (index != kNone) {
      fmt::format_to(std::back_inserter(out), "[{}]", index);
    }
    out.append(suffix);
    return out;
  }
  Path with_suffix(std::string_view s) const { return Path{base, index, s}; }
};

// Optional string field: absent and null read as empty.
Result<std::string_view, RequestError> optional_string(const Field& f, const Path& path) {
  if (!f.present_non_null()) {
    return std::string_view{};
  }
  if (!f.value.is_string()) {
    return wrong_type(path.str(), "a string", f.value);
  }
  return as_string(f.value);
}

Result<bool, RequestError> optional_bool(const Field& f, const Path& path) {
  if (!f.present_non_null()) {
    return false;
  }
  if (!f.value.is_bool()) {
    return wrong_type(path.str(), "a boolean", f.value);
  }
  return f.value.get_bool().value_unsafe();
}

// Calls emit(name, arguments) for one tool call object ({"function":{...}}
// when `wrapped`, the legacy {"name","arguments"} function_call otherwise).
// Arguments are the model's JSON text, taken verbatim when a string; a client
// that sends them as a JSON value gets that value's canonical JSON.
template <class Emit>
ParseStatus visit_tool_call(dom::element call, const std::string& path, bool wrapped, std::string& scratch,
                            Emit&& emit) {
  if (!call.is_object()) {
    return wrong_type(path, "an object", call);
  }
  dom::element fn = call;
  std::string fn_path = path;
  if (wrapped) {
    Field function;
    for (dom::key_value_pair kv : as_object(call)) {
      if (kv.key == "function") {
        function.set(kv.value);
      }
    }
    fn_path = path + ".function";
    if (!function.present_non_null()) {
      return fail(RequestError::kMissingField, fmt::format("'{}' is required", fn_path));
    }
    if (!function.value.is_object()) {
      return wrong_type(fn_path, "an object", function.value);
    }
    fn = function.value;
  }
  Field name;
  Field arguments;
  for (dom::key_value_pair kv : as_object(fn)) {
    if (kv.key == "name") {
      name.set(kv.value);
    } else if (kv.key == "arguments") {
      arguments.set(kv.value);
    }
  }
  if (!name.present_non_null()) {
    return fail(RequestError::kMissingField, fmt::format("'{}.name' is required", fn_path));
  }
  if (!name.value.is_string()) {
    return wrong_type(fn_path + ".name", "a string", name.value);
  }
  std::string_view args;
  if (arguments.present_non_null()) {
    if (arguments.value.is_string()) {
      args = as_string(arguments.value);
    } else {
      scratch.clear();
      write_canonical(arguments.value, scratch);
      args = scratch;
    }
  }
  emit(as_string(name.value), args);
  return Ok{};
}

// Calls emit(name, arguments) for each tool call of a message, in index
// (array) order; the legacy function_call is used only without tool_calls.
template <class Emit>
ParseStatus visit_tool_calls(const Field& tool_calls, const Field& function_call, const Path& message,
                             const RequestLimits& limits, Emit&& emit) {
  std::string scratch;
  bool any = false;
  if (tool_calls.present_non_null()) {
    if (!tool_calls.value.is_array()) {
      return wrong_type(message.str() + ".tool_calls", "an array", tool_calls.value);
    }
    size_t j = 0;
    for (dom::element call : as_array(tool_calls.value)) {
      if (j >= limits.max_tool_calls) {
        return fail(RequestError::kTooManyItems, fmt::format("'{}.tool_calls' has more than {} entries",
                                                             message.str(), limits.max_tool_calls));
      }
      auto st =
          visit_tool_call(call, fmt::format("{}.tool_calls[{}]", message.str(), j), true, scratch, emit);
      if (!st) {
        return st;
      }
      ++j;
      any = true;
    }
  }
  if (!any && function_call.present_non_null()) {
    return visit_tool_call(function_call.value, message.str() + ".function_call", false, scratch, emit);
  }
  return Ok{};
}

bool is_text_part_type(std::string_view type) {
  return type == "text" || type == "input_text" || type == "output_text";
}

// Appends the text of `content` (string, array of parts, or null).
ParseStatus append_content_text(const Field& content, const Path& path, const RequestLimits& limits,
                                std::string& out) {
  if (!content.present_non_null()) {
    return Ok{};
  }
  if (content.value.is_string()) {
    out.append(as_string(content.value));
    return Ok{};
  }
  if (!content.value.is_array()) {
    return wrong_type(path.str(), "a string, an array of content parts or null", content.value);
  }
  size_t j = 0;
  for (dom::element part : as_array(content.value)) {
    if (j >= limits.max_content_parts) {
      return fail(RequestError::kTooManyItems,
                  fmt::format("'{}' has more than {} content parts", path.str(), limits.max_content_parts));
    }
    if (part.is_string()) {
      out.append(as_string(part));
    } else if (part.is_object()) {
      Field type;
      Field text;
      for (dom::key_value_pair kv : as_object(part)) {
        if (kv.key == "type") {
          type.set(kv.value);
        } else if (kv.key == "text") {
          text.set(kv.value);
        }
      }
      std::string_view type_str;
      if (type.present_non_null()) {
        if (!type.value.is_string()) {
          return wrong_type(fmt::format("{}[{}].type", path.str(), j), "a string", type.value);
        }
        type_str = as_string(type.value);
      }
      // A part without a type is text when it carries text (as the engines
      // accept it); image, audio, file, refusal and other parts are skipped.
      const bool is_text = type.present_non_null() ? is_text_part_type(type_str) : text.present_non_null();
      if (is_text) {
        if (!text.present_non_null()) {
          return fail(RequestError::kMissingField, fmt::format("'{}[{}].text' is required", path.str(), j));
        }
        if (!text.value.is_string()) {
          return wrong_type(fmt::format("{}[{}].text", path.str(), j), "a string", text.value);
        }
        out.append(as_string(text.value));
      }
    } else {
      return wrong_type(fmt::format("{}[{}]", path.str(), j), "an object", part);
    }
    ++j;
  }
  return Ok{};
}

ParseStatus append_chat_message(dom::element msg, size_t index, const RequestLimits& limits,
                                std::string& out) {
  const Path path{"messages", index, ""};
  if (!msg.is_object()) {
    return wrong_type(path.str(), "an object", msg);
  }
  Field role;
  Field content;
  Field name;
  Field tool_call_id;
  Field tool_calls;
  Field function_call;
  for (dom::key_value_pair kv : as_object(msg)) {
    const std::string_view k = kv.key;
    if (k == "role") {
      role.set(kv.value);
    } else if (k == "content") {
      content.set(kv.value);
    } else if (k == "name") {
      name.set(kv.value);
    } else if (k == "tool_call_id") {
      tool_call_id.set(kv.value);
    } else if (k == "tool_calls") {
      tool_calls.set(kv.value);
    } else if (k == "function_call") {
      function_call.set(kv.value);
    }
  }
  if (!role.present_non_null()) {
    return fail(RequestError::kMissingField, fmt::format("'{}.role' is required", path.str()));
  }
  if (!role.value.is_string()) {
    return wrong_type(path.str() + ".role", "a string", role.value);
  }
  auto name_sv = optional_string(name, path.with_suffix(".name"));
  if (!name_sv) {
    return name_sv.error();
  }
  auto id_sv = optional_string(tool_call_id, path.with_suffix(".tool_call_id"));
  if (!id_sv) {
    return id_sv.error();
  }
  begin_message(out, as_string(role.value), *name_sv, *id_sv);
  auto st = append_content_text(content, path.with_suffix(".content"), limits, out);
  if (!st) {
    return st;
  }
  st = visit_tool_calls(tool_calls, function_call, path, limits,
                        [&out](std::string_view n, std::string_view a) { append_tool_call(out, n, a); });
  if (!st) {
    return st;
  }
  end_message(out);
  return Ok{};
}

void append_u32_le(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) {
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
}

// Validates a token-id array; appends it as u32 LE when `out` is given.
ParseStatus read_tokens(dom::element arr, const std::string& path, const RequestLimits& limits,
                        std::string* out) {
  size_t j = 0;
  for (dom::element t : as_array(arr)) {
    if (j >= limits.max_prompt_tokens) {
      return fail(RequestError::kTooManyItems,
                  fmt::format("'{}' has more than {} token ids", path, limits.max_prompt_tokens));
    }
    uint64_t id = 0;
    if (t.type() == dom::element_type::INT64) {
      const int64_t v = t.get_int64().value_unsafe();
      if (v < 0) {
        return fail(RequestError::kInvalidValue,
                    fmt::format("'{}[{}]' must be a token id in [0, 4294967295], got {}", path, j, v));
      }
      id = static_cast<uint64_t>(v);
    } else if (t.type() == dom::element_type::UINT64) {
      id = t.get_uint64().value_unsafe();
    } else {
      return wrong_type(fmt::format("{}[{}]", path, j), "a token id (integer)", t);
    }
    if (id > 0xffffffffULL) {
      return fail(RequestError::kInvalidValue,
                  fmt::format("'{}[{}]' must be a token id in [0, 4294967295], got {}", path, j, id));
    }
    if (out != nullptr) {
      append_u32_le(*out, static_cast<uint32_t>(id));
    }
    ++j;
  }
  return Ok{};
}

// A completions `prompt` or embeddings `input`: a string, an array of
// strings, an array of token ids, or an array of token-id arrays. The
// canonical prompt is the first prompt of a batch; each prompt of a batch is
// a sequence of its own, and the first is the one routing keys on.
ParseStatus read_prompt(const Field& prompt, const char* field, const RequestLimits& limits,
                        ParsedRequest& out) {
  const std::string path = field;
  if (!prompt.present_non_null()) {
    return fail(RequestError::kMissingField, fmt::format("'{}' is required", path));
  }
  const char* expected =
      "a string, an array of strings, an array of token ids or an array of token-id arrays";
  if (prompt.value.is_string()) {
    out.canonical_prompt.assign(as_string(prompt.value));
    out.prompt_count = 1;
    return Ok{};
  }
  if (!prompt.value.is_array()) {
    return wrong_type(path, expected, prompt.value);
  }
  const dom::array arr = as_array(prompt.value);
  auto it = arr.begin();
  if (it == arr.end()) {
    return fail(RequestError::kInvalidValue, fmt::format("'{}' must not be an empty array", path));
  }
  const dom::element first = *it;
  if (first.is_int64() || first.is_uint64()) {
    out.prompt_count = 1;
    out.prompt_is_tokens = true;
    return read_tokens(prompt.value, path, limits, &out.canonical_prompt);
  }
  if (!first.is_string() && !first.is_array()) {
    return wrong_type(path + "[0]", "a string, a token id or an array of token ids", first);
  }
  const bool strings = first.is_string();
  size_t j = 0;
  for (dom::element p : arr) {
    if (j >= limits.max_prompts) {
      return fail(RequestError::kTooManyItems,
                  fmt::format("'{}' has more than {} entries", path, limits.max_prompts));
    }
    const std::string item_path = fmt::format("{}[{}]", path, j);
    if (strings) {
      if (!p.is_string()) {
        return wrong_type(item_path, "a string like the first entry", p);
      }
      if (j == 0) {
        out.canonical_prompt.assign(as_string(p));
      }
    } else {
      if (!p.is_array()) {
        return wrong_type(item_path, "an array of token ids like the first entry", p);
      }
      auto st = read_tokens(p, item_path, limits, j == 0 ? &out.canonical_prompt : nullptr);
      if (!st) {
        return st;
      }
    }
    ++j;
  }
  out.prompt_count = j;
  out.prompt_is_tokens = !strings;
  return Ok{};
}

Result<std::optional<int64_t>, RequestError> optional_count(const Field& f, const char* path) {
  if (!f.present_non_null()) {
    return std::optional<int64_t>{};
  }
  if (f.value.is_int64()) {
    const int64_t v = f.value.get_int64().value_unsafe();
    if (v < 0) {
      return fail(RequestError::kInvalidValue,
                  fmt::format("'{}' must be a non-negative integer, got {}", path, v));
    }
    return std::optional<int64_t>{v};
  }
  if (f.value.is_uint64()) {
    return fail(RequestError::kInvalidValue, fmt::format("'{}' is out of range", path));
  }
  return wrong_type(path, "an integer", f.value);
}

}  // namespace

const char* endpoint_name(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kChat:
      return "chat";
    case Endpoint::kCompletions:
      return "completions";
    case Endpoint::kEmbeddings:
      return "embeddings";
  }
  return "unknown";
}

const char* request_error_name(RequestError error) {
  switch (error) {
    case RequestError::kTooLarge:
      return "too_large";
    case RequestError::kMalformedJson:
      return "malformed_json";
    case RequestError::kTooDeep:
      return "too_deep";
    case RequestError::kWrongType:
      return "wrong_type";
    case RequestError::kMissingField:
      return "missing_field";
    case RequestError::kEmptyMessages:
      return "empty_messages";
    case RequestError::kTooManyMessages:
      return "too_many_messages";
    case RequestError::kTooManyItems:
      return "too_many_items";
    case RequestError::kInvalidValue:
      return "invalid_value";
  }
  return "unknown";
}

namespace {

// The top-level fields parse_openai_request reads; every other key is ignored.
struct RequestFields {
  Field model;
  Field messages;
  Field prompt;
  Field stream;
  Field stream_options;
  Field max_tokens;
  Field max_completion_tokens;
  Field tools;
  Field user;
  Field prompt_cache_key;
  bool has_kv_transfer_params = false;
};

RequestFields collect_fields(dom::element root, Endpoint endpoint) {
  RequestFields f;
  for (dom::key_value_pair kv : as_object(root)) {
    const std::string_view k = kv.key;
    if (k == "model") {
      f.model.set(kv.value);
    } else if (k == "messages") {
      f.messages.set(kv.value);
    } else if (k == "prompt" || k == "input") {
      // `prompt` for completions, `input` for embeddings; the other is ignored.
      if ((k == "prompt") == (endpoint == Endpoint::kCompletions)) {
        f.prompt.set(kv.value);
      }
    } else if (k == "stream") {
      f.stream.set(kv.value);
    } else if (k == "stream_options") {
      f.stream_options.set(kv.value);
    } else if (k == "max_tokens") {
      f.max_tokens.set(kv.value);
    } else if (k == "max_completion_tokens") {
      f.max_completion_tokens.set(kv.value);
    } else if (k == "tools") {
      f.tools.set(kv.value);
    } else if (k == "user") {
      f.user.set(kv.value);
    } else if (k == "prompt_cache_key") {
      f.prompt_cache_key.set(kv.value);
    } else if (k == "kv_transfer_params") {
      f.has_kv_transfer_params = true;
    }
  }
  return f;
}

ParseStatus read_model(const Field& model, ParsedRequest& out) {
  if (!model.present_non_null()) {
    return fail(RequestError::kMissingField, "'model' is required");
  }
  if (!model.value.is_string()) {
    return wrong_type("model", "a string", model.value);
  }
  out.model.assign(as_string(model.value));
  if (out.model.empty()) {
    return fail(RequestError::kInvalidValue, "'model' must not be empty");
  }
  return Ok{};
}

ParseStatus read_stream_options(const Field& stream_options, ParsedRequest& out) {
  if (!stream_options.present_non_null()) {
    return Ok{};
  }
  if (!stream_options.value.is_object()) {
    return wrong_type("stream_options", "an object", stream_options.value);
  }
  Field include_usage;
  for (dom::key_value_pair kv : as_object(stream_options.value)) {
    if (kv.key == "include_usage") {
      include_usage.set(kv.value);
    }
  }
  auto iu = optional_bool(include_usage, Path{"stream_options.include_usage"});
  if (!iu) {
    return iu.error();
  }
  out.include_usage = *iu;
  return Ok{};
}

// stream, stream_options and max_tokens (chat: max_completion_tokens wins); not for embeddings.
ParseStatus read_generation_options(const RequestFields& f, Endpoint endpoint, ParsedRequest& out) {
  auto s = optional_bool(f.stream, Path{"stream"});
  if (!s) {
    return s.error();
  }
  out.stream = *s;
  auto so = read_stream_options(f.stream_options, out);
  if (!so) {
    return so;
  }
  auto mt = optional_count(f.max_tokens, "max_tokens");
  if (!mt) {
    return mt.error();
  }
  out.max_tokens = *mt;
  if (endpoint == Endpoint::kChat) {
    auto mct = optional_count(f.max_completion_tokens, "max_completion_tokens");
    if (!mct) {
      return mct.error();
    }
    if (mct->has_value()) {
      out.max_tokens = *mct;
    }
  }
  return Ok{};
}

// prompt_cache_key, else user.
ParseStatus read_session_key(const RequestFields& f, ParsedRequest& out) {
  auto session = optional_string(f.prompt_cache_key, Path{"prompt_cache_key"});
  if (!session) {
    return session.error();
  }
  auto user_sv = optional_string(f.user, Path{"user"});
  if (!user_sv) {
    return user_sv.error();
  }
  out.session_key.assign(session->empty() ? *user_sv : *session);
  return Ok{};
}

ParseStatus read_tools(const Field& tools, const RequestLimits& limits, ParsedRequest& out) {
  if (!tools.present_non_null()) {
    return Ok{};
  }
  if (!tools.value.is_array()) {
    return wrong_type("tools", "an array", tools.value);
  }
  size_t n = 0;
  for ([[maybe_unused]] dom::element t : as_array(tools.value)) {
    if (++n > limits.max_tools) {
      return fail(RequestError::kTooManyItems,
                  fmt::format("'tools' has more than {} entries", limits.max_tools));
    }
  }
  // An empty array is no tools, as chat templates treat it.
  if (n > 0) {
    out.has_tools = true;
    write_canonical(tools.value, out.canonical_tools);
  }
  return Ok{};
}

ParseStatus read_messages(const Field& messages, size_t body_size, const RequestLimits& limits,
                          ParsedRequest& out) {
  if (!messages.present_non_null()) {
    return fail(RequestError::kMissingField, "'messages' is required");
  }
  if (!messages.value.is_array()) {
    return wrong_type("messages", "a non-empty array", messages.value);
  }
  out.canonical_prompt.reserve(body_size);
  size_t i = 0;
  for (dom::element msg : as_array(messages.value)) {
    if (i >= limits.max_messages) {
      return fail(RequestError::kTooManyMessages,
                  fmt::format("'messages' has more than {} messages", limits.max_messages));
    }
    auto st = append_chat_message(msg, i, limits, out.canonical_prompt);
    if (!st) {
      return st;
    }
    ++i;
  }
  if (i == 0) {
    return fail(RequestError::kEmptyMessages, "'messages' must be a non-empty array");
  }
  out.message_count = i;
  return Ok{};
}

}  // namespace

Result<ParsedRequest, RequestError> parse_openai_request(Endpoint endpoint, std::string_view body,
                                                         const RequestLimits& limits) {
  const ParserScope scope;
  auto root = parse_json(body, limits, "request body");
  if (!root) {
    return root.error();
  }
  if (!root->is_object()) {
    return fail(RequestError::kWrongType,
                fmt::format("request body must be a JSON object, got {}", type_name(*root)));
  }
  const RequestFields f = collect_fields(*root, endpoint);
  ParsedRequest out;
  out.endpoint = endpoint;
  out.has_kv_transfer_params = f.has_kv_transfer_params;
  if (auto st = read_model(f.model, out); !st) {
    return st.error();
  }
  if (endpoint != Endpoint::kEmbeddings) {
    auto st = read_generation_options(f, endpoint, out);
    if (!st) {
      return st.error();
    }
  }
  if (auto st = read_session_key(f, out); !st) {
    return st.error();
  }
  if (endpoint != Endpoint::kChat) {
    auto st = read_prompt(f.prompt, endpoint == Endpoint::kCompletions ? "prompt" : "input", limits, out);
    if (!st) {
      return st.error();
    }
    return out;
  }
  if (auto st = read_tools(f.tools, limits, out); !st) {
    return st.error();
  }
  if (auto st = read_messages(f.messages, body.size(), limits, out); !st) {
    return st.error();
  }
  return out;
}

ApiError to_api_error(const Error<RequestError>& error) {
  if (error.code == RequestError::kTooLarge) {
    return payload_too_large(error.message);
  }
  std::string param;
  if (!error.message.empty() && error.message[0] == '\'') {
    const size_t end = error.message.find('\'', 1);
    if (end != std::string::npos) {
      param = error.message.substr(1, end - 1);
    }
  }
  return bad_request(error.message, param);
}

DigestSeedFields digest_seed_fields(const ParsedRequest& request) {
  DigestSeedFields f;
  f.model = request.model;
  f.canonical_tools = request.canonical_tools;
  return f;
}

void append_assistant_message(std::string& canonical, std::string_view content,
                              const std::vector<ToolCall>& tool_calls) {
  begin_message(canonical, "assistant", {}, {});
  canonical.append(content);
  for (const ToolCall& call : tool_calls) {
    append_tool_call(canonical, call.name, call.arguments);
  }
  end_message(canonical);
}

Result<AssistantReply, RequestError> parse_chat_completion_reply(std::string_view response_body,
                                                                 const RequestLimits& limits) {
  const ParserScope scope;
  auto root = parse_json(response_body, limits, "response body");
  if (!root) {
    return root.error();
  }
  if (!root->is_object()) {
    return fail(RequestError::kWrongType,
                fmt::format("response body must be a JSON object, got {}", type_name(*root)));
  }
  Field choices;
  for (dom::key_value_pair kv : as_object(*root)) {
    if (kv.key == "choices") {
      choices.set(kv.value);
    }
  }
  if (!choices.present_non_null() || !choices.value.is_array()) {
    return fail(RequestError::kMissingField, "'choices' must be a non-empty array");
  }
  const dom::array arr = as_array(choices.value);
  if (arr.begin() == arr.end()) {
    return fail(RequestError::kMissingField, "'choices' must be a non-empty array");
  }
  const dom::element choice = *arr.begin();
  if (!choice.is_object()) {
    return wrong_type("choices[0]", "an object", choice);
  }
  Field message;
  for (dom::key_value_pair kv : as_object(choice)) {
    if (kv.key == "message") {
      message.set(kv.value);
    }
  }
  if (!message.present_non_null()) {
    return fail(RequestError::kMissingField, "'choices[0].message' is required");
  }
  if (!message.value.is_object()) {
    return wrong_type("choices[0].message", "an object", message.value);
  }
  Field content;
  Field tool_calls;
  Field function_call;
  for (dom::key_value_pair kv : as_object(message.value)) {
    if (kv.key == "content") {
      content.set(kv.value);
    } else if (kv.key == "tool_calls") {
      tool_calls.set(kv.value);
    } else if (kv.key == "function_call") {
      function_call.set(kv.value);
    }
  }
  AssistantReply reply;
  auto st = append_content_text(content, Path{"choices[0].message.content"}, limits, reply.content);
  if (!st) {
    return st.error();
  }
  st = visit_tool_calls(tool_calls, function_call, Path{"choices[0].message"}, limits,
                        [&reply](std::string_view n, std::string_view a) {
                          reply.tool_calls.push_back(ToolCall{std::string(n), std::string(a)});
                        });
  if (!st) {
    return st.error();
  }
  return reply;
}

Result<std::string, RequestError> canonical_json(std::string_view json, const RequestLimits& limits) {
  const ParserScope scope;
  auto root = parse_json(json, limits, "JSON text");
  if (!root) {
    return root.error();
  }
  std::string out;
  out.reserve(json.size());
  write_canonical(*root, out);
  return out;
}

}  // namespace cgn
