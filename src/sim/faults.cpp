#include "sim/faults.h"

#include <charconv>

#include "core/text.h"
#include "sim/tokenizer.h"

namespace cgn::sim {

namespace {

bool parse_u32(std::string_view s, uint32_t& out) {
  if (s.empty() || s.size() > 9) {
    return false;
  }
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parse_duration(std::string_view s, Nanos& out) {
  Nanos unit = 0;
  if (s.size() > 2 && s.substr(s.size() - 2) == "ms") {
    unit = kNanosPerMilli;
    s.remove_suffix(2);
  } else if (s.size() > 1 && s.back() == 's') {
    unit = kNanosPerSecond;
    s.remove_suffix(1);
  } else {
    return false;
  }
  uint32_t v = 0;
  if (!parse_u32(s, v) || v > 86'400'000) {
    return false;
  }
  out = static_cast<Nanos>(v) * unit;
  return true;
}

Error<FaultError> bad(std::string_view item, std::string_view why) {
  return make_error(FaultError::kBadValue, "fault item '" + std::string(item) + "': " + std::string(why));
}

}  // namespace

Result<FaultPlan, FaultError> parse_fault_spec(std::string_view spec, bool from_header) {
  if (spec.size() > kMaxFaultSpecBytes) {
    return make_error(FaultError::kTooLong, "fault spec is longer than 1024 bytes");
  }
  FaultPlan plan;
  size_t items = 0;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = text::trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (item.empty()) {
      continue;
    }
    if (++items > kMaxFaultItems) {
      return make_error(FaultError::kTooLong, "fault spec has more than 16 items");
    }
    const size_t eq = item.find('=');
    const std::string_view key = text::trim(item.substr(0, eq));
    const std::string_view val =
        eq == std::string_view::npos ? std::string_view() : text::trim(item.substr(eq + 1));
    if (key == "error") {
      uint32_t st = 0;
      if (!parse_u32(val, st) || (st != 429 && st != 500 && st != 503)) {
        return bad(item, "status must be 429, 500 or 503");
      }
      plan.error_status = static_cast<int>(st);
    } else if (key == "drop_after") {
      if (!parse_u32(val, plan.drop_after_events) || plan.drop_after_events == 0) {
        return bad(item, "expects a positive event count");
      }
    } else if (key == "stall") {
      const size_t at = val.find('@');
      if (!parse_duration(val.substr(0, at), plan.stall)) {
        return bad(item, "expects a duration like 500ms or 2s");
      }
      if (at != std::string_view::npos && !parse_u32(val.substr(at + 1), plan.stall_after_events)) {
        return bad(item, "expects @<event count>");
      }
    } else if (key == "slow_start") {
      if (!parse_duration(val, plan.slow_start)) {
        return bad(item, "expects a duration like 500ms or 2s");
      }
    } else if (key == "exit" && val.empty()) {
      plan.exit_process = true;
    } else if (key == "refuse" && val.empty()) {
      if (from_header) {
        return make_error(FaultError::kNotAllowedHere, "fault item 'refuse' is only valid as a flag");
      }
      plan.refuse_connections = true;
    } else if (key == "confidence") {
      double c = -1;
      auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), c);
      if (ec != std::errc() || p != val.data() + val.size() || !(c > 0.0 && c <= 1.0)) {
        return bad(item, "expects a confidence in (0, 1]");
      }
      plan.confidence = c;
    } else if (key == "rate") {
      if (from_header) {
        return make_error(FaultError::kNotAllowedHere, "fault item 'rate' is only valid as a flag");
      }
      double r = -1;
      auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), r);
      if (ec != std::errc() || p != val.data() + val.size() || !(r >= 0.0 && r <= 1.0)) {
        return bad(item, "expects a fraction in [0, 1]");
      }
      plan.rate = r;
    } else {
      return make_error(FaultError::kSyntax, "unknown fault item '" + std::string(item) + "'");
    }
  }
  return plan;
}

bool fault_applies(const FaultPlan& plan, std::string_view request_id) {
  if (plan.rate >= 1.0) {
    return true;
  }
  if (plan.rate <= 0.0) {
    return false;
  }
  uint64_t h = 0x6661756c74ULL;
  for (unsigned char c : request_id) {
    h = mix64(h ^ c);
  }
  return static_cast<double>(h >> 11) / 9007199254740992.0 < plan.rate;
}

FaultPlan merge_faults(const FaultPlan& flag, const FaultPlan& header) {
  FaultPlan out = flag;
  if (header.error_status != 0) {
    out.error_status = header.error_status;
  }
  if (header.drop_after_events != 0) {
    out.drop_after_events = header.drop_after_events;
  }
  if (header.stall != 0) {
    out.stall = header.stall;
    out.stall_after_events = header.stall_after_events;
  }
  if (header.slow_start != 0) {
    out.slow_start = header.slow_start;
  }
  if (header.confidence != 0) {
    out.confidence = header.confidence;
  }
  out.exit_process = flag.exit_process || header.exit_process;
  return out;
}

}  // namespace cgn::sim
