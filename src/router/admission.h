// Admission: in-flight caps per (model, role) from [router.admission] (docs/design/principles.md). A request
// holds a slot from admission until its response ends; over the cap it gets 429 + Retry-After.
// Thread-safe (one mutex; an acquire is a map lookup).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "core/config.h"

namespace cgn::router {

class Admission {
 public:
  explicit Admission(config::AdmissionConfig cfg = {}) : cfg_(std::move(cfg)) {}

  // A held slot; releases on destruction. Empty (released) when moved from.
  class Slot {
   public:
    Slot() = default;
    Slot(Admission* a, std::string key) : a_(a), key_(std::move(key)) {}
    Slot(Slot&& o) noexcept : a_(std::exchange(o.a_, nullptr)), key_(std::move(o.key_)) {}
    Slot& operator=(Slot&& o) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { release(); }
    void release();
    bool held() const { return a_ != nullptr; }

   private:
    Admission* a_ = nullptr;
    std::string key_;
  };

  // A slot for (model, role), or an empty Slot when the cap is reached.
  Slot try_acquire(std::string_view model, std::string_view role);
  uint64_t inflight(std::string_view model, std::string_view role) const;
  uint32_t retry_after_s() const { return cfg_.retry_after_s; }
  void set_config(config::AdmissionConfig cfg);

 private:
  mutable std::mutex mu_;
  config::AdmissionConfig cfg_;
  std::map<std::string, uint64_t, std::less<>> inflight_;
};

}  // namespace cgn::router
