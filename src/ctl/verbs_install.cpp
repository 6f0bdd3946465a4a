// install, uninstall: the verbs over install.h.
#include "ctl/install.h"
#include "ctl/verbs.h"

namespace cgn::ctl {

void register_install_verbs(Registry& r) {
  r.push_back(
      {"install",
       "write the systemd units and /etc/cognitora configuration of the given roles and enable them "
       "(prints what it would write unless --apply; keeps files an operator changed)",
       [](CLI::App& cmd) -> VerbRun {
         auto o = std::make_shared<InstallOptions>();
         cmd.add_option("roles", o->roles, "router, agent, kvcached, power, etcd (Debian's etcd.service)")
             ->required()
             ->check(CLI::IsMember(install_roles()));
         cmd.add_flag("--apply", o->apply, "write and enable (default: print what it would write)");
         cmd.add_option("--root", o->root,
                        "write under DIR as `systemctl --root` does, making the enable symlinks itself");
         return [o](Ctx& ctx) { return run_install(ctx, *o); };
       }});
  r.push_back(
      {"uninstall",
       "remove what install wrote (its manifest, /var/lib/cognitora/cgn-ctl-install.json) and disable "
       "the units; keeps files changed since (prints what it would remove unless --apply)",
       [](CLI::App& cmd) -> VerbRun {
         auto root = std::make_shared<std::string>();
         auto apply = std::make_shared<bool>(false);
         cmd.add_flag("--apply", *apply, "remove (default: print what it would remove)");
         cmd.add_option("--root", *root, "the root install wrote under");
         return [root, apply](Ctx& ctx) { return run_uninstall(ctx, *root, *apply); };
       }});
}

}  // namespace cgn::ctl
