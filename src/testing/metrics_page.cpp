#include "testing/metrics_page.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace cgn::testing {
namespace {

// Calls f(line) for each line of the page until f returns true.
template <class F>
bool any_line(std::string_view page, F&& f) {
  size_t pos = 0;
  while (pos < page.size()) {
    size_t end = page.find('\n', pos);
    if (end == std::string_view::npos) {
      end = page.size();
    }
    if (f(page.substr(pos, end - pos))) {
      return true;
    }
    pos = end + 1;
  }
  return false;
}

}  // namespace

std::optional<double> sample(std::string_view page, std::string_view series) {
  std::optional<double> out;
  any_line(page, [&](std::string_view line) {
    if (line.size() <= series.size() || line.substr(0, series.size()) != series ||
        line[series.size()] != ' ') {
      return false;
    }
    const std::string value(line.substr(series.size() + 1));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end != value.c_str()) {
      out = v;
    }
    return true;
  });
  return out;
}

double metric(std::string_view page, std::string_view series) {
  return sample(page, series).value_or(std::numeric_limits<double>::quiet_NaN());
}

std::optional<double> first_sample(std::string_view page, std::string_view name) {
  std::optional<double> out;
  any_line(page, [&](std::string_view line) {
    if (line.size() <= name.size() || line.substr(0, name.size()) != name ||
        (line[name.size()] != ' ' && line[name.size()] != '{')) {
      return false;
    }
    const size_t space = line[name.size()] == ' ' ? name.size() : line.find("} ", name.size()) + 1;
    if (space == 0 || space >= line.size()) {
      return false;
    }
    out = sample(line, line.substr(0, space));
    return out.has_value();
  });
  return out;
}

bool declares_family(std::string_view page, std::string_view family) {
  return any_line(page, [&](std::string_view line) {
    constexpr std::string_view kType = "# TYPE ";
    return line.size() > kType.size() + family.size() && line.substr(0, kType.size()) == kType &&
           line.substr(kType.size(), family.size()) == family && line[kType.size() + family.size()] == ' ';
  });
}

double count_or_zero(std::string_view page, std::string_view series) {
  if (auto v = sample(page, series)) {
    return *v;
  }
  std::string_view name = series.substr(0, series.find('{'));
  if (declares_family(page, name)) {
    return 0;
  }
  for (std::string_view suffix : {"_total", "_count", "_sum", "_bucket"}) {
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix &&
        declares_family(page, name.substr(0, name.size() - suffix.size()))) {
      return 0;
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace cgn::testing
