// cgn-ctl: the operator's CLI (docs/cgn-ctl.md). Everything is in the cgn_ctl library.
#include <iostream>

#include "core/version.h"
#include "ctl/ctl_app.h"

int main(int argc, char** argv) {
  if (auto v = cgn::print_version_if_asked(argc, argv, "cgn-ctl")) {
    return *v;  // as every packaged binary answers --version
  }
  return cgn::ctl::run_ctl(argc, argv, std::cout, std::cerr);
}
