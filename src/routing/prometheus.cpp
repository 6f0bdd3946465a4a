#include "routing/prometheus.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace cgn::routing {

std::string_view to_string(PromError e) {
  switch (e) {
    case PromError::kTooLarge:
      return "too_large";
    case PromError::kTooManyLines:
      return "too_many_lines";
    case PromError::kLineTooLong:
      return "line_too_long";
    case PromError::kTooManySamples:
      return "too_many_samples";
    case PromError::kSyntax:
      return "syntax";
    case PromError::kLimit:
      return "limit";
  }
  return "syntax";
}

const std::string* PromSample::label(std::string_view name) const {
  for (const auto& l : labels) {
    if (l.name == name) {
      return &l.value;
    }
  }
  return nullptr;
}

namespace {

bool name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool name_char(char c) {
  return name_start(c) || (c >= '0' && c <= '9');
}
bool label_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool label_char(char c) {
  return label_start(c) || (c >= '0' && c <= '9');
}
bool blank(char c) {
  return c == ' ' || c == '\t';
}

// A cursor over one line.
struct Line {
  std::string_view s;
  size_t i = 0;

  bool done() const { return i >= s.size(); }
  char peek() const { return done() ? '\0' : s[i]; }
  void skip_blanks() {
    while (!done() && blank(s[i])) {
      ++i;
    }
  }
  std::string_view token() {
    const size_t b = i;
    while (!done() && !blank(s[i])) {
      ++i;
    }
    return s.substr(b, i - b);
  }
};

class Parser {
 public:
  Parser(const PromLimits& limits, PromDocument& doc) : limits_(limits), doc_(doc) {}

  Result<Ok, PromError> line(std::string_view text, size_t number) {
    number_ = number;
    Line l{text};
    l.skip_blanks();
    if (l.done()) {
      return Ok{};
    }
    if (l.peek() == '#') {
      return comment(l);
    }
    return sample(l);
  }

 private:
  Error<PromError> fail(PromError code, std::string_view what) const {
    return make_error(code, "line " + std::to_string(number_) + ": " + std::string(what));
  }

  Result<Ok, PromError> comment(Line& l) {
    ++l.i;  // '#'
    l.skip_blanks();
    const std::string_view kw = l.token();
    if (kw != "TYPE") {
      return Ok{};  // HELP, EOF and free comments carry nothing we need
    }
    l.skip_blanks();
    const std::string_view name = l.token();
    if (name.empty() || name.size() > limits_.max_name_bytes || !valid_name(name)) {
      return fail(PromError::kSyntax, "bad metric name in # TYPE");
    }
    l.skip_blanks();
    const std::string_view type = l.token();
    PromType t;
    if (type == "counter") {
      t = PromType::kCounter;
    } else if (type == "gauge") {
      t = PromType::kGauge;
    } else if (type == "histogram" || type == "gaugehistogram") {
      t = PromType::kHistogram;
    } else if (type == "summary") {
      t = PromType::kSummary;
    } else if (type == "untyped" || type == "unknown" || type == "info" || type == "stateset") {
      t = PromType::kUntyped;
    } else {
      return fail(PromError::kSyntax, "unknown metric type in # TYPE");
    }
    if (doc_.families.size() >= limits_.max_samples) {
      return fail(PromError::kTooManySamples, "too many metric families");
    }
    doc_.families.push_back(PromFamily{std::string(name), t});
    return Ok{};
  }

  static bool valid_name(std::string_view n) {
    if (n.empty() || !name_start(n[0])) {
      return false;
    }
    for (char c : n) {
      if (!name_char(c)) {
        return false;
      }
    }
    return true;
  }

  Result<Ok, PromError> sample(Line& l) {
    if (doc_.samples.size() >= limits_.max_samples) {
      return fail(PromError::kTooManySamples,
                  "more than " + std::to_string(limits_.max_samples) + " samples");
    }
    PromSample s;
    const size_t b = l.i;
    if (!name_start(l.peek())) {
      return fail(PromError::kSyntax, "expected a metric name");
    }
    while (!l.done() && name_char(l.peek())) {
      ++l.i;
    }
    if (l.i - b > limits_.max_name_bytes) {
      return fail(PromError::kLimit, "metric name too long");
    }
    s.name.assign(l.s.substr(b, l.i - b));
    size_t before = l.i;
    l.skip_blanks();
    if (l.peek() == '{') {
      ++l.i;
      auto r = labels(l, s);
      if (!r.ok()) {
        return r;
      }
      before = l.i;
      l.skip_blanks();
    }
    if (l.i == before || l.done()) {
      return fail(PromError::kSyntax, "expected a blank and a value after the metric name");
    }
    auto v = parse_value(l.token());
    if (!v) {
      return fail(PromError::kSyntax, "bad sample value");
    }
    s.value = *v;
    l.skip_blanks();
    if (!l.done()) {
      const std::string_view ts = l.token();
      int64_t t = 0;
      auto [p, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), t);
      if (ec != std::errc() || p != ts.data() + ts.size()) {
        return fail(PromError::kSyntax, "bad timestamp");
      }
      s.timestamp_ms = t;
      l.skip_blanks();
      if (!l.done()) {
        return fail(PromError::kSyntax, "trailing text after the timestamp");
      }
    }
    doc_.samples.push_back(std::move(s));
    return Ok{};
  }

  Result<Ok, PromError> labels(Line& l, PromSample& s) {
    for (;;) {
      l.skip_blanks();
      if (l.peek() == '}') {
        ++l.i;
        return Ok{};
      }
      if (s.labels.size() >= limits_.max_labels) {
        return fail(PromError::kLimit, "more than " + std::to_string(limits_.max_labels) + " labels");
      }
      const size_t b = l.i;
      if (!label_start(l.peek())) {
        return fail(PromError::kSyntax, "expected a label name");
      }
      while (!l.done() && label_char(l.peek())) {
        ++l.i;
      }
      if (l.i - b > limits_.max_name_bytes) {
        return fail(PromError::kLimit, "label name too long");
      }
      PromLabel lab;
      lab.name.assign(l.s.substr(b, l.i - b));
      l.skip_blanks();
      if (l.peek() != '=') {
        return fail(PromError::kSyntax, "expected '=' after a label name");
      }
      ++l.i;
      l.skip_blanks();
      if (l.peek() != '"') {
        return fail(PromError::kSyntax, "expected a quoted label value");
      }
      ++l.i;
      for (;;) {
        if (l.done()) {
          return fail(PromError::kSyntax, "unterminated label value");
        }
        char c = l.s[l.i++];
        if (c == '"') {
          break;
        }
        if (c == '\\') {
          if (l.done()) {
            return fail(PromError::kSyntax, "unterminated escape");
          }
          const char e = l.s[l.i++];
          c = e == 'n' ? '\n' : e;  // \\ and \" stand for themselves; others are kept verbatim
          if (e != 'n' && e != '\\' && e != '"') {
            lab.value.push_back('\\');
          }
        }
        if (lab.value.size() >= limits_.max_label_value_bytes) {
          return fail(PromError::kLimit, "label value too long");
        }
        lab.value.push_back(c);
      }
      s.labels.push_back(std::move(lab));
      l.skip_blanks();
      if (l.peek() == ',') {
        ++l.i;
        continue;
      }
      if (l.peek() == '}') {
        ++l.i;
        return Ok{};
      }
      return fail(PromError::kSyntax, "expected ',' or '}' in labels");
    }
  }

  static std::optional<double> parse_value(std::string_view t) {
    if (t.empty()) {
      return std::nullopt;
    }
    if (t == "+Inf" || t == "Inf" || t == "+inf" || t == "inf") {
      return std::numeric_limits<double>::infinity();
    }
    if (t == "-Inf" || t == "-inf") {
      return -std::numeric_limits<double>::infinity();
    }
    if (t == "NaN" || t == "nan") {
      return std::numeric_limits<double>::quiet_NaN();
    }
    if (t.front() == '+') {
      t.remove_prefix(1);
    }
    double v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || p != t.data() + t.size()) {
      return std::nullopt;
    }
    return v;
  }

  const PromLimits& limits_;
  PromDocument& doc_;
  size_t number_ = 0;
};

}  // namespace

Result<PromDocument, PromError> parse_prometheus_text(std::string_view text, const PromLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return make_error(PromError::kTooLarge, "metrics page of " + std::to_string(text.size()) +
                                                " bytes exceeds " + std::to_string(limits.max_bytes));
  }
  PromDocument doc;
  Parser parser(limits, doc);
  size_t number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    if (number > limits.max_lines) {
      return make_error(PromError::kTooManyLines, "more than " + std::to_string(limits.max_lines) + " lines");
    }
    if (line.size() > limits.max_line_bytes) {
      return make_error(PromError::kLineTooLong, "line " + std::to_string(number) + " is longer than " +
                                                     std::to_string(limits.max_line_bytes) + " bytes");
    }
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (line == "# EOF") {
      break;
    }
    auto r = parser.line(line, number);
    if (!r.ok()) {
      return r.error();
    }
  }
  return doc;
}

}  // namespace cgn::routing
