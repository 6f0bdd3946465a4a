// A small Prometheus metrics registry (prometheus-cpp is not packaged in Debian bookworm).
//
//   metrics::Registry reg;
//   auto& requests = reg.counter("cgn_router_requests_total", "Requests by outcome.",
//                                {"model", "endpoint", "code"});
//   metrics::Counter ok = requests.with({"llama", "chat", "200"});   // once, at setup
//   ok.inc();                                                       // hot path: one atomic add
//   std::string text = reg.render();                                // text format 0.0.4
//
// Hot path: a handle (Counter, Gauge, Histogram) points straight at its series' atomics; inc(),
// set() and observe() take no lock and allocate nothing. Looking a series up by label values
// (with()) takes a shared lock and hashes the labels: do it once and keep the handle where the
// label values are fixed, call with() per event only where they are not.
//
// Bounded cardinality: each family holds at most max_series label sets. Asking for one more
// returns the family's overflow series (every label value "_overflow") and counts the dropped
// label set in cgn_metrics_dropped_label_sets_total{family="..."}, so no client input can grow
// memory or the scrape without bound. Label values must still come from configuration or live
// nodes, never raw client input (docs/design/principles.md, metric names).
//
// Thread-safety: everything here is safe to call from any thread. Handles stay valid for the life
// of the registry, even after their series is removed (they then update a series nobody exports).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cgn::metrics {

using Labels = std::vector<std::string>;

enum class Type { counter, gauge, histogram };

namespace detail {
struct CounterCell {
  std::atomic<uint64_t> whole{0};  // integer increments: lock xadd, the common case
  std::atomic<double> fraction{0.0};
};
struct GaugeCell {
  std::atomic<double> value{0.0};
};
struct HistogramCell {
  explicit HistogramCell(const std::vector<double>* bounds);
  const std::vector<double>* bounds;                // upper bounds without +Inf; owned by the family
  std::unique_ptr<std::atomic<uint64_t>[]> counts;  // bounds->size() + 1 (the last is +Inf)
  std::atomic<double> sum{0.0};
};
}  // namespace detail

// A counter series handle; cheap to copy. A default-constructed handle does nothing, so code can
// run without metrics wired in (unit tests).
class Counter {
 public:
  Counter() = default;
  explicit Counter(std::shared_ptr<detail::CounterCell> cell) : cell_(std::move(cell)) {}
  void inc(uint64_t n = 1) const {
    if (cell_) {
      cell_->whole.fetch_add(n, std::memory_order_relaxed);
    }
  }
  // Adds a non-negative amount (negative or NaN amounts are ignored: counters never go down).
  void add(double v) const;
  double value() const;

 private:
  std::shared_ptr<detail::CounterCell> cell_;
};

// A gauge series handle.
class Gauge {
 public:
  Gauge() = default;
  explicit Gauge(std::shared_ptr<detail::GaugeCell> cell) : cell_(std::move(cell)) {}
  void set(double v) const {
    if (cell_) {
      cell_->value.store(v, std::memory_order_relaxed);
    }
  }
  void add(double v) const {
    if (cell_) {
      cell_->value.fetch_add(v, std::memory_order_relaxed);
    }
  }
  void inc() const { add(1.0); }
  void dec() const { add(-1.0); }
  double value() const { return cell_ ? cell_->value.load(std::memory_order_relaxed) : 0.0; }

 private:
  std::shared_ptr<detail::GaugeCell> cell_;
};

// A histogram series handle.
class Histogram {
 public:
  Histogram() = default;
  explicit Histogram(std::shared_ptr<detail::HistogramCell> cell) : cell_(std::move(cell)) {}
  // Counts v in the first bucket whose upper bound is >= v (NaN is ignored).
  void observe(double v) const;
  uint64_t count() const;
  double sum() const;

 private:
  std::shared_ptr<detail::HistogramCell> cell_;
};

struct FamilyOptions {
  size_t max_series = 1000;  // distinct label sets, the overflow series not counted
};

class Registry;

// One metric family: a name, help text, fixed label names and its series. Created by Registry.
template <class Handle, class Cell>
class Family {
 public:
  // The series for these label values (one per label name), created on first use.
  Handle with(const Labels& values);
  // Forgets a series (e.g. a node that left); its handles keep working but are no longer exported.
  void remove(const Labels& values);
  // Forgets every series (a collect callback that rebuilds a mirror from scratch).
  void clear();
  size_t series_count() const;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  Family(Registry* registry, std::string name, std::string help, std::vector<std::string> label_names,
         FamilyOptions options, std::vector<double> bounds = {});

 private:
  friend class Registry;
  struct LabelsHash {
    size_t operator()(const Labels& l) const;
  };
  std::shared_ptr<Cell> make_cell() const;

  Registry* registry_;
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  FamilyOptions options_;
  std::vector<double> bounds_;  // histograms only
  mutable std::shared_mutex mu_;
  std::unordered_map<Labels, std::shared_ptr<Cell>, LabelsHash> series_;
  std::shared_ptr<Cell> overflow_;
};

using CounterFamily = Family<Counter, detail::CounterCell>;
using GaugeFamily = Family<Gauge, detail::GaugeCell>;
using HistogramFamily = Family<Histogram, detail::HistogramCell>;

// Default buckets for latencies in seconds (Prometheus client default).
std::vector<double> default_buckets();
// start, start*factor, ... (count bounds). Computed bounds are rounded to 15 significant digits,
// so float noise never reaches a bound (0.1 + 2 * 0.1 gives 0.3, printed le="0.3").
std::vector<double> exponential_buckets(double start, double factor, size_t count);
// start, start+width, ... (count bounds), rounded the same way.
std::vector<double> linear_buckets(double start, double width, size_t count);

// Owns families; renders them. Registering is a setup-time step: a name or label name that is not
// valid Prometheus, a label count mismatch, bad buckets or the same name with another type or
// label set are programming errors and abort with a message naming the metric. Registering the
// same name again with the same type, labels and buckets returns the existing family.
class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  CounterFamily& counter(std::string name, std::string help, std::vector<std::string> label_names = {},
                         FamilyOptions options = {});
  GaugeFamily& gauge(std::string name, std::string help, std::vector<std::string> label_names = {},
                     FamilyOptions options = {});
  HistogramFamily& histogram(std::string name, std::string help, std::vector<std::string> label_names = {},
                             std::vector<double> buckets = default_buckets(), FamilyOptions options = {});

  // Called at the start of every render(), serialised, on the scraping thread: refresh gauges that
  // mirror outside state (cluster nodes, queue lengths). Must not call render() or add/remove
  // callbacks. Returns an id for remove_collect_callback.
  uint64_t add_collect_callback(std::function<void()> fn);
  void remove_collect_callback(uint64_t id);

  // Text exposition format 0.0.4: families sorted by name, series sorted by label values.
  std::string render();

  // Content-Type for the /metrics response.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  template <class H, class C>
  friend class Family;
  struct Entry {
    Type type = Type::counter;
    std::unique_ptr<CounterFamily> counter;
    std::unique_ptr<GaugeFamily> gauge;
    std::unique_ptr<HistogramFamily> histogram;
  };
  Entry& register_family(Type type, const std::string& name, const std::vector<std::string>& label_names,
                         const std::vector<double>& buckets);
  void count_dropped(const std::string& family);

  std::mutex mu_;  // guards families_
  std::map<std::string, Entry, std::less<>> families_;
  std::mutex collect_mu_;  // serialises collect callbacks (and so renders)
  std::map<uint64_t, std::function<void()>> callbacks_;
  uint64_t next_callback_id_ = 1;
  CounterFamily* dropped_ = nullptr;
};

// Escapes a label value for the text format: backslash, double quote and newline.
std::string escape_label_value(std::string_view v);
// Escapes HELP text: backslash and newline.
std::string escape_help(std::string_view v);
// A sample value as the text format writes it: shortest round-trip decimal, +Inf, -Inf, NaN.
std::string format_value(double v);

}  // namespace cgn::metrics
