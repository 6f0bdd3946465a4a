// Readiness for the service manager: each daemon's main tells systemd (Type=notify units,
// packaging/systemd/) when it listens, when it reloads its configuration and when it stops, over
// the datagram socket named by $NOTIFY_SOCKET (libsystemd's sd_notify). Without $NOTIFY_SOCKET
// (started by hand, by a test, by cgn-ctl up) every call does nothing.
//
//   app.start() ok      -> notify_ready()      READY=1
//   SIGHUP reload       -> notify_reloading()  RELOADING=1, then notify_ready() when done
//   SIGTERM/SIGINT      -> notify_stopping()   STOPPING=1, before app.stop()
#pragma once

#include <string_view>

namespace cgn::sd {

// READY=1 with STATUS=<status> when given. `daemon` names the process in the one warning logged
// when the socket is set but the message cannot be sent.
void notify_ready(std::string_view daemon, std::string_view status = {});
// RELOADING=1 with MONOTONIC_USEC (what Type=notify-reload units expect; older systemd ignores it).
void notify_reloading(std::string_view daemon);
// STOPPING=1.
void notify_stopping(std::string_view daemon);

}  // namespace cgn::sd
