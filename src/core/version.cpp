#include "core/version.h"

namespace cgn {

const char* version() {
  return CGN_VERSION;
}

}  // namespace cgn
