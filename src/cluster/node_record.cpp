#include "cluster/node_record.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/json_bounds.h"

namespace cgn::cluster {

using nlohmann::json;

std::string_view to_string(RecordError e) {
  switch (e) {
    case RecordError::kTooLarge:
      return "too_large";
    case RecordError::kSyntax:
      return "syntax";
    case RecordError::kShape:
      return "shape";
    case RecordError::kVersion:
      return "version";
  }
  return "unknown";
}

std::string_view to_string(EpochBump b) {
  switch (b) {
    case EpochBump::kEngineRestart:
      return "engine_restart";
    case EpochBump::kPoolResize:
      return "pool_resize";
    case EpochBump::kFreeBlockJump:
      return "free_block_jump";
  }
  return "unknown";
}

std::string to_json(const NodeRecord& r) {
  json j;
  j["schema_version"] = kNodeRecordSchemaMajor;
  j["node_id"] = r.node_id;
  j["address"] = r.address;
  j["models"] = r.models;
  j["engine"] = r.engine;
  j["role"] = std::string(routing::to_string(r.role));
  j["ready"] = r.ready;
  if (r.gpu) {
    j["gpu_name"] = r.gpu->gpu_name;
    j["gpu_vendor"] = r.gpu->gpu_vendor;
    j["vram_total_mb"] = r.gpu->vram_total_mb;
    j["gpu_count"] = r.gpu->count;
  }
  j["total_blocks"] = r.total_blocks;
  if (r.free_blocks) {
    j["free_blocks"] = *r.free_blocks;
  }
  j["block_size"] = r.block_size;
  if (r.queue_depth) {
    j["queue_depth"] = *r.queue_depth;
  }
  if (r.running) {
    j["running"] = *r.running;
  }
  j["kv_epoch"] = r.kv_epoch;
  if (r.power_watts) {
    j["power_watts"] = *r.power_watts;
  }
  if (r.energy_joules) {
    j["energy_joules"] = *r.energy_joules;
  }
  j["watt_limit"] = r.watt_limit;
  j["cordon"] = r.cordon;
  j["version"] = r.version;
  j["generation"] = r.generation;
  return j.dump();
}

namespace {

// Reads one record; every accessor records the first shape error and the key it concerns.
class Reader {
 public:
  Reader(const json& j, const RecordLimits& limits) : j_(j), limits_(limits) {}

  bool failed() const { return error_.has_value(); }
  const std::string& error() const { return *error_; }

  const json* find(std::string_view key, bool required) {
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) {
        fail(key, "is required");
      }
      return nullptr;
    }
    return &*it;
  }

  void string(std::string_view key, std::string& out, bool required = false) {
    const json* v = find(key, required);
    if (v == nullptr) {
      return;
    }
    if (!v->is_string()) {
      return fail(key, "must be a string");
    }
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > limits_.max_string) {
      return fail(key, fmt::format("is longer than {} bytes", limits_.max_string));
    }
    out = s;
  }

  template <class T>
  void unsigned_int(std::string_view key, T& out, bool required = false) {
    const json* v = find(key, required);
    if (v == nullptr) {
      return;
    }
    if (!v->is_number_unsigned()) {
      return fail(key, "must be a non-negative integer");
    }
    auto n = v->get<uint64_t>();
    if (n > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      return fail(key, "is out of range");
    }
    out = static_cast<T>(n);
  }

  template <class T>
  void optional_unsigned(std::string_view key, std::optional<T>& out) {
    if (j_.contains(key)) {
      T v{};
      unsigned_int(key, v);
      out = v;
    }
  }

  void number(std::string_view key, double& out) {
    const json* v = find(key, false);
    if (v == nullptr) {
      return;
    }
    if (!v->is_number()) {
      return fail(key, "must be a number");
    }
    double d = v->get<double>();
    if (!std::isfinite(d) || d < 0) {
      return fail(key, "must be finite and non-negative");
    }
    out = d;
  }

  void optional_number(std::string_view key, std::optional<double>& out) {
    if (j_.contains(key)) {
      double v = 0;
      number(key, v);
      out = v;
    }
  }

  void boolean(std::string_view key, bool& out) {
    const json* v = find(key, false);
    if (v == nullptr) {
      return;
    }
    if (!v->is_boolean()) {
      return fail(key, "must be a boolean");
    }
    out = v->get<bool>();
  }

  void strings(std::string_view key, std::vector<std::string>& out) {
    const json* v = find(key, false);
    if (v == nullptr) {
      return;
    }
    if (!v->is_array()) {
      return fail(key, "must be an array of strings");
    }
    if (v->size() > limits_.max_models) {
      return fail(key, fmt::format("has more than {} entries", limits_.max_models));
    }
    for (const auto& e : *v) {
      if (!e.is_string() || e.get_ref<const std::string&>().size() > limits_.max_string) {
        return fail(key, "must be an array of strings");
      }
      out.push_back(e.get<std::string>());
    }
  }

  void fail(std::string_view key, std::string_view what) {
    if (!error_) {
      error_ = fmt::format("node record: '{}' {}", key, what);
    }
  }

 private:
  const json& j_;
  const RecordLimits& limits_;
  std::optional<std::string> error_;
};

}  // namespace

Result<NodeRecord, RecordError> parse_node_record(std::string_view text, const RecordLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return make_error(RecordError::kTooLarge,
                      fmt::format("node record is {} bytes (limit {})", text.size(), limits.max_bytes));
  }
  if (!json_within_bounds(text, limits.max_bytes, limits.max_depth)) {
    return make_error(RecordError::kTooLarge,
                      fmt::format("node record nests deeper than {}", limits.max_depth));
  }
  auto j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return make_error(RecordError::kSyntax, "node record is not valid JSON");
  }
  if (!j.is_object()) {
    return make_error(RecordError::kShape, "node record must be a JSON object");
  }
  uint64_t schema = 1;
  Reader in(j, limits);
  in.unsigned_int("schema_version", schema);
  if (in.failed()) {
    return make_error(RecordError::kShape, in.error());
  }
  if (schema > kNodeRecordSchemaMajor) {
    return make_error(RecordError::kVersion,
                      fmt::format("node record: schema_version {} is newer than this reader's {}; upgrade "
                                  "the router (or whatever reads the record) before the agents",
                                  schema, kNodeRecordSchemaMajor));
  }
  NodeRecord r;
  in.string("node_id", r.node_id, true);
  in.string("address", r.address, true);
  in.strings("models", r.models);
  in.string("engine", r.engine, true);
  std::string role;
  in.string("role", role, true);
  if (!in.failed()) {
    auto parsed = routing::parse_node_role(role);
    if (!parsed) {
      in.fail("role", "must be prefill, decode or both");
    } else {
      r.role = *parsed;
    }
  }
  in.boolean("ready", r.ready);
  if (j.contains("gpu_name") || j.contains("gpu_vendor") || j.contains("vram_total_mb") ||
      j.contains("gpu_count")) {
    GpuIdentity g;
    in.string("gpu_name", g.gpu_name);
    in.string("gpu_vendor", g.gpu_vendor);
    in.unsigned_int("vram_total_mb", g.vram_total_mb);
    in.unsigned_int("gpu_count", g.count);
    r.gpu = g;
  }
  in.unsigned_int("total_blocks", r.total_blocks);
  in.optional_unsigned("free_blocks", r.free_blocks);
  in.unsigned_int("block_size", r.block_size);
  in.optional_number("queue_depth", r.queue_depth);
  in.optional_number("running", r.running);
  in.unsigned_int("kv_epoch", r.kv_epoch, true);
  in.optional_number("power_watts", r.power_watts);
  in.optional_number("energy_joules", r.energy_joules);
  in.number("watt_limit", r.watt_limit);
  in.boolean("cordon", r.cordon);
  in.string("version", r.version);
  in.unsigned_int("generation", r.generation, true);
  if (in.failed()) {
    return make_error(RecordError::kShape, in.error());
  }
  if (r.node_id.empty()) {
    return make_error(RecordError::kShape, "node record: 'node_id' must not be empty");
  }
  return r;
}

routing::NodeUpdate to_node_update(const NodeRecord& r) {
  routing::NodeUpdate u;
  u.address = r.address;
  u.models = r.models;
  u.engine = r.engine;
  u.role = r.role;
  u.health = r.ready ? routing::Health::kHealthy : routing::Health::kUnhealthy;
  u.cordoned = r.cordon;
  u.queue_depth = r.queue_depth;
  u.running = r.running;
  u.total_blocks = r.total_blocks;
  u.free_blocks = r.free_blocks;
  if (r.block_size != 0) {
    u.block_size_tokens = r.block_size;
  }
  if (r.total_blocks != 0 && r.free_blocks) {
    u.kv_used_ratio = 1.0 - static_cast<double>(std::min(*r.free_blocks, r.total_blocks)) /
                                static_cast<double>(r.total_blocks);
  }
  u.kv_epoch = r.kv_epoch;
  // NaN is "no reading" to the core (node_state.h): it clears what an earlier record said.
  u.power_watts = r.power_watts.value_or(std::numeric_limits<double>::quiet_NaN());
  u.energy_joules = r.energy_joules.value_or(std::numeric_limits<double>::quiet_NaN());
  u.watt_limit_watts = r.watt_limit;
  if (r.gpu) {
    u.gpu = r.gpu->to_routing();
  }
  return u;
}

std::optional<EpochBump> kv_epoch_bump(const PoolSample& prev, const PoolSample& cur, double jump_fraction) {
  if (cur.engine_starts != prev.engine_starts) {
    return EpochBump::kEngineRestart;
  }
  if (prev.total_blocks != 0 && cur.total_blocks != 0 && prev.total_blocks != cur.total_blocks) {
    return EpochBump::kPoolResize;
  }
  if (cur.total_blocks != 0 && prev.free_blocks && cur.free_blocks && *cur.free_blocks > *prev.free_blocks) {
    const double rise = static_cast<double>(*cur.free_blocks - *prev.free_blocks);
    const bool explained_by_completions = prev.running && cur.running && *cur.running < *prev.running;
    if (rise > jump_fraction * static_cast<double>(cur.total_blocks) && !explained_by_completions) {
      return EpochBump::kFreeBlockJump;
    }
  }
  return std::nullopt;
}

std::optional<EpochBump> KvEpochTracker::observe(const PoolSample& sample) {
  std::optional<EpochBump> bump;
  if (previous_) {
    bump = kv_epoch_bump(*previous_, sample, jump_fraction_);
    if (bump) {
      ++epoch_;
    }
  }
  // A scrape that lacks the pool size keeps the last known one, so a missing value followed by
  // the old value is not taken for a resize.
  PoolSample kept = sample;
  if (kept.total_blocks == 0 && previous_ && sample.engine_starts == previous_->engine_starts) {
    kept.total_blocks = previous_->total_blocks;
  }
  previous_ = kept;
  return bump;
}

}  // namespace cgn::cluster
