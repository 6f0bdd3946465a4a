#include "core/http/deadline.h"

namespace cgn::http::detail {

DeadlineSweeper::DeadlineSweeper(boost::asio::io_context& ctx)
    : boost::asio::execution_context::service(ctx) {
  timer_.emplace(ctx);
}

DeadlineSweeper& DeadlineSweeper::of(boost::asio::io_context& ctx) {
  return boost::asio::use_service<DeadlineSweeper>(ctx);
}

void DeadlineSweeper::add(DeadlineEntry* e) {
  if (contains(e)) {
    return;
  }
  e->index_ = entries_.size();
  entries_.push_back(e);
  if (!armed_) {
    arm();
  }
}

void DeadlineSweeper::remove(DeadlineEntry* e) {
  if (!contains(e)) {
    return;
  }
  const size_t i = e->index_;
  entries_[i] = entries_.back();
  entries_[i]->index_ = i;
  entries_.pop_back();
  e->index_ = static_cast<size_t>(-1);
  if (entries_.empty() && armed_ && timer_) {
    // Nothing left to watch: let an io_context with no other work run out
    // (a client used outside a server) instead of waiting for the next tick.
    timer_->cancel();
  }
}

void DeadlineSweeper::shutdown() {
  shut_ = true;
  for (DeadlineEntry* e : entries_) {
    e->index_ = static_cast<size_t>(-1);
  }
  entries_.clear();
  timer_.reset();
}

void DeadlineSweeper::arm() {
  if (shut_ || !timer_) {
    return;
  }
  armed_ = true;
  timer_->expires_after(interval_);
  timer_->async_wait([this](boost::system::error_code ec) {
    armed_ = false;
    if (shut_) {
      return;
    }
    if (ec) {
      // Cancelled when the last entry left; entries added before this handler ran found the
      // tick still armed and did not arm it: without this they would never time out.
      if (!entries_.empty()) {
        arm();
      }
      return;
    }
    tick();
  });
}

void DeadlineSweeper::tick() {
  const SteadyTime now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < entries_.size(); ++i) {
    DeadlineEntry* e = entries_[i];
    if (e->deadline_ <= now) {
      e->deadline_ = SteadyTime::max();
      e->on_deadline();
    }
  }
  if (!entries_.empty()) {
    arm();
  }
}

}  // namespace cgn::http::detail
