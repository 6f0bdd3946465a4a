#include "kvcache/store_types.h"

namespace cgn::kvcache {

std::string_view to_string(Tier t) {
  switch (t) {
    case Tier::kRam:
      return "ram";
    case Tier::kSsd:
      return "ssd";
    case Tier::kNone:
      break;
  }
  return "none";
}

std::string_view to_string(StoreError e) {
  switch (e) {
    case StoreError::kNotFound:
      return "not_found";
    case StoreError::kTooLarge:
      return "too_large";
    case StoreError::kNoSpace:
      return "no_space";
    case StoreError::kBusy:
      return "busy";
    case StoreError::kCorrupt:
      return "corrupt";
    case StoreError::kIo:
      return "io";
    case StoreError::kDiskFull:
      return "disk_full";
    case StoreError::kConfig:
      return "config";
    case StoreError::kStopped:
      return "stopped";
  }
  return "unknown";
}

}  // namespace cgn::kvcache
