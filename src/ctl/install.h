// `cgn-ctl install` and `cgn-ctl uninstall`: a node's roles as systemd units and configuration,
// from the files of packaging/ embedded at build time (packaged_files.h).
//
// install writes, under a root ("/" or --root DIR, as `systemctl --root` does):
//   /etc/systemd/system/<unit>          the role's unit (unless the package already installed it
//                                       in /lib/systemd/system)
//   /etc/systemd/system/<unit>.d/<f>    drop-ins for a unit another package ships (etcd.service)
//   /etc/cognitora/<file>               each configuration file the unit names (--config, EnvironmentFile)
// and enables the units: `systemctl enable` on the live system, otherwise the symlinks it would
// make ([Install] WantedBy=, RequiredBy=, Alias=). A file that exists and differs from what
// install would write is kept (an operator's edit) unless install wrote it and it is unchanged
// since. Everything it wrote is listed in the manifest, so uninstall removes exactly that.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "ctl/ctl_context.h"

namespace cgn::ctl {

// Where install records what it wrote, under the root.
inline constexpr const char* kInstallManifest = "/var/lib/cognitora/cgn-ctl-install.json";

// The roles install knows: router, agent, kvcached, power, etcd.
const std::vector<std::string>& install_roles();

struct InstallOptions {
  std::vector<std::string> roles;
  std::string root;  // empty: the live system (systemctl enables when present)
  bool apply = false;
};

// What install wrote (kInstallManifest, JSON).
struct InstallManifest {
  std::vector<std::string> roles;
  std::map<std::string, std::string> files;  // path -> BLAKE3 of what was written
  std::map<std::string, std::string> links;  // path -> target
  std::vector<std::string> dirs;             // created, parents first
  std::vector<std::string> enabled;          // units enabled with systemctl

  std::string dump() const;
  static Result<InstallManifest, std::string> parse(const std::string& text);
};

int run_install(Ctx& ctx, const InstallOptions& o);
int run_uninstall(Ctx& ctx, const std::string& root, bool apply);

}  // namespace cgn::ctl
