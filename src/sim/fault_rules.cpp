#include "sim/fault_rules.h"

#include <fstream>

#include "core/text.h"

namespace cgn::sim {

namespace {

bool pattern_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.' || c == ':' || c == '@';
}

}  // namespace

Result<FaultRules, FaultError> FaultRules::parse(std::string_view text, std::string_view source) {
  const std::string src(source);
  if (text.size() > kMaxFaultRulesBytes) {
    return make_error(FaultError::kTooLong, src + ": larger than 64 KiB");
  }
  FaultRules out;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const std::string where = src + ":" + std::to_string(line_no) + ": ";
    if (raw.size() > kMaxFaultRuleLineBytes) {
      return make_error(FaultError::kTooLong, where + "line longer than 2048 bytes");
    }
    const std::string_view line = text::trim(raw, " \t\r");
    if (line.empty() || line.front() == '#') {
      continue;
    }
    if (out.rules_.size() >= kMaxFaultRules) {
      return make_error(FaultError::kTooLong, where + "more than 256 rules");
    }
    const size_t sp = line.find_first_of(" \t");
    const std::string_view match = line.substr(0, sp);
    const std::string_view spec =
        sp == std::string_view::npos ? std::string_view() : text::trim(line.substr(sp), " \t\r");
    FaultRule rule;
    std::string_view pattern;
    if (match.starts_with("prompt:")) {
      rule.on = FaultRule::On::kPrompt;
      pattern = match.substr(7);
    } else if (match.starts_with("request_id:")) {
      rule.on = FaultRule::On::kRequestId;
      pattern = match.substr(11);
      if (pattern.ends_with('*')) {
        rule.prefix = true;
        pattern.remove_suffix(1);
      }
    } else {
      return make_error(FaultError::kSyntax,
                        where + "expected 'prompt:MARKER SPEC' or 'request_id:ID SPEC', got '" +
                            std::string(match.substr(0, 64)) + "'");
    }
    if (pattern.empty() || pattern.size() > kMaxFaultPatternBytes) {
      return make_error(FaultError::kBadValue, where + "the marker or id must be 1..128 bytes");
    }
    for (char c : pattern) {
      if (!pattern_char(c)) {
        return make_error(FaultError::kBadValue,
                          where + "the marker or id may hold only letters, digits and - _ . : @");
      }
    }
    if (spec.empty()) {
      return make_error(FaultError::kSyntax, where + "no fault spec after '" + std::string(match) + "'");
    }
    auto plan = parse_fault_spec(spec, /*from_header=*/true);
    if (!plan) {
      return make_error(plan.error().code, where + plan.error().message);
    }
    if (plan->empty()) {
      return make_error(FaultError::kSyntax, where + "the fault spec names no fault");
    }
    rule.pattern = std::string(pattern);
    rule.plan = *plan;
    out.rules_.push_back(std::move(rule));
  }
  return out;
}

Result<FaultRules, FaultError> FaultRules::load_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_error(FaultError::kRead, "cannot read fault rules file " + path);
  }
  std::string text(kMaxFaultRulesBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return parse(text, path);
}

const FaultPlan* FaultRules::match(std::string_view request_id, std::string_view body) const {
  for (const FaultRule& r : rules_) {
    if (r.on == FaultRule::On::kPrompt) {
      if (body.find(r.pattern) != std::string_view::npos) {
        return &r.plan;
      }
    } else if (r.prefix ? request_id.starts_with(r.pattern) : request_id == r.pattern) {
      return &r.plan;
    }
  }
  return nullptr;
}

}  // namespace cgn::sim
