// cgn-ctl, the operator's CLI (docs/cgn-ctl.md): the command line built from the verb registry
// (verbs.h), parsed, and the chosen verb run. main.cpp only calls run_ctl.
#pragma once

#include <ostream>

namespace cgn::ctl {

// Runs cgn-ctl with `argv`; output to `out`, errors ("cgn-ctl: <why>") to `err`. Returns the exit
// status (ctl_context.h: Exit).
int run_ctl(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace cgn::ctl
