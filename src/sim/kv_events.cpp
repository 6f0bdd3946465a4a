#include "sim/kv_events.h"

#include <msgpuck.h>

#include <nlohmann/json.hpp>

namespace cgn::sim {

namespace {

// Appends msgpack with msgpuck's encoders (Debian libmsgpuck-dev).
class Writer {
 public:
  std::string out;

  void array(uint32_t n) {
    put(mp_sizeof_array(n), [&](char* p) { return mp_encode_array(p, n); });
  }
  void map(uint32_t n) {
    put(mp_sizeof_map(n), [&](char* p) { return mp_encode_map(p, n); });
  }
  void uint(uint64_t v) {
    put(mp_sizeof_uint(v), [&](char* p) { return mp_encode_uint(p, v); });
  }
  void dbl(double v) {
    put(mp_sizeof_double(v), [&](char* p) { return mp_encode_double(p, v); });
  }
  void nil() {
    put(mp_sizeof_nil(), [&](char* p) { return mp_encode_nil(p); });
  }
  void str(std::string_view s) {
    const auto n = static_cast<uint32_t>(s.size());
    put(mp_sizeof_str(n), [&](char* p) { return mp_encode_str(p, s.data(), n); });
  }
  template <class T>
  void uints(std::span<const T> v) {
    array(static_cast<uint32_t>(v.size()));
    for (T x : v) {
      uint(static_cast<uint64_t>(x));
    }
  }

 private:
  template <class F>
  void put(uint32_t size, F&& enc) {
    const size_t at = out.size();
    out.resize(at + size);
    enc(out.data() + at);
  }
};

void encode_event(Writer& w, const KvCacheEvent& e, KvEventEncoding enc) {
  const bool as_map = enc == KvEventEncoding::kMap;
  switch (e.kind) {
    case KvCacheEvent::Kind::kStored:
      if (as_map) {
        w.map(8);
        w.str("type");
      } else {
        w.array(8);
      }
      w.str("BlockStored");
      if (as_map) {
        w.str("block_hashes");
      }
      w.uints(std::span<const BlockHash>(e.hashes));
      if (as_map) {
        w.str("parent_block_hash");
      }
      if (e.has_parent) {
        w.uint(e.parent);
      } else {
        w.nil();
      }
      if (as_map) {
        w.str("token_ids");
      }
      w.uints(std::span<const TokenId>(e.tokens));
      if (as_map) {
        w.str("block_size");
      }
      w.uint(e.block_size);
      if (as_map) {
        w.str("lora_id");
      }
      w.nil();
      if (as_map) {
        w.str("medium");
      }
      w.str("GPU");
      if (as_map) {
        w.str("lora_name");
      }
      w.nil();
      return;
    case KvCacheEvent::Kind::kRemoved:
      if (as_map) {
        w.map(3);
        w.str("type");
      } else {
        w.array(3);
      }
      w.str("BlockRemoved");
      if (as_map) {
        w.str("block_hashes");
      }
      w.uints(std::span<const BlockHash>(e.hashes));
      if (as_map) {
        w.str("medium");
      }
      w.str("GPU");
      return;
    case KvCacheEvent::Kind::kAllCleared:
      if (as_map) {
        w.map(1);
        w.str("type");
      } else {
        w.array(1);
      }
      w.str("AllBlocksCleared");
      return;
  }
}

}  // namespace

Result<KvEventsConfig, KvEventsConfigError> parse_kv_events_config(std::string_view json_text,
                                                                   bool enabled_by_default) {
  if (json_text.size() > 64 * 1024) {
    return make_error(KvEventsConfigError::kBadJson, "--kv-events-config: longer than 64 KiB");
  }
  auto j = nlohmann::json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(KvEventsConfigError::kBadJson, "--kv-events-config: expected a JSON object");
  }
  KvEventsConfig c;
  c.enabled = enabled_by_default;
  auto bad = [](const char* key, const char* want) {
    return make_error(KvEventsConfigError::kBadField,
                      std::string("--kv-events-config: '") + key + "' must be " + want);
  };
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) {
      continue;
    }
    if (key == "enable_kv_cache_events") {
      if (!v.is_boolean()) {
        return bad("enable_kv_cache_events", "a boolean");
      }
      c.enabled = v.get<bool>();
    } else if (key == "publisher" || key == "endpoint" || key == "topic" || key == "replay_endpoint") {
      if (!v.is_string()) {
        return bad(key.c_str(), "a string");
      }
      std::string s = v.get<std::string>();
      if (key == "publisher") {
        c.publisher = std::move(s);
      } else if (key == "endpoint") {
        c.endpoint = std::move(s);
      } else if (key == "topic") {
        c.topic = std::move(s);
      } else {
        c.replay_endpoint = std::move(s);
      }
    } else if (key == "buffer_steps" || key == "hwm") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 10'000'000) {
        return bad(key.c_str(), "an integer in 0..10000000");
      }
      if (key == "buffer_steps") {
        c.buffer_steps = static_cast<uint32_t>(v.get<int64_t>());
      } else {
        c.hwm = static_cast<int>(v.get<int64_t>());
      }
    }
  }
  if (c.publisher == "null") {
    c.enabled = false;
  } else if (c.publisher != "zmq") {
    return bad("publisher", "\"zmq\" or \"null\"");
  }
  if (c.enabled && c.endpoint.empty()) {
    return bad("endpoint", "a ZMQ endpoint");
  }
  return c;
}

bool kv_endpoint_binds(std::string_view endpoint) {
  return endpoint.find('*') != std::string_view::npos || endpoint.find("::") != std::string_view::npos ||
         endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://");
}

std::string encode_event_batch(double ts, std::span<const KvCacheEvent> events, KvEventEncoding enc) {
  Writer w;
  w.array(3);
  w.dbl(ts);
  w.array(static_cast<uint32_t>(events.size()));
  for (const KvCacheEvent& e : events) {
    encode_event(w, e, enc);
  }
  w.uint(0);  // data_parallel_rank
  return std::move(w.out);
}

std::string encode_seq(int64_t seq) {
  std::string out(8, '\0');
  auto u = static_cast<uint64_t>(seq);
  for (int i = 7; i >= 0; --i) {
    out[static_cast<size_t>(i)] = static_cast<char>(u & 0xff);
    u >>= 8;
  }
  return out;
}

}  // namespace cgn::sim
