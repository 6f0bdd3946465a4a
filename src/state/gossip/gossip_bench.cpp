// Gossip benchmark: N simulated members in one process on an in-memory network with
// explicit time; every member ticks on its own phase of the 500 ms round, datagrams arrive
// instantly. Reports, per cluster size:
//   join      time until every member knows every other member (from 3 seeds)
//   converge  time until a new record version is held by every member (median and max of 5)
//   detect    time until every live member declares a killed member dead (median and max of 3)
//   bytes/s   sent per member in steady state, each member republishing its ~130-byte load part
//             every 2 s (as agents do after each scrape), and idle (heartbeats only)
// Targets at 100 members: detect <= 5 s, converge <= 2 s, <= 50 kB/s per member. The 10-member
// cluster, run first in the same process, is the baseline each larger size is compared with.
//
// Usage: bench_state_gossip [--sizes 10,100,1000] [--markdown]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "state/gossip/core.h"

namespace {

using namespace cgn;
using namespace cgn::gossip;

constexpr Nanos kMs = kNanosPerMilli;
constexpr Nanos kStep = 10 * kMs;

PeerAddr addr_of(size_t i) {
  std::array<uint8_t, 4> ip = {10, static_cast<uint8_t>(i >> 16), static_cast<uint8_t>(i >> 8),
                               static_cast<uint8_t>(i)};
  PeerAddr a;
  a.family = 4;
  std::copy(ip.begin(), ip.end(), a.bytes.begin());
  a.port = 7946;
  return a;
}

// Knobs for exploring (defaults = CoreOptions defaults).
Nanos g_interval = CoreOptions{}.gossip_interval;
size_t g_fanout = CoreOptions{}.fanout;

struct Sim {
  std::vector<std::unique_ptr<GossipCore>> cores;
  std::vector<Nanos> next_tick;
  std::vector<bool> down;
  std::map<PeerAddr, size_t> by_addr;
  Nanos now = 0;
  Nanos interval = g_interval;
  std::mt19937_64 rng{42};

  explicit Sim(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      CoreOptions o;
      o.name = "node-" + std::to_string(10000 + i);
      o.generation = 1'700'000'000'000'000'000ULL + i;
      o.advertise = addr_of(i);
      o.seed = i + 1;
      o.fanout = g_fanout;
      o.gossip_interval = g_interval;
      cores.push_back(std::make_unique<GossipCore>(o, now));
      cores.back()->set_seeds({addr_of(0), addr_of(1), addr_of(2)});
      next_tick.push_back(static_cast<Nanos>(rng() % static_cast<uint64_t>(interval)));
      down.push_back(false);
      by_addr[addr_of(i)] = i;
    }
  }
  void deliver(size_t from, std::vector<Outgoing> out) {
    for (auto& o : out) {
      auto it = by_addr.find(o.to);
      if (it == by_addr.end() || down[it->second]) {
        continue;
      }
      deliver(it->second, cores[it->second]->receive(o.bytes, addr_of(from), now));
    }
  }
  void step() {
    now += kStep;
    for (size_t i = 0; i < cores.size(); ++i) {
      if (!down[i] && next_tick[i] <= now) {
        next_tick[i] += interval;
        deliver(i, cores[i]->tick(now));
      }
    }
  }
  // Runs until done() (checked every step) or `limit` of simulated time; returns the time taken,
  // or -1.
  Nanos run_until(const std::function<bool()>& done, Nanos limit, const std::function<void()>& each = {}) {
    const Nanos start = now;
    while (now - start <= limit) {
      if (done()) {
        return now - start;
      }
      step();
      if (each) {
        each();
      }
    }
    return -1;
  }
  uint64_t bytes_out() const {
    uint64_t b = 0;
    for (const auto& c : cores) {
      b += c->stats().bytes_out;
    }
    return b;
  }
  bool all_know_all() const {
    for (size_t i = 0; i < cores.size(); ++i) {
      if (!down[i] && cores[i]->member_count() < cores.size()) {
        return false;
      }
    }
    return true;
  }
  bool all_have(size_t who, uint64_t version) const {
    const auto& o = cores[who]->options();
    for (size_t i = 0; i < cores.size(); ++i) {
      if (i != who && !down[i] && !cores[i]->has_version(o.name, o.generation, version)) {
        return false;
      }
    }
    return true;
  }
  bool all_see_dead(size_t who) const {
    for (size_t i = 0; i < cores.size(); ++i) {
      if (i != who && !down[i] && cores[i]->is_live(cores[who]->options().name)) {
        return false;
      }
    }
    return true;
  }
};

std::string record(size_t i, uint64_t n) {
  // A realistic node record (~450 bytes, the agent's JSON with GPU identity and load).
  char buf[600];
  std::snprintf(buf, sizeof buf,
                "{\"node_id\":\"node-%zu\",\"address\":\"10.0.%zu.%zu:9090\",\"models\":[\"meta-llama/"
                "Llama-3.1-8B-Instruct\"],\"engine\":\"vllm\",\"role\":\"both\",\"ready\":true,\"gpu_name\":"
                "\"NVIDIA H100 80GB HBM3\",\"gpu_vendor\":\"nvidia\",\"vram_total_mb\":81559,\"gpu_count\":1,"
                "\"total_blocks\":27000,\"free_blocks\":%llu,\"block_size\":16,\"queue_depth\":%llu,"
                "\"running\":%llu,\"kv_epoch\":1700000000000,\"power_watts\":%llu.5,\"watt_limit\":700,"
                "\"cordon\":false,\"version\":\"0.1.0\",\"generation\":1700000000000}",
                10000 + i, i >> 8, i & 255, static_cast<unsigned long long>(20000 - n % 5000),
                static_cast<unsigned long long>(n % 17), static_cast<unsigned long long>(n % 33),
                static_cast<unsigned long long>(300 + n % 300));
  return buf;
}

// The load part the agent republishes after each scrape (gossip_store.h: split_record).
std::string load(uint64_t n) {
  char buf[200];
  std::snprintf(
      buf, sizeof buf,
      "{\"free_blocks\":%llu,\"kv_epoch\":1700000000000,\"power_watts\":%llu.5,\"queue_depth\":%llu,"
      "\"ready\":true,\"running\":%llu,\"total_blocks\":27000}",
      static_cast<unsigned long long>(20000 - n % 5000), static_cast<unsigned long long>(300 + n % 300),
      static_cast<unsigned long long>(n % 17), static_cast<unsigned long long>(n % 33));
  return buf;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

// A trial that did not finish within kLimitS of simulated time counts as kMissed seconds (so it
// sorts last) and is printed as "> 60".
constexpr double kLimitS = 60;
constexpr double kMissed = 1e9;
constexpr size_t kConvergeTrials = 5;
constexpr size_t kDetectTrials = 3;

// "0.69" or "> 60" for one figure.
std::string seconds(double s) {
  char buf[32];
  if (s >= kMissed) {
    std::snprintf(buf, sizeof buf, "> %.0f", kLimitS);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f", s);
  }
  return buf;
}

// "median / max", with how many trials missed the limit when any did.
std::string med_max(double med, double max, size_t missed, size_t trials) {
  std::string out = seconds(med) + " / " + seconds(max);
  if (missed > 0) {
    out += " (" + std::to_string(missed) + " of " + std::to_string(trials) + " not within the " +
           std::to_string(static_cast<int>(kLimitS)) + " s limit)";
  }
  return out;
}

struct SizeResult {
  size_t n = 0;
  double join_s = -1;
  double converge_med_s = -1, converge_max_s = -1;
  double detect_med_s = -1, detect_max_s = -1;
  size_t converge_missed = 0, detect_missed = 0;  // trials past the limit (kMissed in the figures)
  double bps_churn = 0, bps_idle = 0;
  double datagram_max = 0;
  double wall_s = 0;
};

// One line on stderr per measurement, so a long run (1,000 members) shows where it is.
void progress(size_t n, const char* what, double sim_s, std::chrono::steady_clock::time_point wall0) {
  std::fprintf(stderr, "  n=%zu %s %.2f s (wall %.0f s)\n", n, what, sim_s,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count());
}

SizeResult run(size_t n) {
  const auto wall0 = std::chrono::steady_clock::now();
  SizeResult r;
  r.n = n;
  Sim sim(n);
  for (size_t i = 0; i < n; ++i) {
    sim.cores[i]->set("record", record(i, 0), sim.now);
    sim.cores[i]->set("load", load(0), sim.now);
  }
  const Nanos join = sim.run_until(
      [&] {
        if (!sim.all_know_all()) {
          return false;
        }
        for (size_t i = 0; i < n; i += std::max<size_t>(1, n / 50)) {
          if (!sim.all_have(i, 2)) {
            return false;
          }
        }
        return true;
      },
      300 * kNanosPerSecond);
  r.join_s = nanos_to_seconds(join);
  progress(n, "join", r.join_s, wall0);

  // Idle traffic: nothing changes but heartbeats.
  {
    const uint64_t b0 = sim.bytes_out();
    const Nanos t0 = sim.now;
    sim.run_until([] { return false; }, 10 * kNanosPerSecond);
    r.bps_idle =
        static_cast<double>(sim.bytes_out() - b0) / nanos_to_seconds(sim.now - t0) / static_cast<double>(n);
  }
  // Churn: every member republishes its load every 2 s (staggered); measure bytes and, for five
  // members, how long a new record takes to reach everyone meanwhile.
  uint64_t version_counter = 1;
  std::vector<Nanos> next_publish(n);
  for (size_t i = 0; i < n; ++i) {
    next_publish[i] = sim.now + static_cast<Nanos>(sim.rng() % static_cast<uint64_t>(2 * kNanosPerSecond));
  }
  auto churn = [&] {
    for (size_t i = 0; i < n; ++i) {
      if (!sim.down[i] && next_publish[i] <= sim.now) {
        next_publish[i] += 2 * kNanosPerSecond;
        sim.cores[i]->set("load", load(++version_counter), sim.now);
      }
    }
  };
  {
    sim.run_until([] { return false; }, 4 * kNanosPerSecond, churn);
    const uint64_t b0 = sim.bytes_out();
    const Nanos t0 = sim.now;
    sim.run_until([] { return false; }, 10 * kNanosPerSecond, churn);
    r.bps_churn =
        static_cast<double>(sim.bytes_out() - b0) / nanos_to_seconds(sim.now - t0) / static_cast<double>(n);
  }
  std::vector<double> conv;
  for (size_t k = 0; k < kConvergeTrials; ++k) {
    const size_t who = (k * 7919 + 3) % n;
    sim.cores[who]->set("record", record(who, ++version_counter) + " ", sim.now);
    const uint64_t v = sim.cores[who]->max_version();
    const Nanos t = sim.run_until([&] { return sim.all_have(who, v); },
                                  static_cast<Nanos>(kLimitS) * kNanosPerSecond, churn);
    conv.push_back(t < 0 ? kMissed : nanos_to_seconds(t));
    r.converge_missed += t < 0 ? 1 : 0;
    progress(n, "converge", conv.back(), wall0);
  }
  r.converge_med_s = median(conv);
  r.converge_max_s = *std::max_element(conv.begin(), conv.end());
  std::vector<double> det;
  for (size_t k = 0; k < kDetectTrials; ++k) {
    const size_t who = n - 1 - k * 3;
    sim.down[who] = true;
    const Nanos t = sim.run_until([&] { return sim.all_see_dead(who); },
                                  static_cast<Nanos>(kLimitS) * kNanosPerSecond, churn);
    det.push_back(t < 0 ? kMissed : nanos_to_seconds(t));
    r.detect_missed += t < 0 ? 1 : 0;
    progress(n, "detect", det.back(), wall0);
  }
  r.detect_med_s = median(det);
  r.detect_max_s = *std::max_element(det.begin(), det.end());
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return r;
}

}  // namespace

namespace {

struct BenchArgs {
  std::vector<size_t> sizes = {10, 100, 1000};
  bool markdown = false;
};

// Flags into `args` (and the interval and fanout globals); false on an unknown flag.
bool parse_args(int argc, char** argv, BenchArgs& args) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
      args.sizes.clear();
      std::string s = argv[++i];
      size_t pos = 0;
      while (pos < s.size()) {
        size_t c = s.find(',', pos);
        args.sizes.push_back(std::stoul(s.substr(pos, c - pos)));
        pos = c == std::string::npos ? s.size() : c + 1;
      }
    } else if (std::strcmp(argv[i], "--interval-ms") == 0 && i + 1 < argc) {
      g_interval = std::stol(argv[++i]) * kMs;
    } else if (std::strcmp(argv[i], "--fanout") == 0 && i + 1 < argc) {
      g_fanout = std::stoul(argv[++i]);
    } else if (std::strcmp(argv[i], "--markdown") == 0) {
      args.markdown = true;
    } else {
      return false;
    }
  }
  return true;
}

void print_results(const std::vector<SizeResult>& results, bool markdown) {
  const SizeResult& base = results.front();
  if (markdown) {
    std::printf(
        "| members | join (s) | new record everywhere, median / max (s) | dead detected by all, median / max "
        "(s) "
        "| bytes/s per member, churn | idle | churn vs %zu members |\n",
        base.n);
    std::printf("|---|---|---|---|---|---|---|\n");
  }
  for (const auto& r : results) {
    const double ratio = base.bps_churn > 0 ? r.bps_churn / base.bps_churn : 0;
    if (markdown) {
      std::printf("| %zu | %.2f | %s | %s | %.0f | %.0f | %.2fx |\n", r.n, r.join_s,
                  med_max(r.converge_med_s, r.converge_max_s, r.converge_missed, kConvergeTrials).c_str(),
                  med_max(r.detect_med_s, r.detect_max_s, r.detect_missed, kDetectTrials).c_str(),
                  r.bps_churn, r.bps_idle, ratio);
    } else {
      std::printf(
          "%zu members: converge %s s (median / max), detect %s s, %.0f B/s/member (%.2fx the %zu-member "
          "baseline)\n",
          r.n, med_max(r.converge_med_s, r.converge_max_s, r.converge_missed, kConvergeTrials).c_str(),
          med_max(r.detect_med_s, r.detect_max_s, r.detect_missed, kDetectTrials).c_str(), r.bps_churn, ratio,
          base.n);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  BenchArgs args;
  if (!parse_args(argc, argv, args)) {
    std::fprintf(stderr, "usage: %s [--sizes 10,100,1000] [--interval-ms 500] [--fanout 3] [--markdown]\n",
                 argv[0]);
    return 2;
  }
  std::vector<SizeResult> results;
  for (size_t n : args.sizes) {
    results.push_back(run(n));
    const auto& r = results.back();
    std::fprintf(stderr,
                 "n=%zu join=%.2fs converge med/max=%s detect med/max=%s "
                 "bytes/s/member churn=%.0f idle=%.0f (wall %.1fs)\n",
                 r.n, r.join_s,
                 med_max(r.converge_med_s, r.converge_max_s, r.converge_missed, kConvergeTrials).c_str(),
                 med_max(r.detect_med_s, r.detect_max_s, r.detect_missed, kDetectTrials).c_str(), r.bps_churn,
                 r.bps_idle, r.wall_s);
  }
  print_results(results, args.markdown);
  return 0;
}
