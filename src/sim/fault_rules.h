// Fault rules: which requests get which fault, read from a file (cgn-engine-sim --fault-rules FILE,
// or --sim-fault-rules FILE on an engine launch line). A test steers a simulator behind a router or
// an agent with it; a client of the router cannot reach it (the router forwards no X-Sim-Fault).
//
// One rule per line; blank lines and lines starting with '#' are ignored:
//   prompt:MARKER      SPEC     MARKER occurs in the request body
//   request_id:ID      SPEC     the request's X-Request-Id is ID (a trailing '*' matches a prefix)
// MARKER and ID: 1..128 bytes of letters, digits and - _ . : @ (a marker needs no JSON escaping,
// so it is found in the body exactly as it is in the prompt). SPEC: fault items as in faults.h,
// the per-request ones (error, drop_after, stall, slow_start, exit), separated by commas.
// The first matching rule applies; it overrides the --fault plan item by item, and an X-Sim-Fault
// header sent straight to the simulator overrides the rule.
// Bounds: the file at most 64 KiB, at most 256 rules, a line at most 2048 bytes. Errors name the
// file and line.
//
// Immutable after parsing; match() is safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "sim/faults.h"

namespace cgn::sim {

inline constexpr size_t kMaxFaultRulesBytes = 64 * 1024;
inline constexpr size_t kMaxFaultRules = 256;
inline constexpr size_t kMaxFaultRuleLineBytes = 2048;
inline constexpr size_t kMaxFaultPatternBytes = 128;

struct FaultRule {
  enum class On { kPrompt, kRequestId };
  On on = On::kPrompt;
  std::string pattern;
  bool prefix = false;  // request_id only: pattern ended in '*'
  FaultPlan plan;
};

class FaultRules {
 public:
  // `source` names the file in error messages ("rules.txt:3: ...").
  static Result<FaultRules, FaultError> parse(std::string_view text, std::string_view source);
  static Result<FaultRules, FaultError> load_file(const std::string& path);

  // The plan of the first rule that matches the request; null when none does.
  const FaultPlan* match(std::string_view request_id, std::string_view body) const;

  bool empty() const { return rules_.empty(); }
  size_t size() const { return rules_.size(); }
  const std::vector<FaultRule>& rules() const { return rules_; }

 private:
  std::vector<FaultRule> rules_;
};

}  // namespace cgn::sim
