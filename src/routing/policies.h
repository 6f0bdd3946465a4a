// Routing policies by name. A policy decides the order of the candidates that passed the
// eligibility filters and the load guard (RoutingCore::decide, router_core.h): it fills one sort
// key per candidate, and the core sorts by them. The registry maps the names operators write
// (`[router] policy`, the etcd policy key, `cgn-router --policy`, `cgn-bench sim --policies`) to
// the policy objects; RoutingPolicy (policy.h) holds a pointer to the chosen one, so a decision
// never looks a name up. How to add a policy: docs/architecture/routing.md.
//
// Thread-safety: policies are stateless (what they keep between decisions, the round-robin
// counter and the RNG, is the core's, handed in through RankInput); the built-in registry is
// filled once on first use and read-only afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "routing/router_core.h"

namespace cgn::routing {

// What a policy sees of one decision. `candidates` are in node-index order.
struct RankInput {
  const RouteRequest& request;
  std::span<const Candidate> candidates;
  const RoutingCore& core;  // node_id_hash(), index()
  Rng& rng;                 // the core's seeded RNG: the benchmark replays the same choices
  uint64_t& round_robin;    // the core's round-robin counter
  double tie_epsilon_s;     // estimates closer than this are ties

  // v in units of tie_epsilon_s (saturating): equal buckets are ties.
  int64_t bucket(double v) const;
};

class Policy {
 public:
  struct Traits {
    // The load guard's spread rule compares waiting(n) (requests before their first token)
    // rather than load(n): only for a policy whose score already charges decoding requests
    // (LoadGuard, policy.h).
    bool guard_compares_waiting = false;
    // The first choice is sampled (softmax over Candidate::cost with temperature_s) rather
    // than taken: only for a policy that ranks by cost.
    bool samples_first_choice = false;
  };

  Policy(std::string name, Traits traits) : name_(std::move(name)), traits_(traits) {}
  virtual ~Policy() = default;
  Policy(const Policy&) = delete;
  Policy& operator=(const Policy&) = delete;

  const std::string& name() const { return name_; }
  const Traits& traits() const { return traits_; }

  // The policy that ranks `request`: this one, or another it falls back to (session without a
  // session key: kv).
  virtual const Policy& for_request(const RouteRequest& /*request*/) const { return *this; }
  // Appends one key per candidate, in order (RankKey::i = the candidate's position); the core
  // sorts them ascending. Called only with two or more candidates.
  virtual void sort_keys(const RankInput& in, std::vector<RankKey>& keys) const = 0;

 private:
  std::string name_;
  Traits traits_;
};

enum class PolicyError : uint8_t { kUnknown, kInvalid };

class PolicyRegistry {
 public:
  // Adds a policy; an empty name or a second policy of the same name is kInvalid.
  Status<PolicyError> add(std::unique_ptr<Policy> policy);
  // The policy called `name`, or kUnknown naming it and the registered ones.
  Result<const Policy*, PolicyError> find(std::string_view name) const;
  // In registration order.
  std::vector<std::string_view> names() const;
  std::vector<const Policy*> all() const;

 private:
  std::vector<std::unique_ptr<Policy>> policies_;
};

// kv, round_robin, random, least_load, session (policies.cpp); one line there adds a policy.
const PolicyRegistry& builtin_policies();
// builtin_policies().find(name).
Result<const Policy*, PolicyError> find_policy(std::string_view name);
// A built-in policy named in code (defaults, tests); nullptr when there is none of that name.
const Policy* builtin_policy(std::string_view name);

}  // namespace cgn::routing
