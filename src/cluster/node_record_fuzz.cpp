// Fuzz target for the node record parser (bytes from etcd and gossip peers): parse, and for a
// record that parses, serialise and parse again and require the same record.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cluster/node_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = cgn::cluster::parse_node_record(text);
  if (r.ok()) {
    auto again = cgn::cluster::parse_node_record(cgn::cluster::to_json(*r));
    if (!again.ok() || !(*again == *r)) {
      std::abort();
    }
    (void)cgn::cluster::to_node_update(*r);
  }
  return 0;
}
