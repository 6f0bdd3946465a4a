#include "router/admission.h"

namespace cgn::router {

namespace {
std::string key_of(std::string_view model, std::string_view role) {
  std::string k(model);
  k += '\x1f';
  k += role;
  return k;
}
}  // namespace

Admission::Slot& Admission::Slot::operator=(Slot&& o) noexcept {
  if (this != &o) {
    release();
    a_ = std::exchange(o.a_, nullptr);
    key_ = std::move(o.key_);
  }
  return *this;
}

void Admission::Slot::release() {
  if (a_ == nullptr) {
    return;
  }
  std::lock_guard lock(a_->mu_);
  auto it = a_->inflight_.find(key_);
  if (it != a_->inflight_.end() && --it->second == 0) {
    a_->inflight_.erase(it);
  }
  a_ = nullptr;
}

Admission::Slot Admission::try_acquire(std::string_view model, std::string_view role) {
  std::string key = key_of(model, role);
  std::lock_guard lock(mu_);
  const uint32_t cap = cfg_.max_queue_for(model, role);
  auto& n = inflight_[key];
  if (cap != 0 && n >= cap) {
    if (n == 0) {
      inflight_.erase(key);
    }
    return {};
  }
  ++n;
  return Slot(this, std::move(key));
}

uint64_t Admission::inflight(std::string_view model, std::string_view role) const {
  std::lock_guard lock(mu_);
  auto it = inflight_.find(key_of(model, role));
  return it == inflight_.end() ? 0 : it->second;
}

void Admission::set_config(config::AdmissionConfig cfg) {
  std::lock_guard lock(mu_);
  cfg_ = std::move(cfg);
}

}  // namespace cgn::router
