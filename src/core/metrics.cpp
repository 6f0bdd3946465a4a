#include "core/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <set>
#include <utility>

namespace cgn::metrics {
namespace {

constexpr std::string_view kOverflowValue = "_overflow";
constexpr std::string_view kDroppedName = "cgn_metrics_dropped_label_sets_total";

// Registration mistakes are bugs in the calling module, found the first time it starts.
[[noreturn]] void die(const std::string& name, std::string_view what) {
  std::fprintf(stderr, "metrics: cannot register '%s': %.*s\n", name.c_str(), static_cast<int>(what.size()),
               what.data());
  std::abort();
}

bool valid_metric_name(std::string_view n) {
  if (n.empty()) {
    return false;
  }
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) {
      return false;
    }
  }
  return true;
}

bool valid_label_name(std::string_view n) {
  if (n.empty() || n.starts_with("__")) {
    return false;
  }
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) {
      return false;
    }
  }
  return true;
}

std::string_view type_name(Type t) {
  switch (t) {
    case Type::counter:
      return "counter";
    case Type::gauge:
      return "gauge";
    case Type::histogram:
      return "histogram";
  }
  return "untyped";
}

// Appends v escaped as a label value (backslash, double quote, newline).
void append_escaped_label(std::string& out, std::string_view v) {
  for (char c : v) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

// `a="x",b="y"` for one series: rendered once, reused for each of its lines.
std::string label_pairs(const std::vector<std::string>& names, const Labels& values) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) {
      out += ',';
    }
    out += names[i];
    out += "=\"";
    append_escaped_label(out, values[i]);
    out += '"';
  }
  return out;
}

void append_value(std::string& out, double v) {
  if (std::isfinite(v)) {
    fmt::format_to(std::back_inserter(out), "{}", v);
  } else {
    out += format_value(v);
  }
}

// `name{pairs,le="x"} value` and a newline; integer values skip float formatting.
template <class V>
void append_sample(std::string& out, std::string_view name, std::string_view pairs, V v,
                   std::string_view le = {}) {
  out += name;
  if (!pairs.empty() || !le.empty()) {
    out += '{';
    out += pairs;
    if (!le.empty()) {
      if (!pairs.empty()) {
        out += ',';
      }
      out += "le=\"";
      out += le;
      out += '"';
    }
    out += '}';
  }
  out += ' ';
  if constexpr (std::is_integral_v<V>) {
    fmt::format_to(std::back_inserter(out), "{}", v);
  } else {
    append_value(out, v);
  }
  out += '\n';
}

void check_buckets(const std::string& name, std::vector<double>& b) {
  if (!b.empty() && std::isinf(b.back()) && b.back() > 0) {
    b.pop_back();  // +Inf is always implied
  }
  for (size_t i = 0; i < b.size(); ++i) {
    if (!std::isfinite(b[i])) {
      die(name, "bucket bounds must be finite (+Inf is implied)");
    }
    if (i > 0 && !(b[i] > b[i - 1])) {
      die(name, "bucket bounds must be strictly increasing");
    }
  }
}

template <class Cell>
using Snapshot = std::vector<std::pair<Labels, std::shared_ptr<Cell>>>;

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Values and escaping

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  append_escaped_label(out, v);
  return out;
}

std::string escape_help(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) {
    return "NaN";
  }
  if (std::isinf(v)) {
    return v > 0 ? "+Inf" : "-Inf";
  }
  return fmt::format("{}", v);
}

std::vector<double> default_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

namespace {

// A bound computed by float arithmetic carries rounding noise (0.1 + 2 * 0.1 is
// 0.30000000000000004). Rounded to 15 significant digits (any decimal of up to 15 digits survives
// a trip through a double) it is the decimal the caller meant: the bucket then compares against
// 0.3 and prints le="0.3".
double decimal_bound(double v) {
  if (!std::isfinite(v)) {
    return v;
  }
  char buf[32];
  const auto printed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 15);
  double out = v;
  if (printed.ec == std::errc{}) {
    std::from_chars(buf, printed.ptr, out);
  }
  return out;
}

}  // namespace

std::vector<double> exponential_buckets(double start, double factor, size_t count) {
  std::vector<double> b;
  double v = start;
  for (size_t i = 0; i < count; ++i) {
    b.push_back(decimal_bound(v));
    v *= factor;
  }
  return b;
}

std::vector<double> linear_buckets(double start, double width, size_t count) {
  std::vector<double> b;
  for (size_t i = 0; i < count; ++i) {
    b.push_back(decimal_bound(start + width * static_cast<double>(i)));
  }
  return b;
}

// ---------------------------------------------------------------------------------------------------
// Handles

void Counter::add(double v) const {
  if (!cell_ || !(v >= 0)) {
    return;
  }
  double whole = std::floor(v);
  if (whole >= 1 && whole < 9e15) {
    cell_->whole.fetch_add(static_cast<uint64_t>(whole), std::memory_order_relaxed);
    v -= whole;
  }
  if (v > 0) {
    cell_->fraction.fetch_add(v, std::memory_order_relaxed);
  }
}

double Counter::value() const {
  if (!cell_) {
    return 0;
  }
  return static_cast<double>(cell_->whole.load(std::memory_order_relaxed)) +
         cell_->fraction.load(std::memory_order_relaxed);
}

detail::HistogramCell::HistogramCell(const std::vector<double>* b)
    : bounds(b), counts(new std::atomic<uint64_t>[b->size() + 1]) {
  for (size_t i = 0; i <= b->size(); ++i) {
    counts[i].store(0, std::memory_order_relaxed);
  }
}

void Histogram::observe(double v) const {
  if (!cell_ || std::isnan(v)) {
    return;
  }
  const std::vector<double>& b = *cell_->bounds;
  // Buckets are few (tens): a linear scan beats binary search on branch prediction.
  size_t i = 0;
  while (i < b.size() && v > b[i]) {
    ++i;
  }
  cell_->counts[i].fetch_add(1, std::memory_order_relaxed);
  cell_->sum.fetch_add(v, std::memory_order_relaxed);
}

uint64_t Histogram::count() const {
  if (!cell_) {
    return 0;
  }
  uint64_t n = 0;
  for (size_t i = 0; i <= cell_->bounds->size(); ++i) {
    n += cell_->counts[i].load(std::memory_order_relaxed);
  }
  return n;
}

double Histogram::sum() const {
  return cell_ ? cell_->sum.load(std::memory_order_relaxed) : 0.0;
}

// ---------------------------------------------------------------------------------------------------
// Family

template <class H, class C>
size_t Family<H, C>::LabelsHash::operator()(const Labels& l) const {
  size_t h = 0xcbf29ce484222325ULL;
  for (const auto& s : l) {
    h ^= std::hash<std::string>{}(s) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  }
  return h;
}

template <class H, class C>
Family<H, C>::Family(Registry* registry, std::string name, std::string help,
                     std::vector<std::string> label_names, FamilyOptions options, std::vector<double> bounds)
    : registry_(registry),
      name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      options_(options),
      bounds_(std::move(bounds)) {
  if (label_names_.empty()) {
    series_.emplace(Labels{}, make_cell());  // a label-less family always exports its one series
  }
}

template <class H, class C>
std::shared_ptr<C> Family<H, C>::make_cell() const {
  if constexpr (std::is_same_v<C, detail::HistogramCell>) {
    return std::make_shared<C>(&bounds_);
  } else {
    return std::make_shared<C>();
  }
}

template <class H, class C>
H Family<H, C>::with(const Labels& values) {
  if (values.size() != label_names_.size()) {
    die(name_,
        fmt::format("with() got {} label values for {} label names", values.size(), label_names_.size()));
  }
  {
    std::shared_lock lock(mu_);
    if (auto it = series_.find(values); it != series_.end()) {
      return H(it->second);
    }
  }
  bool dropped = false;
  std::shared_ptr<C> cell;
  {
    std::unique_lock lock(mu_);
    if (auto it = series_.find(values); it != series_.end()) {
      return H(it->second);
    }
    if (series_.size() < options_.max_series) {
      cell = make_cell();
      series_.emplace(values, cell);
    } else {
      if (!overflow_) {
        overflow_ = make_cell();
      }
      cell = overflow_;
      dropped = true;
    }
  }
  if (dropped) {
    registry_->count_dropped(name_);
  }
  return H(std::move(cell));
}

template <class H, class C>
void Family<H, C>::remove(const Labels& values) {
  std::unique_lock lock(mu_);
  series_.erase(values);
}

template <class H, class C>
void Family<H, C>::clear() {
  std::unique_lock lock(mu_);
  series_.clear();
  overflow_.reset();
  if (label_names_.empty()) {
    series_.emplace(Labels{}, make_cell());
  }
}

template <class H, class C>
size_t Family<H, C>::series_count() const {
  std::shared_lock lock(mu_);
  return series_.size();
}

template class Family<Counter, detail::CounterCell>;
template class Family<Gauge, detail::GaugeCell>;
template class Family<Histogram, detail::HistogramCell>;

// ---------------------------------------------------------------------------------------------------
// Registry

Registry::Registry() {
  dropped_ = &counter(std::string(kDroppedName),
                      "Label sets refused because their family reached its series limit; their samples went "
                      "to the family's _overflow series.",
                      {"family"});
}

Registry::~Registry() = default;

Registry::Entry& Registry::register_family(Type type, const std::string& name,
                                           const std::vector<std::string>& label_names,
                                           const std::vector<double>& buckets) {
  if (!valid_metric_name(name)) {
    die(name, "not a valid Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)");
  }
  std::set<std::string_view> seen;
  for (const auto& l : label_names) {
    if (!valid_label_name(l)) {
      die(name, fmt::format("label name '{}' is not valid ([a-zA-Z_][a-zA-Z0-9_]*, no leading __)", l));
    }
    if (type == Type::histogram && l == "le") {
      die(name, "label name 'le' is reserved for histogram buckets");
    }
    if (!seen.insert(l).second) {
      die(name, fmt::format("label name '{}' appears twice", l));
    }
  }
  auto it = families_.find(name);
  if (it == families_.end()) {
    return families_[name];
  }
  Entry& e = it->second;
  const std::vector<std::string>* existing_labels = nullptr;
  const std::vector<double>* existing_bounds = nullptr;
  if (e.counter) {
    existing_labels = &e.counter->label_names();
  } else if (e.gauge) {
    existing_labels = &e.gauge->label_names();
  } else if (e.histogram) {
    existing_labels = &e.histogram->label_names();
    existing_bounds = &e.histogram->bounds_;
  }
  if (e.type != type || existing_labels == nullptr || *existing_labels != label_names ||
      (existing_bounds != nullptr && *existing_bounds != buckets)) {
    die(name, "already registered with another type, label names or buckets");
  }
  return e;
}

CounterFamily& Registry::counter(std::string name, std::string help, std::vector<std::string> label_names,
                                 FamilyOptions options) {
  std::lock_guard lock(mu_);
  Entry& e = register_family(Type::counter, name, label_names, {});
  if (!e.counter) {
    e.type = Type::counter;
    e.counter = std::make_unique<CounterFamily>(this, std::move(name), std::move(help),
                                                std::move(label_names), options);
  }
  return *e.counter;
}

GaugeFamily& Registry::gauge(std::string name, std::string help, std::vector<std::string> label_names,
                             FamilyOptions options) {
  std::lock_guard lock(mu_);
  Entry& e = register_family(Type::gauge, name, label_names, {});
  if (!e.gauge) {
    e.type = Type::gauge;
    e.gauge = std::make_unique<GaugeFamily>(this, std::move(name), std::move(help), std::move(label_names),
                                            options);
  }
  return *e.gauge;
}

HistogramFamily& Registry::histogram(std::string name, std::string help, std::vector<std::string> label_names,
                                     std::vector<double> buckets, FamilyOptions options) {
  check_buckets(name, buckets);
  std::lock_guard lock(mu_);
  Entry& e = register_family(Type::histogram, name, label_names, buckets);
  if (!e.histogram) {
    e.type = Type::histogram;
    e.histogram = std::make_unique<HistogramFamily>(this, std::move(name), std::move(help),
                                                    std::move(label_names), options, std::move(buckets));
  }
  return *e.histogram;
}

void Registry::count_dropped(const std::string& family) {
  if (family == kDroppedName) {
    return;  // its own overflow is already bounded; counting it would recurse
  }
  dropped_->with({family}).inc();
}

uint64_t Registry::add_collect_callback(std::function<void()> fn) {
  std::lock_guard lock(collect_mu_);
  uint64_t id = next_callback_id_++;
  callbacks_.emplace(id, std::move(fn));
  return id;
}

void Registry::remove_collect_callback(uint64_t id) {
  std::lock_guard lock(collect_mu_);
  callbacks_.erase(id);
}

namespace {

// Sorts a family's series by label values; the overflow series, if any, goes last whatever its
// label values would sort as: it is the odd one out.
template <class C>
void sort_with_overflow(Snapshot<C>& series, size_t label_count, std::shared_ptr<C> overflow) {
  std::sort(series.begin(), series.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (overflow) {
    series.emplace_back(Labels(label_count, std::string(kOverflowValue)), std::move(overflow));
  }
}

void render_header(std::string& out, const std::string& name, const std::string& help, Type type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += escape_help(help);
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type_name(type);
  out += '\n';
}

}  // namespace

std::string Registry::render() {
  std::lock_guard collect_lock(collect_mu_);
  for (auto& [id, fn] : callbacks_) {
    fn();
  }
  std::vector<Entry*> entries;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, e] : families_) {
      entries.push_back(&e);  // families are never removed: the pointers stay valid
    }
  }
  std::string out;
  out.reserve(4096);
  auto take = [](auto& fam, auto& result) {
    std::shared_lock lock(fam.mu_);
    result.reserve(fam.series_.size() + 1);
    for (const auto& [labels, cell] : fam.series_) {
      result.emplace_back(labels, cell);
    }
    return fam.overflow_;
  };
  for (Entry* e : entries) {
    if (e->counter) {
      CounterFamily& f = *e->counter;
      Snapshot<detail::CounterCell> s;
      sort_with_overflow(s, f.label_names().size(), take(f, s));
      render_header(out, f.name(), f.help(), Type::counter);
      for (const auto& [labels, cell] : s) {
        double fraction = cell->fraction.load(std::memory_order_relaxed);
        uint64_t whole = cell->whole.load(std::memory_order_relaxed);
        if (fraction == 0) {
          append_sample(out, f.name(), label_pairs(f.label_names(), labels), whole);
        } else {
          append_sample(out, f.name(), label_pairs(f.label_names(), labels),
                        static_cast<double>(whole) + fraction);
        }
      }
    } else if (e->gauge) {
      GaugeFamily& f = *e->gauge;
      Snapshot<detail::GaugeCell> s;
      sort_with_overflow(s, f.label_names().size(), take(f, s));
      render_header(out, f.name(), f.help(), Type::gauge);
      for (const auto& [labels, cell] : s) {
        append_sample(out, f.name(), label_pairs(f.label_names(), labels),
                      cell->value.load(std::memory_order_relaxed));
      }
    } else if (e->histogram) {
      HistogramFamily& f = *e->histogram;
      Snapshot<detail::HistogramCell> s;
      sort_with_overflow(s, f.label_names().size(), take(f, s));
      render_header(out, f.name(), f.help(), Type::histogram);
      const std::string bucket = f.name() + "_bucket";
      const std::string sum = f.name() + "_sum";
      const std::string count = f.name() + "_count";
      std::vector<std::string> le;
      le.reserve(f.bounds_.size());
      for (double bound : f.bounds_) {
        le.push_back(format_value(bound));
      }
      for (const auto& [labels, cell] : s) {
        const std::string pairs = label_pairs(f.label_names(), labels);
        // _count is the cumulative total, so it always equals the +Inf bucket even while
        // observations race with the scrape.
        uint64_t cumulative = 0;
        for (size_t i = 0; i < f.bounds_.size(); ++i) {
          cumulative += cell->counts[i].load(std::memory_order_relaxed);
          append_sample(out, bucket, pairs, cumulative, le[i]);
        }
        cumulative += cell->counts[f.bounds_.size()].load(std::memory_order_relaxed);
        append_sample(out, bucket, pairs, cumulative, "+Inf");
        append_sample(out, sum, pairs, cell->sum.load(std::memory_order_relaxed));
        append_sample(out, count, pairs, cumulative);
      }
    }
  }
  return out;
}

}  // namespace cgn::metrics
