// Fuzz target for gossip datagrams (untrusted bytes from the network): decode with and without a
// key; a packet that decodes must re-encode to the same bytes; and every input is fed to a live
// core, which must neither crash nor answer with a datagram over the limit.
#include <cstddef>
#include <cstdint>
#include <span>

#include "state/gossip/core.h"
#include "state/gossip/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cgn::gossip;
  const std::span<const uint8_t> in(data, size);
  for (const char* key : {"", "fuzz-key"}) {
    auto m = decode(in, "cognitora", key);
    if (m) {
      const auto again = encode(*m, key);
      if (again.size() != size || !std::equal(again.begin(), again.end(), data)) {
        __builtin_trap();
      }
    }
  }
  static GossipCore* core = [] {
    CoreOptions o;
    o.name = "fuzz-target";
    o.generation = 1;
    o.max_members = 256;
    auto* c = new GossipCore(o, 0);
    c->set("record", "{}", 0);
    return c;
  }();
  static cgn::Nanos now = 0;
  now += 100 * cgn::kNanosPerMilli;
  const auto from = PeerAddr::parse("127.0.0.1", 7946);
  for (const auto& out : core->receive(in, *from, now)) {
    if (out.bytes.size() > kMaxDatagram) {
      __builtin_trap();
    }
  }
  if (now % (5 * cgn::kNanosPerSecond) == 0) {
    for (const auto& out : core->tick(now)) {
      if (out.bytes.size() > kMaxDatagram) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
