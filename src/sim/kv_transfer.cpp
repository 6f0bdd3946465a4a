#include "sim/kv_transfer.h"

#include <nlohmann/json.hpp>

#include "core/openai_error.h"

namespace cgn::sim {

namespace {

using nlohmann::json;

Error<KvParamsError> bad(std::string_view key, std::string_view want) {
  return make_error(KvParamsError::kBadField,
                    "kv_transfer_params." + std::string(key) + " must be " + std::string(want));
}

}  // namespace

Result<KvTransferParams, KvParamsError> parse_kv_transfer_params(std::string_view json_text) {
  if (json_text.size() > kMaxKvParamsBytes) {
    return make_error(KvParamsError::kTooLarge, "kv_transfer_params is larger than 1 MiB");
  }
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return make_error(KvParamsError::kNotJson, "kv_transfer_params is not valid JSON");
  }
  if (!j.is_object()) {
    return make_error(KvParamsError::kNotObject, "kv_transfer_params must be a JSON object");
  }
  KvTransferParams p;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "do_remote_decode" || k == "do_remote_prefill") {
      if (v.is_null()) {
        continue;
      }
      if (!v.is_boolean()) {
        return bad(k, "a boolean");
      }
      (k == "do_remote_decode" ? p.do_remote_decode : p.do_remote_prefill) = v.get<bool>();
    } else if (k == "remote_block_ids") {
      if (v.is_null()) {
        continue;
      }
      if (!v.is_array()) {
        return bad(k, "an array of integers");
      }
      if (v.size() > kMaxRemoteBlockIds) {
        return make_error(KvParamsError::kTooLarge,
                          "kv_transfer_params.remote_block_ids has too many entries");
      }
      std::vector<int64_t> ids;
      ids.reserve(v.size());
      for (const json& e : v) {
        if (!e.is_number_integer()) {
          return bad(k, "an array of integers");
        }
        ids.push_back(e.get<int64_t>());
      }
      p.remote_block_ids = std::move(ids);
    } else if (k == "remote_engine_id" || k == "remote_request_id" || k == "remote_host") {
      if (v.is_null()) {
        continue;
      }
      if (!v.is_string()) {
        return bad(k, "a string");
      }
      auto& slot = k == "remote_engine_id"    ? p.remote_engine_id
                   : k == "remote_request_id" ? p.remote_request_id
                                              : p.remote_host;
      slot = v.get<std::string>();
    } else if (k == "remote_port") {
      if (v.is_null()) {
        continue;
      }
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 65535) {
        return bad(k, "an integer port");
      }
      p.remote_port = static_cast<int>(v.get<int64_t>());
    } else if (k == "tp_size") {
      if (v.is_null()) {
        continue;
      }
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1024) {
        return bad(k, "a positive integer");
      }
      p.tp_size = static_cast<int>(v.get<int64_t>());
    }
  }
  return p;
}

std::string render_kv_transfer_params(const KvTransferParams& p) {
  std::string out;
  out.reserve(192 + (p.remote_block_ids ? p.remote_block_ids->size() * 6 : 0));
  out += "{\"do_remote_prefill\":";
  out += p.do_remote_prefill ? "true" : "false";
  out += ",\"do_remote_decode\":";
  out += p.do_remote_decode ? "true" : "false";
  out += ",\"remote_block_ids\":";
  if (p.remote_block_ids) {
    out += '[';
    for (size_t i = 0; i < p.remote_block_ids->size(); ++i) {
      if (i != 0) {
        out += ',';
      }
      out += std::to_string((*p.remote_block_ids)[i]);
    }
    out += ']';
  } else {
    out += "null";
  }
  auto str = [&out](const char* key, const std::optional<std::string>& v) {
    out += ",\"";
    out += key;
    out += "\":";
    if (v) {
      out += '"';
      append_json_escaped(out, *v);
      out += '"';
    } else {
      out += "null";
    }
  };
  str("remote_engine_id", p.remote_engine_id);
  str("remote_request_id", p.remote_request_id);
  str("remote_host", p.remote_host);
  out += ",\"remote_port\":";
  out += p.remote_port ? std::to_string(*p.remote_port) : "null";
  out += ",\"tp_size\":";
  out += std::to_string(p.tp_size);
  out += '}';
  return out;
}

}  // namespace cgn::sim
