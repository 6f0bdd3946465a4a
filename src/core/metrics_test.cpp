#include "core/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <latch>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "testing/capability.h"
#include "testing/process.h"

namespace cgn::metrics {
namespace {

using ::testing::HasSubstr;

// Every registry renders its dropped-label-sets family; tests that want exact output cut it out.
constexpr std::string_view kDroppedHeader =
    "# HELP cgn_metrics_dropped_label_sets_total Label sets refused because their family reached its series "
    "limit; their samples went to the family's _overflow series.\n"
    "# TYPE cgn_metrics_dropped_label_sets_total counter\n";

std::string without_dropped_header(std::string text) {
  auto at = text.find(kDroppedHeader);
  EXPECT_NE(at, std::string::npos) << text;
  if (at != std::string::npos) {
    text.erase(at, kDroppedHeader.size());
  }
  return text;
}

TEST(Metrics, RendersExactTextFormat004) {
  Registry reg;
  auto& req = reg.counter("cgn_test_requests_total", "Requests served.", {"model", "code"});
  req.with({"m2", "200"}).inc(3);
  req.with({"m1", "500"}).inc();
  req.with({"m1", "200"}).add(2.5);
  reg.gauge("cgn_test_queue_depth", "Requests waiting.").with({}).set(-4.25);
  auto& lat = reg.histogram("cgn_test_latency_seconds", "Latency.", {"model"}, {0.1, 1});
  Histogram h = lat.with({"m1"});
  h.observe(0.05);
  h.observe(0.1);  // le is inclusive
  h.observe(0.5);
  h.observe(7);

  EXPECT_EQ(without_dropped_header(reg.render()),
            "# HELP cgn_test_latency_seconds Latency.\n"
            "# TYPE cgn_test_latency_seconds histogram\n"
            "cgn_test_latency_seconds_bucket{model=\"m1\",le=\"0.1\"} 2\n"
            "cgn_test_latency_seconds_bucket{model=\"m1\",le=\"1\"} 3\n"
            "cgn_test_latency_seconds_bucket{model=\"m1\",le=\"+Inf\"} 4\n"
            "cgn_test_latency_seconds_sum{model=\"m1\"} 7.65\n"
            "cgn_test_latency_seconds_count{model=\"m1\"} 4\n"
            "# HELP cgn_test_queue_depth Requests waiting.\n"
            "# TYPE cgn_test_queue_depth gauge\n"
            "cgn_test_queue_depth -4.25\n"
            "# HELP cgn_test_requests_total Requests served.\n"
            "# TYPE cgn_test_requests_total counter\n"
            "cgn_test_requests_total{model=\"m1\",code=\"200\"} 2.5\n"
            "cgn_test_requests_total{model=\"m1\",code=\"500\"} 1\n"
            "cgn_test_requests_total{model=\"m2\",code=\"200\"} 3\n");
}

TEST(Metrics, LabelessFamiliesExportZeroAndLabelledOnesOnlyTheirHeader) {
  Registry reg;
  reg.counter("cgn_a_total", "A.");
  reg.counter("cgn_b_total", "B.", {"x"});
  EXPECT_EQ(without_dropped_header(reg.render()),
            "# HELP cgn_a_total A.\n# TYPE cgn_a_total counter\ncgn_a_total 0\n"
            "# HELP cgn_b_total B.\n# TYPE cgn_b_total counter\n");
}

TEST(Metrics, EscapesLabelValuesAndHelp) {
  Registry reg;
  auto& f = reg.gauge("cgn_esc", "Help with \\ backslash\nand newline \"quotes stay\".", {"v"});
  f.with({"a\\b\"c\nd"}).set(1);
  EXPECT_EQ(without_dropped_header(reg.render()),
            "# HELP cgn_esc Help with \\\\ backslash\\nand newline \"quotes stay\".\n"
            "# TYPE cgn_esc gauge\n"
            "cgn_esc{v=\"a\\\\b\\\"c\\nd\"} 1\n");
  EXPECT_EQ(escape_label_value("plain ü"), "plain ü");
  EXPECT_EQ(escape_help("x\"y"), "x\"y");
}

TEST(Metrics, FormatsSpecialValues) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(42), "42");
  EXPECT_EQ(format_value(0.1), "0.1");
  EXPECT_EQ(format_value(1e-5), "1e-05");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
  EXPECT_EQ(format_value(123456789012.0), "123456789012");
}

TEST(Metrics, SeriesAreSortedWhateverTheInsertionOrder) {
  Registry reg;
  auto& f = reg.counter("cgn_sorted_total", "S.", {"k"});
  for (const char* k : {"c", "a", "b", "aa"}) {
    f.with({k}).inc();
  }
  EXPECT_THAT(reg.render(), HasSubstr("cgn_sorted_total{k=\"a\"} 1\n"
                                      "cgn_sorted_total{k=\"aa\"} 1\n"
                                      "cgn_sorted_total{k=\"b\"} 1\n"
                                      "cgn_sorted_total{k=\"c\"} 1\n"));
  EXPECT_EQ(reg.render(), reg.render());
}

TEST(Metrics, LabelSetsBeyondTheLimitGoToOneOverflowSeries) {
  Registry reg;
  auto& f = reg.counter("cgn_bounded_total", "B.", {"model", "code"}, FamilyOptions{.max_series = 2});
  for (int i = 0; i < 50; ++i) {
    f.with({"client-made-" + std::to_string(i), "200"}).inc();
  }
  EXPECT_EQ(f.series_count(), 2u);
  std::string text = reg.render();
  EXPECT_THAT(text, HasSubstr("cgn_bounded_total{model=\"client-made-0\",code=\"200\"} 1\n"
                              "cgn_bounded_total{model=\"client-made-1\",code=\"200\"} 1\n"
                              "cgn_bounded_total{model=\"_overflow\",code=\"_overflow\"} 48\n"));
  EXPECT_THAT(text, HasSubstr("cgn_metrics_dropped_label_sets_total{family=\"cgn_bounded_total\"} 48\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("client-made-2")));
  // Existing series keep working at the limit.
  f.with({"client-made-0", "200"}).inc();
  EXPECT_EQ(f.with({"client-made-0", "200"}).value(), 2.0);
}

TEST(Metrics, RemovedSeriesStopExportingButHandlesStaySafe) {
  Registry reg;
  auto& f = reg.gauge("cgn_node_up", "Up.", {"node"}, FamilyOptions{.max_series = 1});
  Gauge a = f.with({"a"});
  a.set(1);
  f.remove({"a"});
  a.set(2);  // harmless: nobody exports it any more
  EXPECT_THAT(reg.render(), ::testing::Not(HasSubstr("node=\"a\"")));
  f.with({"b"}).set(1);  // the freed slot is usable again
  EXPECT_THAT(reg.render(), HasSubstr("cgn_node_up{node=\"b\"} 1\n"));
  f.clear();
  EXPECT_EQ(f.series_count(), 0u);
}

TEST(Metrics, CollectCallbacksRefreshGaugesAtScrapeTime) {
  Registry reg;
  auto& nodes = reg.gauge("cgn_cluster_node_queue_depth", "Queue depth.", {"node"});
  int scrapes = 0;
  uint64_t id = reg.add_collect_callback([&] {
    ++scrapes;
    nodes.clear();  // rebuild the mirror: nodes that left disappear
    nodes.with({"n" + std::to_string(scrapes)}).set(scrapes * 10);
  });
  EXPECT_THAT(reg.render(), HasSubstr("cgn_cluster_node_queue_depth{node=\"n1\"} 10\n"));
  std::string second = reg.render();
  EXPECT_THAT(second, HasSubstr("cgn_cluster_node_queue_depth{node=\"n2\"} 20\n"));
  EXPECT_THAT(second, ::testing::Not(HasSubstr("n1")));
  reg.remove_collect_callback(id);
  reg.render();
  EXPECT_EQ(scrapes, 2);
}

TEST(Metrics, HandleSemantics) {
  Counter none;
  none.inc();  // a default handle is a no-op, for code running without metrics
  EXPECT_EQ(none.value(), 0.0);
  Histogram no_hist;
  no_hist.observe(1);
  EXPECT_EQ(no_hist.count(), 0u);

  Registry reg;
  auto& c = reg.counter("cgn_c_total", "C.");
  Counter h = c.with({});
  h.add(-5);
  h.add(std::nan(""));
  EXPECT_EQ(h.value(), 0.0);  // counters never go down
  h.add(1.25);
  h.inc(2);
  EXPECT_DOUBLE_EQ(h.value(), 3.25);
  Gauge g = reg.gauge("cgn_g", "G.").with({});
  g.inc();
  g.inc();
  g.dec();
  g.add(0.5);
  EXPECT_DOUBLE_EQ(g.value(), 1.5);
  Histogram hist = reg.histogram("cgn_h", "H.", {}, {1}).with({});
  hist.observe(std::nan(""));  // ignored
  hist.observe(2);
  EXPECT_EQ(hist.count(), 1u);
  EXPECT_EQ(hist.sum(), 2.0);
  // Registering again with the same shape returns the same family.
  EXPECT_EQ(&reg.counter("cgn_c_total", "C."), &c);
}

TEST(Metrics, BucketHelpers) {
  EXPECT_EQ(exponential_buckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(linear_buckets(0.5, 0.5, 3), (std::vector<double>{0.5, 1.0, 1.5}));
  EXPECT_EQ(default_buckets().front(), 0.005);
  // Computed bounds are the decimals meant, not float noise: they compare and print as such.
  EXPECT_EQ(linear_buckets(0.1, 0.1, 10),
            (std::vector<double>{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0}));
  EXPECT_EQ(exponential_buckets(1e-6, 4, 10).back(), 0.262144);
  {
    Registry noisy;
    Histogram h = noisy.histogram("cgn_ratio", "R.", {}, linear_buckets(0.1, 0.1, 10)).with({});
    h.observe(0.3);  // exactly on the bound: inclusive
    const std::string text = noisy.render();
    EXPECT_THAT(text, HasSubstr("cgn_ratio_bucket{le=\"0.2\"} 0\ncgn_ratio_bucket{le=\"0.3\"} 1\n"));
    EXPECT_THAT(text, HasSubstr("cgn_ratio_bucket{le=\"0.7\"} 1\n"));
    EXPECT_EQ(text.find("0000000"), std::string::npos) << text;
  }
  Registry reg;
  // An explicit +Inf bound is the implied one, not a second bucket.
  reg.histogram("cgn_inf", "I.", {}, {1, std::numeric_limits<double>::infinity()}).with({}).observe(5);
  EXPECT_THAT(reg.render(), HasSubstr("cgn_inf_bucket{le=\"1\"} 0\ncgn_inf_bucket{le=\"+Inf\"} 1\n"));
}

TEST(MetricsDeathTest, RegistrationMistakesAbortNamingTheMetric) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Registry reg;
        reg.counter("cgn-bad-name", "x");
      },
      "cannot register 'cgn-bad-name'");
  EXPECT_DEATH(
      {
        Registry reg;
        reg.counter("cgn_x_total", "x", {"__reserved"});
      },
      "label name '__reserved' is not valid");
  EXPECT_DEATH(
      {
        Registry reg;
        reg.histogram("cgn_h", "x", {"le"});
      },
      "reserved for histogram buckets");
  EXPECT_DEATH(
      {
        Registry reg;
        reg.histogram("cgn_h", "x", {}, {2, 1});
      },
      "strictly increasing");
  EXPECT_DEATH(
      {
        Registry reg;
        reg.counter("cgn_x_total", "x", {"a"});
        reg.gauge("cgn_x_total", "x", {"a"});
      },
      "already registered");
  EXPECT_DEATH(
      {
        Registry reg;
        reg.counter("cgn_x_total", "x", {"a", "b"}).with({"only-one"});
      },
      "got 1 label values for 2 label names");
}

TEST(Metrics, ConcurrentIncrementsGiveTheExactTotal) {
  Registry reg;
  auto& f = reg.counter("cgn_conc_total", "C.", {"k"});
  auto& hf = reg.histogram("cgn_conc_seconds", "H.", {"k"}, {0.5});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 50000;
  constexpr int kLookupsPerThread = kPerThread / 100;
  std::latch start(kThreads + 1);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      Counter shared = f.with({"shared"});
      for (int i = 0; i < kPerThread; ++i) {
        shared.inc();
        if (i % 100 == 0) {
          f.with({"lookup"}).inc();  // concurrent lookups of one label set share its series
          hf.with({"h"}).observe(t % 2 == 0 ? 0.25 : 1.0);
        }
      }
    });
  }
  start.arrive_and_wait();
  std::string during;
  for (int i = 0; i < 20; ++i) {
    during = reg.render();  // scraping while the threads run must be safe
  }
  for (auto& th : threads) {
    th.join();
  }
  EXPECT_EQ(f.with({"shared"}).value(), double(kThreads) * kPerThread);
  EXPECT_EQ(f.with({"lookup"}).value(), double(kThreads) * kLookupsPerThread);
  Histogram h = hf.with({"h"});
  EXPECT_EQ(h.count(), uint64_t(kThreads) * kLookupsPerThread);
  EXPECT_EQ(f.series_count(), 2u);
  EXPECT_THAT(reg.render(), HasSubstr("cgn_conc_seconds_bucket{k=\"h\",le=\"0.5\"} 2000\n"));
}

// promtool (Debian package prometheus) is the reference parser and linter of the text format.
TEST(Metrics, PromtoolAcceptsEveryType) {
  const char* promtool = "/usr/bin/promtool";
  CGN_REQUIRE_CAPABILITY(::access(promtool, X_OK) == 0, "promtool (Debian package prometheus)");
  Registry reg;
  auto& req = reg.counter("cgn_router_requests_total", "Requests by model, endpoint and status code.",
                          {"model", "endpoint", "code"}, FamilyOptions{.max_series = 3});
  for (int i = 0; i < 5; ++i) {
    req.with({"m" + std::to_string(i), "chat", "200"}).inc(i + 1);
  }
  // (The design's gauge name cgn_cluster_power_watts_total fails this lint: "non-counter metrics
  // should not have _total suffix".)
  reg.gauge("cgn_cluster_power_watts", "Power of all nodes, watts.").with({}).set(1234.5);
  auto& up = reg.gauge("cgn_cluster_node_up", "1 when the node answers health checks.", {"node"});
  up.with({"gpu \"a\"\\1\nx"}).set(1);
  up.with({"gpu-b"}).set(0);
  auto& ttft = reg.histogram("cgn_router_chat_ttft_seconds", "Time to first token.", {"model"});
  for (double v : {0.001, 0.02, 0.3, 4.0, 50.0}) {
    ttft.with({"m"}).observe(v);
  }
  reg.histogram("cgn_router_routing_decision_seconds", "Routing decision time.", {},
                exponential_buckets(1e-6, 4, 8))
      .with({})
      .observe(3e-5);

  testing::TempDir dir;
  testing::write_file(dir.file("metrics.txt"), reg.render());
  std::string cmd = std::string(promtool) + " check metrics < " + dir.file("metrics.txt") + " > " +
                    dir.file("out.txt") + " 2>&1";
  int rc = std::system(cmd.c_str());  // NOLINT(concurrency-mt-unsafe,cert-env33-c): a fixed command line
  EXPECT_EQ(rc, 0) << testing::read_file(dir.file("out.txt")) << "\n--- input ---\n"
                   << testing::read_file(dir.file("metrics.txt"));
}

}  // namespace
}  // namespace cgn::metrics
