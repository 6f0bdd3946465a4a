#include "sim/shell/app.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/log.h"

namespace cgn::sim {

SimApp::SimApp(SimSetup setup, const Clock& clock) : setup_(std::move(setup)), clock_(clock) {}

SimApp::~SimApp() {
  stop(clock_.now() + kStopGrace);
}

CliResult<uint16_t> SimApp::start() {
  log::set_level(setup_.log_level);  // checked by parse_sim_options
  server_ = std::make_unique<SimServer>(setup_.shell);
  auto port = server_->start();
  if (!port) {
    server_.reset();
    return cli_exit(1, "cgn-engine-sim: " + port.error().message + "\n");
  }
  port_ = *port;
  if (auto written = write_port_file(); !written) {
    stop(clock_.now());
    return written.error();
  }
  return port_;
}

CliResult<Ok> SimApp::write_port_file() const {
  if (setup_.port_file.empty()) {
    return Ok{};
  }
  if (auto w = cgn::write_port_file(setup_.port_file, port_); !w) {
    return cli_exit(2, "cgn-engine-sim: " + w.error().message + "\n");
  }
  return Ok{};
}

void SimApp::stop(Nanos deadline) {
  if (!server_) {
    return;
  }
  const Nanos grace = std::max<Nanos>(0, deadline - clock_.now());
  server_->stop(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds(grace)));
  server_.reset();
}

}  // namespace cgn::sim
