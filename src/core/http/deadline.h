// Internal: cheap timeouts for many connections. Instead of one Asio timer per
// connection that is re-armed (cancel + post) on every read and write, each
// connection stores a plain deadline and one sweeper per io_context checks all
// of them every tick (default 50 ms). Setting a deadline is a store; a timeout
// fires at most one tick late. The tick runs only while entries are registered,
// so an io_context with no open connections can still run out of work.
//
// Thread-safety: a DeadlineSweeper and its entries are used only on the thread
// running their io_context.
#pragma once

#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <optional>
#include <vector>

namespace cgn::http::detail {

using SteadyTime = std::chrono::steady_clock::time_point;

class DeadlineSweeper;

// Something with a deadline. on_deadline() runs on the io_context thread once
// the deadline passes (the deadline is then reset to never); it must not
// register or unregister entries synchronously (cancelling sockets is fine).
class DeadlineEntry {
 public:
  DeadlineEntry() = default;
  DeadlineEntry(const DeadlineEntry&) = delete;
  DeadlineEntry& operator=(const DeadlineEntry&) = delete;

  void set_deadline_after(std::chrono::milliseconds d) { deadline_ = std::chrono::steady_clock::now() + d; }
  void set_deadline_at(SteadyTime t) { deadline_ = t; }
  void clear_deadline() { deadline_ = SteadyTime::max(); }

 protected:
  ~DeadlineEntry() = default;
  virtual void on_deadline() = 0;

 private:
  friend class DeadlineSweeper;
  SteadyTime deadline_ = SteadyTime::max();
  size_t index_ = static_cast<size_t>(-1);
};

class DeadlineSweeper : public boost::asio::execution_context::service {
 public:
  using key_type = DeadlineSweeper;
  // Asio finds services by this static id; its constructor does not throw.
  inline static boost::asio::execution_context::id id;  // NOLINT(cert-err58-cpp)

  explicit DeadlineSweeper(boost::asio::io_context& ctx);

  // The sweeper of an io_context (created on first use).
  static DeadlineSweeper& of(boost::asio::io_context& ctx);

  void add(DeadlineEntry* e);
  void remove(DeadlineEntry* e);
  bool contains(const DeadlineEntry* e) const { return e->index_ != static_cast<size_t>(-1); }

  // Tick length; the precision of every timeout on this io_context.
  void set_interval(std::chrono::milliseconds i) { interval_ = i; }
  std::chrono::milliseconds interval() const { return interval_; }

 private:
  void shutdown() override;
  void arm();
  void tick();

  std::optional<boost::asio::steady_timer> timer_;
  std::vector<DeadlineEntry*> entries_;
  std::chrono::milliseconds interval_{50};
  bool armed_ = false;
  bool shut_ = false;
};

}  // namespace cgn::http::detail
