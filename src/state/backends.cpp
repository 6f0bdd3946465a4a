#include "state/backends.h"

#include <cstdlib>
#include <iostream>

#include "state/etcd/etcd_backend.h"
#include "state/gossip/gossip_backend.h"
#include "state/static/static_backend.h"

namespace cgn::state {

const cluster::BackendRegistry& builtin_backends() {
  static const cluster::BackendRegistry registry = [] {
    cluster::BackendRegistry r;
    for (const auto& b : {static_backend(), etcd_backend(), gossip::gossip_backend()}) {
      if (auto st = r.add(b); !st) {
        // A mistake in this list, not in any config: state_unit_tests catches it.
        std::cerr << "state backends: " << st.error().message << "\n";
        std::abort();
      }
    }
    return r;
  }();
  return registry;
}

}  // namespace cgn::state
