#include "routing/policies.h"

#include <fmt/format.h>

#include <cmath>

namespace cgn::routing {

int64_t RankInput::bucket(double v) const {
  const double q = std::floor(v / tie_epsilon_s);
  return q >= 9.0e18 ? INT64_MAX : static_cast<int64_t>(q);
}

namespace {

// Lowest cost (Candidate::cost: the TTFT estimate with uncached prefill weighted), the first
// choice sampled with temperature_s.
class KvPolicy final : public Policy {
 public:
  KvPolicy() : Policy("kv", {.guard_compares_waiting = true, .samples_first_choice = true}) {}
  void sort_keys(const RankInput& in, std::vector<RankKey>& keys) const override {
    // Equal estimates go first to the node whose overlap rests on fewer guesses: a node that
    // confirmed the prefix (live KV prefixes) outranks one the router only sent it to. Without
    // this, a request dispatched between a node's withdrawal of a prefix and another node's
    // confirmation of it re-records a guess on the first node that ties the confirmation, and
    // every request it wins refreshes the guess, so routing never follows the prefix.
    // Then (typically a new prefix on idle nodes) to the node holding the fewest index entries,
    // so new tenants spread over the fleet's KV instead of piling where the dice fell (SGLang's
    // cache-aware router sends low-match requests to the smallest tree the same way); random
    // among nodes holding equally many.
    const auto& c = in.candidates;
    for (uint32_t i = 0; i < c.size(); ++i) {
      const uint64_t held =
          std::min<uint64_t>(in.core.index().node_entries(c[i].node), (uint64_t{1} << 39) - 1);
      keys.push_back(
          RankKey{in.bucket(c[i].cost), c[i].guessed_blocks, (held << 24) | (in.rng.next() >> 40), i});
    }
  }
};

// Fewest requests (Candidate::load), random among equals.
class LeastLoadPolicy final : public Policy {
 public:
  LeastLoadPolicy() : Policy("least_load", {}) {}
  void sort_keys(const RankInput& in, std::vector<RankKey>& keys) const override {
    for (uint32_t i = 0; i < in.candidates.size(); ++i) {
      keys.push_back(RankKey{in.bucket(in.candidates[i].load), 0, in.rng.next(), i});
    }
  }
};

class RandomPolicy final : public Policy {
 public:
  RandomPolicy() : Policy("random", {}) {}
  void sort_keys(const RankInput& in, std::vector<RankKey>& keys) const override {
    for (uint32_t i = 0; i < in.candidates.size(); ++i) {
      keys.push_back(RankKey{0, 0, in.rng.next(), i});
    }
  }
};

class RoundRobinPolicy final : public Policy {
 public:
  RoundRobinPolicy() : Policy("round_robin", {}) {}
  void sort_keys(const RankInput& in, std::vector<RankKey>& keys) const override {
    // Candidates are in node-index order; start at the counter and go round.
    const size_t n = in.candidates.size();
    const uint64_t start = in.round_robin++ % n;
    for (uint32_t i = 0; i < n; ++i) {
      keys.push_back(RankKey{static_cast<int64_t>((i + n - start) % n), 0, 0, i});
    }
  }
};

// The same session key to the same node; a request without one is ranked by `fallback` (kv).
class SessionPolicy final : public Policy {
 public:
  explicit SessionPolicy(const Policy& fallback) : Policy("session", {}), fallback_(fallback) {}
  const Policy& for_request(const RouteRequest& request) const override {
    return request.session_key.empty() ? fallback_ : *this;
  }
  void sort_keys(const RankInput& in, std::vector<RankKey>& keys) const override {
    // Rendezvous hashing: each node's weight for this key; a node joining or leaving moves
    // only the sessions it wins or held.
    const uint64_t key = stable_hash(in.request.session_key);
    for (uint32_t i = 0; i < in.candidates.size(); ++i) {
      const uint64_t w = mix64(key ^ in.core.node_id_hash(in.candidates[i].node));
      keys.push_back(RankKey{0, 0, ~w, i});
    }
  }

 private:
  const Policy& fallback_;
};

PolicyRegistry make_builtin_policies() {
  PolicyRegistry r;
  auto kv = std::make_unique<KvPolicy>();
  const Policy& kv_ref = *kv;
  (void)r.add(std::move(kv));
  (void)r.add(std::make_unique<RoundRobinPolicy>());
  (void)r.add(std::make_unique<RandomPolicy>());
  (void)r.add(std::make_unique<LeastLoadPolicy>());
  (void)r.add(std::make_unique<SessionPolicy>(kv_ref));
  return r;
}

}  // namespace

Status<PolicyError> PolicyRegistry::add(std::unique_ptr<Policy> policy) {
  if (!policy || policy->name().empty()) {
    return make_error(PolicyError::kInvalid, "a routing policy needs a name");
  }
  for (const auto& p : policies_) {
    if (p->name() == policy->name()) {
      return make_error(PolicyError::kInvalid,
                        fmt::format("routing policy \"{}\" is registered twice", policy->name()));
    }
  }
  policies_.push_back(std::move(policy));
  return Ok{};
}

Result<const Policy*, PolicyError> PolicyRegistry::find(std::string_view name) const {
  for (const auto& p : policies_) {
    if (p->name() == name) {
      return p.get();
    }
  }
  return make_error(
      PolicyError::kUnknown,
      fmt::format("routing policy \"{}\" is not registered; registered: {}", name, fmt::join(names(), ", ")));
}

std::vector<std::string_view> PolicyRegistry::names() const {
  std::vector<std::string_view> out;
  out.reserve(policies_.size());
  for (const auto& p : policies_) {
    out.emplace_back(p->name());
  }
  return out;
}

std::vector<const Policy*> PolicyRegistry::all() const {
  std::vector<const Policy*> out;
  out.reserve(policies_.size());
  for (const auto& p : policies_) {
    out.push_back(p.get());
  }
  return out;
}

const PolicyRegistry& builtin_policies() {
  static const PolicyRegistry registry = make_builtin_policies();
  return registry;
}

Result<const Policy*, PolicyError> find_policy(std::string_view name) {
  return builtin_policies().find(name);
}

const Policy* builtin_policy(std::string_view name) {
  auto p = builtin_policies().find(name);
  return p ? *p : nullptr;
}

const Policy* default_policy() {
  static const Policy* const kv = builtin_policy("kv");
  return kv;
}

}  // namespace cgn::routing
