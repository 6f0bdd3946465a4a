// Sample node records for tests (node_record_test.cpp, agent_health_test.cpp): one with every
// field set and one with only the required fields.
#pragma once

#include "cluster/node_record.h"

namespace cgn::cluster::samples {

inline NodeRecord full_record() {
  NodeRecord r;
  r.node_id = "gpu-node-7";
  r.address = "10.0.0.7:9090";
  r.models = {"Qwen/Qwen3-8B", "qwen"};
  r.engine = "vllm";
  r.role = routing::NodeRole::kPrefill;
  r.ready = true;
  r.gpu = GpuIdentity{"NVIDIA H200", "nvidia", 143771, 8};
  r.total_blocks = 27500;
  r.free_blocks = 20000;
  r.block_size = 16;
  r.queue_depth = 3;
  r.running = 12;
  r.kv_epoch = 1790000000123;
  r.power_watts = 627.4;
  r.energy_joules = 8123456.789;
  r.watt_limit = 650;
  r.cordon = true;
  r.version = "0.1.0";
  r.generation = 1790000000000;
  return r;
}

inline NodeRecord minimal_record() {
  // Designated initialisers: GCC 12 reports a false -Wrestrict on member-wise string assignment
  // here.
  return NodeRecord{
      .node_id = "n", .address = "127.0.0.1:9090", .engine = "llamacpp", .kv_epoch = 5, .generation = 5};
}

}  // namespace cgn::cluster::samples
