#include "power/reader.h"

#include <gtest/gtest.h>

#include <deque>

namespace cgn::power {
namespace {

// A source that answers from a script, one entry per read; the last entry repeats.
class ScriptedSource final : public Source {
 public:
  explicit ScriptedSource(std::string name, std::deque<SourceResult>* script)
      : Source(std::move(name), "scripted"), script_(script) {}
  SourceResult read() override {
    SourceResult r = script_->front();
    if (script_->size() > 1) {
      script_->pop_front();
    }
    return r;
  }
  PowerSample make(std::string device) const { return sample(std::move(device)); }

 private:
  std::deque<SourceResult>* script_;
};

PowerSample counter_sample(std::string device, uint64_t uj, std::optional<uint64_t> range = std::nullopt) {
  PowerSample s;
  s.source = "gpu";
  s.kind = "scripted";
  s.device = std::move(device);
  s.watts = 100;
  s.counter_uj = uj;
  s.counter_range_uj = range;
  return s;
}

std::unique_ptr<Reader> reader_over(std::deque<SourceResult>* script, const Clock& clock) {
  std::vector<std::unique_ptr<Source>> v;
  v.push_back(std::make_unique<ScriptedSource>("gpu", script));
  return std::make_unique<Reader>(std::move(v), clock);
}

TEST(CounterDelta, counts_forward_wraps_at_range_and_restarts_after_reset) {
  EXPECT_EQ(counter_delta(100, 250, std::nullopt), 150u);
  EXPECT_EQ(counter_delta(262'143'328'850 - 50, 70, uint64_t{262'143'328'850}), 120u);
  EXPECT_EQ(counter_delta(5000, 30, std::nullopt), 30u);
}

TEST(Reader, energy_is_the_sum_of_counter_deltas_exactly) {
  ManualClock clock;
  std::deque<SourceResult> script{std::vector<PowerSample>{counter_sample("GPU-a", 1'000'000'007)},
                                  std::vector<PowerSample>{counter_sample("GPU-a", 1'250'000'011)},
                                  std::vector<PowerSample>{counter_sample("GPU-a", 1'900'000'013)}};
  auto r = reader_over(&script, clock);
  for (int i = 0; i < 3; ++i) {
    clock.advance(kNanosPerSecond);
    r->poll();
  }
  Snapshot s = r->snapshot();
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].energy_uj, 900'000'006u);
  EXPECT_TRUE(s.devices[0].from_counter);
  EXPECT_EQ(s.total_energy_uj(), 900'000'006u);
}

TEST(Reader, counter_wrap_at_its_range_adds_only_the_energy_spent) {
  ManualClock clock;
  const uint64_t range = 262'143'328'850;
  std::deque<SourceResult> script{std::vector<PowerSample>{counter_sample("package-0", range - 1000, range)},
                                  std::vector<PowerSample>{counter_sample("package-0", 4000, range)}};
  auto r = reader_over(&script, clock);
  r->poll();
  r->poll();
  EXPECT_EQ(r->snapshot().devices.at(0).energy_uj, 5000u);
}

TEST(Reader, failed_source_is_absent_not_zero_and_its_counter_resumes) {
  ManualClock clock;
  std::deque<SourceResult> script{std::vector<PowerSample>{counter_sample("GPU-a", 1000)},
                                  make_error(SourceError::kUnavailable, "connection refused"),
                                  make_error(SourceError::kUnavailable, "connection refused"),
                                  std::vector<PowerSample>{counter_sample("GPU-a", 9000)}};
  auto r = reader_over(&script, clock);
  r->poll();
  ASSERT_EQ(r->snapshot().devices.size(), 1u);
  r->poll();
  r->poll();
  Snapshot down = r->snapshot();
  EXPECT_TRUE(down.devices.empty());
  EXPECT_FALSE(down.total_watts().has_value());
  ASSERT_EQ(down.sources.size(), 1u);
  EXPECT_FALSE(down.sources[0].up);
  EXPECT_EQ(down.sources[0].errors, 2u);
  EXPECT_EQ(down.sources[0].last_error, "connection refused");
  r->poll();
  Snapshot up = r->snapshot();
  ASSERT_EQ(up.devices.size(), 1u);
  EXPECT_TRUE(up.sources[0].up);
  EXPECT_EQ(up.devices[0].energy_uj, 8000u);  // the counter kept counting through the outage
}

TEST(Reader, without_a_counter_energy_is_power_times_time) {
  ManualClock clock;
  PowerSample s = counter_sample("node", 0);
  s.counter_uj.reset();
  s.watts = 250;
  std::deque<SourceResult> script{std::vector<PowerSample>{s}};
  auto r = reader_over(&script, clock);
  r->poll();
  clock.advance(2 * kNanosPerSecond);
  r->poll();
  Snapshot snap = r->snapshot();
  EXPECT_EQ(snap.devices.at(0).energy_uj, 500'000'000u);
  EXPECT_FALSE(snap.devices.at(0).from_counter);
  EXPECT_EQ(snap.total_watts(), 250.0);
}

TEST(Reader, a_device_missing_from_a_read_leaves_the_snapshot) {
  ManualClock clock;
  std::deque<SourceResult> script{
      std::vector<PowerSample>{counter_sample("GPU-a", 1), counter_sample("GPU-b", 1)},
      std::vector<PowerSample>{counter_sample("GPU-a", 2)}};
  auto r = reader_over(&script, clock);
  r->poll();
  EXPECT_EQ(r->snapshot().devices.size(), 2u);
  r->poll();
  Snapshot s = r->snapshot();
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].latest.device, "GPU-a");
}

TEST(Reader, unknown_kind_is_an_error_naming_source_and_known_kinds) {
  config::PowerConfig cfg;
  config::PowerSourceConfig sc;
  sc.name = "x";
  sc.kind = "nope";
  cfg.sources.push_back(sc);
  auto r = Reader::from_config(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, SourceError::kConfig);
  EXPECT_NE(r.error().message.find("\"x\""), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("dcgm_exporter"), std::string::npos) << r.error().message;
}

TEST(Reader, static_source_reads_its_configured_watts) {
  config::PowerConfig cfg;
  config::PowerSourceConfig sc;
  sc.name = "chassis";
  sc.kind = "static";
  sc.watts = 180.5;
  cfg.sources.push_back(sc);
  auto r = Reader::from_config(cfg);
  ASSERT_TRUE(r.ok()) << r.error().message;
  r.value()->poll();
  Snapshot s = r.value()->snapshot();
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].latest.device, "node");
  EXPECT_EQ(s.devices[0].latest.source, "chassis");
  EXPECT_EQ(s.devices[0].latest.watts, 180.5);
}

}  // namespace
}  // namespace cgn::power
