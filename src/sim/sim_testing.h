// Test and benchmark helpers: drive one or more Engines in virtual time and
// resolve P/D pulls between them in-process (what the HTTP shell does over
// loopback). Header-only so tests and benchmarks share it.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/engine.h"

namespace cgn::sim::testing {

// A lightweight cluster of engines in one virtual time line.
class VirtualCluster {
 public:
  // Registers an engine under its config().engine_id (the name P/D params use).
  void add(Engine& e) { engines_[e.config().engine_id] = &e; }

  // Runs every engine until none has anything scheduled at or before `until`;
  // resolves KV pulls through claim_blocks on the named engine (unknown
  // engine id -> kUnknown). Returns the events, in time order per engine.
  std::vector<Event> run_until(Nanos until) {
    std::vector<Event> all;
    for (;;) {
      Engine* next = nullptr;
      Nanos t = kNever;
      for (auto& [id, e] : engines_) {
        const Nanos n = e->next_event_time();
        if (n < t) {
          t = n;
          next = e;
        }
      }
      if (next == nullptr || t > until) {
        break;
      }
      now_ = std::max(now_, t);
      next->advance_to(t);
      drain(*next, all);
    }
    return all;
  }
  std::vector<Event> run_to_idle() { return run_until(kNever - 1); }

  void drain(Engine& e, std::vector<Event>& all) {
    std::vector<Event> evs;
    e.take_events(evs);
    for (auto& ev : evs) {
      if (ev.kind == EventKind::kKvPull) {
        auto it = engines_.find(ev.pull->remote_engine_id);
        const ClaimStatus st =
            it == engines_.end()
                ? ClaimStatus::kUnknown
                : it->second->claim_blocks(ev.pull->remote_request_id, ev.pull->remote_block_ids, ev.time);
        pull_results_.push_back(st);
        e.complete_kv_pull(ev.handle, st, ev.time);
        std::vector<Event> more;
        e.take_events(more);
        for (auto& m : more) {
          all.push_back(std::move(m));
        }
      }
      all.push_back(std::move(ev));
    }
  }

  Nanos now() const { return now_; }
  const std::vector<ClaimStatus>& pull_results() const { return pull_results_; }

 private:
  std::map<std::string, Engine*> engines_;
  Nanos now_ = 0;
  std::vector<ClaimStatus> pull_results_;
};

// The kFinished completion of handle among events (nullptr if absent).
inline const Completion* find_completion(const std::vector<Event>& events, RequestHandle h) {
  for (const auto& e : events) {
    if (e.kind == EventKind::kFinished && e.handle == h) {
      return &*e.completion;
    }
  }
  return nullptr;
}

// n distinct tokens derived from a salt (a prompt that shares nothing with other salts).
inline std::vector<TokenId> make_prompt(uint32_t n, uint64_t salt) {
  std::vector<TokenId> v(n);
  for (uint32_t i = 0; i < n; ++i) {
    v[i] = static_cast<TokenId>(mix64(salt * 0x100000001b3ULL + i) % kTextVocab);
  }
  return v;
}

// prefix followed by suffix.
inline std::vector<TokenId> concat(const std::vector<TokenId>& prefix, const std::vector<TokenId>& suffix) {
  std::vector<TokenId> v = prefix;
  v.insert(v.end(), suffix.begin(), suffix.end());
  return v;
}

}  // namespace cgn::sim::testing
