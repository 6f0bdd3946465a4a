#include "sim/tool_calls.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "sim/json_schema_gen.h"
#include "sim/logprobs.h"

namespace cgn::sim {

namespace {

using nlohmann::json;
using Err = Error<ToolError>;

Err bad(std::string msg) {
  return make_error(ToolError::kBadField, std::move(msg));
}

Result<std::string, ToolError> generated(const json& schema, std::string_view field) {
  auto g = generate_json(schema);
  if (!g) {
    if (g.error().code == SchemaError::kUnsupported) {
      return make_error(ToolError::kUnsupportedSchema, g.error().message);
    }
    std::string msg = "'";
    msg.append(field).append("': ").append(g.error().message);
    return bad(std::move(msg));
  }
  return std::move(*g);
}

Result<std::vector<ToolDef>, ToolError> parse_tools(const json& tools) {
  if (!tools.is_array()) {
    return bad("'tools' must be an array");
  }
  if (tools.size() > kMaxTools) {
    return bad("'tools' has more than 128 entries");
  }
  std::vector<ToolDef> out;
  for (const json& t : tools) {
    auto fn = t.is_object() ? t.find("function") : t.end();
    if (!t.is_object() || t.value("type", "") != "function" || fn == t.end() || !fn->is_object()) {
      return bad("'tools[]' must be {\"type\":\"function\",\"function\":{...}}");
    }
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return bad("'tools[].function.name' must be a non-empty string");
    }
    ToolDef d;
    d.name = name->get<std::string>();
    auto params = fn->find("parameters");
    if (params == fn->end() || params->is_null() || (params->is_object() && params->empty())) {
      d.arguments = "{}";
    } else {
      auto args = generated(*params, "tools[].function.parameters");
      if (!args) {
        return args.error();
      }
      d.arguments = std::move(*args);
    }
    out.push_back(std::move(d));
  }
  return out;
}

Status<ToolError> parse_tool_choice(const json& c, StructuredRequest& s) {
  if (c.is_string()) {
    const std::string& v = c.get_ref<const std::string&>();
    if (v == "none") {
      s.choice = ToolChoice::kNone;
    } else if (v == "auto") {
      s.choice = ToolChoice::kAuto;
    } else if (v == "required") {
      s.choice = ToolChoice::kRequired;
    } else {
      return bad("'tool_choice' must be \"none\", \"auto\", \"required\" or a named function");
    }
  } else if (c.is_object() && c.value("type", "") == "function" && c.contains("function") &&
             c["function"].is_object() && c["function"].contains("name") &&
             c["function"]["name"].is_string()) {
    s.choice = ToolChoice::kNamed;
    s.named = c["function"]["name"].get<std::string>();
  } else {
    return bad("'tool_choice' must be \"none\", \"auto\", \"required\" or a named function");
  }
  if (s.choice != ToolChoice::kNone && s.tools.empty()) {
    return bad("When using `tool_choice`, `tools` must be set.");
  }
  if (s.choice == ToolChoice::kNamed) {
    bool found = false;
    for (const ToolDef& t : s.tools) {
      found = found || t.name == s.named;
    }
    if (!found) {
      std::string msg = "Tool '";
      msg.append(s.named.substr(0, 256)).append("' has not been passed in `tools`.");
      return bad(std::move(msg));
    }
  }
  return Ok{};
}

Result<std::optional<std::string>, ToolError> parse_response_format(const json& rf) {
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
    return bad("'response_format' must be an object with a 'type'");
  }
  const std::string& type = rf["type"].get_ref<const std::string&>();
  if (type == "text") {
    return std::optional<std::string>();
  }
  if (type == "json_object") {
    return std::optional<std::string>(R"({"answer": "sim"})");
  }
  if (type != "json_schema") {
    return bad("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
  }
  auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object()) {
    return bad("'response_format.json_schema' must be an object");
  }
  auto schema = js->find("schema");
  if (schema == js->end()) {
    return std::optional<std::string>(R"({"answer": "sim"})");  // no schema: any JSON object
  }
  auto g = generated(*schema, "response_format.json_schema.schema");
  if (!g) {
    return g.error();
  }
  return std::optional<std::string>(std::move(*g));
}

}  // namespace

Result<StructuredRequest, ToolError> parse_structured_request(const json& body) {
  StructuredRequest s;
  if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
    auto tools = parse_tools(*t);
    if (!tools) {
      return tools.error();
    }
    s.tools = std::move(*tools);
  }
  s.choice = s.tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
    if (auto r = parse_tool_choice(*c, s); !r) {
      return r.error();
    }
  }
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean()) {
      return bad("'parallel_tool_calls' must be a boolean");
    }
    s.parallel = p->get<bool>();
  }
  if (auto rf = body.find("response_format"); rf != body.end() && !rf->is_null()) {
    auto j = parse_response_format(*rf);
    if (!j) {
      return j.error();
    }
    s.json_reply = std::move(*j);
  }
  return s;
}

std::vector<ToolCall> plan_tool_calls(const StructuredRequest& s, const std::vector<ChatMessage>& messages,
                                      std::string_view request_id) {
  std::vector<const ToolDef*> picked;
  if (s.choice == ToolChoice::kNamed) {
    for (const ToolDef& t : s.tools) {
      if (t.name == s.named) {
        picked.push_back(&t);
        break;
      }
    }
  } else if (s.choice == ToolChoice::kRequired ||
             (s.choice == ToolChoice::kAuto && !messages.empty() && messages.back().role == "user")) {
    std::string_view last_user;
    for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
      if (it->role == "user") {
        last_user = it->content;
        break;
      }
    }
    for (const ToolDef& t : s.tools) {
      if (last_user.find(t.name) != std::string::npos) {
        picked.push_back(&t);
      }
    }
    if (picked.empty() && !s.tools.empty()) {
      picked.push_back(&s.tools.front());
    }
  }
  if (!s.parallel && picked.size() > 1) {
    picked.erase(picked.begin() + 1, picked.end());
  }
  std::vector<ToolCall> calls;
  const uint64_t h = request_seed(request_id);
  for (size_t i = 0; i < picked.size(); ++i) {
    char id[40];
    std::snprintf(id, sizeof id, "chatcmpl-tool-%016llx", static_cast<unsigned long long>(mix64(h + i)));
    calls.push_back({id, picked[i]->name, picked[i]->arguments});
  }
  return calls;
}

std::string tool_calls_reply_text(const std::vector<ToolCall>& calls) {
  std::string out;
  for (const ToolCall& c : calls) {
    out += c.arguments;
    out += '\n';
  }
  return out;
}

}  // namespace cgn::sim
