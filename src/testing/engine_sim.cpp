#include "testing/engine_sim.h"

namespace cgn::testing {

EngineSim::EngineSim(EngineSimOptions o) : host_(o.host.empty() ? "127.0.0.1" : o.host) {
  const std::string port_file = dir_.file("port");
  std::vector<std::string> argv{o.program.empty() ? bin_path("cgn-engine-sim") : o.program};
  const bool line = !o.engine_line.empty();
  if (line) {
    argv.insert(argv.end(), o.engine_line.begin(), o.engine_line.end());
  } else {
    if (!o.flavour.empty()) {
      argv.insert(argv.end(), {"--flavor", o.flavour});
    }
    if (!o.model.empty()) {
      argv.insert(argv.end(), {"--model", o.model});
    }
    if (!o.host.empty()) {
      argv.insert(argv.end(), {"--host", o.host});
    }
  }
  argv.insert(argv.end(), o.args.begin(), o.args.end());
  if (!o.fault_rules.empty()) {
    write_file(dir_.file("fault-rules"), o.fault_rules);
    argv.insert(argv.end(), {"--fault-rules", dir_.file("fault-rules")});
  }
  argv.insert(argv.end(), {"--port", "0", line ? "--sim-port-file" : "--port-file", port_file});
  if (o.admin) {
    argv.emplace_back(line ? "--sim-enable-admin" : "--enable-admin");
  }
  proc_ = std::make_unique<Process>(std::move(argv), std::move(o.env), std::move(o.log_path));
  // Stops waiting as soon as the simulator exits (a bad flag): no need to sit out the bound.
  port_ = static_cast<uint16_t>(wait_for_port_file(port_file, *proc_, o.start_timeout));
}

std::string EngineSim::url() const {
  return "http://" + host_ + ":" + std::to_string(port_);
}

}  // namespace cgn::testing
