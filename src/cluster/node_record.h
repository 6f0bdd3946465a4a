// The node record (docs/design/principles.md): what an agent publishes about its node, to etcd and gossip.
// One typed struct, its JSON form (serialise + a bounded parser that rejects wrong types), the
// mapping to the routing core's NodeUpdate, and the kv_epoch rule as a pure function over
// successive engine scrapes. All pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "routing/node_state.h"
#include "routing/types.h"

namespace cgn::cluster {

// The node's GPU identity over the devices it uses (the agent's probe fills it, src/agent/gpu_identity.h).
struct GpuIdentity {
  std::string gpu_name;        // the first device's name
  std::string gpu_vendor;      // the first device's vendor
  uint64_t vram_total_mb = 0;  // per device: the smallest known among the devices; 0 = unknown
  uint32_t count = 0;

  routing::GpuIdentity to_routing() const { return {gpu_name, gpu_vendor, vram_total_mb}; }
  bool operator==(const GpuIdentity&) const = default;
};

struct NodeRecord {
  std::string node_id;
  std::string address;  // where the router reaches the agent ("host:port")
  std::vector<std::string> models;
  std::string engine;  // driver name: "vllm", "sglang", ...
  routing::NodeRole role = routing::NodeRole::kBoth;
  bool ready = false;              // the engine answered its health probe as ready
  std::optional<GpuIdentity> gpu;  // absent when no tool reported one; never invented
  uint64_t total_blocks = 0;       // 0 = unknown
  std::optional<uint64_t> free_blocks;
  uint32_t block_size = 0;  // tokens per block; 0 = unknown
  std::optional<double> queue_depth;
  std::optional<double> running;
  uint64_t kv_epoch = 0;
  std::optional<double> power_watts;    // W, the node's power reader; absent = unknown (never 0)
  std::optional<double> energy_joules;  // J, cumulative from the reader's energy counters; absent = unknown
  double watt_limit = 0;                // soft limit; 0 = none
  bool cordon = false;
  std::string version;  // the agent's version
  // Start time of this agent incarnation (Unix ms): a restarted agent supersedes the old record.
  uint64_t generation = 0;

  bool operator==(const NodeRecord&) const = default;
};

// --- Schema version ---------------------------------------------------------------------------
//
// The JSON form carries "schema_version": the record's major version. The rule for changing it:
//   - New fields are additive: a writer may add keys at any time, and a reader ignores the keys it
//     does not know. A new key is optional for readers (an older agent does not send it), so an
//     additive change keeps the major version.
//   - A change an older reader would misread (a key changes meaning, unit or type; a key becomes
//     required) bumps the major version. A reader refuses a record whose major version is higher
//     than kNodeRecordSchemaMajor with RecordError::kVersion, naming both versions, rather than
//     guess at it.
//   - A record without "schema_version" is major version 1 (agents from before the key existed).
// The protobuf form (agent_health.h) follows protobuf's own rule: new fields take new numbers.
inline constexpr uint64_t kNodeRecordSchemaMajor = 1;

enum class RecordError : uint8_t { kTooLarge, kSyntax, kShape, kVersion };

std::string_view to_string(RecordError e);

struct RecordLimits {
  size_t max_bytes = 64 * 1024;
  size_t max_depth = 4;
  size_t max_models = 64;
  size_t max_string = 512;
};

// Compact JSON; absent optionals are absent keys. Keys: schema_version, node_id, address, models, engine,
// role, ready, gpu_name, gpu_vendor, vram_total_mb, gpu_count, total_blocks, free_blocks, block_size,
// queue_depth, running, kv_epoch, power_watts, energy_joules, watt_limit, cordon, version, generation.
std::string to_json(const NodeRecord& record);

// Required: node_id, address, engine, role, kv_epoch, generation. Unknown keys are ignored (a
// newer agent may add some); a known key of the wrong type, a negative or non-finite number, or a
// limit exceeded is an error that names the key. A schema_version above kNodeRecordSchemaMajor is
// kVersion.
Result<NodeRecord, RecordError> parse_node_record(std::string_view json, const RecordLimits& limits = {});

// What the router's core takes from a record. A record is a whole snapshot: power or energy absent
// from it clears the core's earlier reading (the node lost its power source: unknown, not stale).
routing::NodeUpdate to_node_update(const NodeRecord& record);

// --- kv_epoch -------------------------------------------------------------------------------
//
// The rule (docs/agent.md): the epoch is bumped when what the router believes the engine caches
// may be void:
//   1. the engine restarted (the supervisor's start count changed);
//   2. the block pool was resized (total_blocks changed from one known value to another; learning
//      the size for the first time, or a scrape that lacks it, is not a resize);
//   3. free blocks rose by more than `jump_fraction` (25%) of the pool in one scrape while the
//      running count did not fall. Blocks of finished requests return to the free pool with their
//      prefix-cache contents intact (vLLM, SGLang), so a jump explained by requests finishing is
//      not an eviction; a jump with the same or more requests running is blocks being dropped
//      (cache reset, sleep, eviction burst). Without a running count in both scrapes, any such
//      jump bumps.
// The first epoch is the agent's generation (start time, ms), so epochs stay increasing across
// agent restarts too.

struct PoolSample {
  uint64_t engine_starts = 0;  // processes started so far (1 after the first start)
  uint64_t total_blocks = 0;   // 0 = unknown
  std::optional<uint64_t> free_blocks;
  std::optional<double> running;
};

enum class EpochBump : uint8_t { kEngineRestart, kPoolResize, kFreeBlockJump };

std::string_view to_string(EpochBump b);

std::optional<EpochBump> kv_epoch_bump(const PoolSample& previous, const PoolSample& current,
                                       double jump_fraction = 0.25);

// Holds the previous sample and the epoch. Single owner (the agent's scrape loop); not
// thread-safe.
class KvEpochTracker {
 public:
  explicit KvEpochTracker(uint64_t initial_epoch, double jump_fraction = 0.25)
      : epoch_(initial_epoch), jump_fraction_(jump_fraction) {}

  // Records a sample; returns why the epoch was bumped, if it was.
  std::optional<EpochBump> observe(const PoolSample& sample);
  uint64_t epoch() const { return epoch_; }

 private:
  uint64_t epoch_;
  double jump_fraction_;
  std::optional<PoolSample> previous_;
};

}  // namespace cgn::cluster
