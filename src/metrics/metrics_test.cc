#include "metrics/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "metrics/metrics_config.h"

namespace weft {
namespace {

TEST(MetricsTest, SameNameAndLabelsGiveSameSeries) {
  MetricsRegistry r;
  Counter* a = r.GetCounter("weft_x_total", "x", {{"model", "m"}});
  Counter* b = r.GetCounter("weft_x_total", "x", {{"model", "m"}});
  Counter* c = r.GetCounter("weft_x_total", "x", {{"model", "n"}});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(MetricsTest, RendersPrometheusText) {
  MetricsRegistry r;
  r.GetCounter("weft_requests_total", "Requests.", {{"model", "m\"q"}, {"reason", "ok"}})->Increment(3);
  r.GetGauge("weft_up", "Up.")->Set(1);
  auto* h = r.GetHistogram("weft_duration_seconds", "Duration.", {{"model", "m"}}, {0.1, 1});
  h->Observe(0.05);
  h->Observe(0.5);
  h->Observe(5);
  std::string text = r.Exposition();
  EXPECT_NE(text.find("# TYPE weft_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("weft_requests_total{model=\"m\\\"q\",reason=\"ok\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("weft_up 1\n"), std::string::npos);
  EXPECT_NE(text.find("weft_duration_seconds_bucket{model=\"m\",le=\"0.1\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("weft_duration_seconds_bucket{model=\"m\",le=\"1\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("weft_duration_seconds_bucket{model=\"m\",le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("weft_duration_seconds_count{model=\"m\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("weft_duration_seconds_sum{model=\"m\"} 5.55\n"), std::string::npos);
}

TEST(SummaryTest, QuantilesOfTheWindowWithinTheBucketResolution) {
  ManualClock clock;
  Summary s(
      {.quantiles = {0, 0.5, 0.9, 0.99, 1}, .max_age = std::chrono::seconds(50), .age_buckets = 5, .clock = &clock});
  EXPECT_TRUE(std::isnan(s.Quantiles()[1]));
  for (int v = 100; v >= 1; --v) s.Observe(v * 0.001);  // 1 ms .. 100 ms, in any order
  const std::vector<double> q = s.Quantiles();
  const double expected[] = {0.001, 0.050, 0.090, 0.099, 0.100};
  for (size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(q[i], expected[i], expected[i] * 0.008) << i;
  EXPECT_EQ(s.count(), 100u);
  EXPECT_NEAR(s.sum(), 5.05, 1e-9);

  // 30 s later, large values: both slices are in the window.
  clock.Advance(std::chrono::seconds(30));
  for (int i = 0; i < 100; ++i) s.Observe(10);
  EXPECT_NEAR(s.Quantiles()[2], 10, 0.08);
  // The first slice leaves the window once it is 50 s old; the second stays.
  clock.Advance(std::chrono::seconds(21));
  EXPECT_NEAR(s.Quantiles()[0], 10, 0.08);
  clock.Advance(std::chrono::seconds(30));
  EXPECT_TRUE(std::isnan(s.Quantiles()[0]));
  EXPECT_EQ(s.count(), 200u);  // all time
  s.Observe(0);
  s.Observe(-3);
  EXPECT_EQ(s.Quantiles()[4], 0);
}

TEST(SummaryTest, RendersAsAPrometheusSummary) {
  MetricsRegistry r;
  EXPECT_FALSE(r.latency_summaries().has_value());
  r.SetLatencySummaries(Summary::Options{.quantiles = {0.5, 0.99}});
  ASSERT_TRUE(r.latency_summaries().has_value());
  Summary* s = r.GetSummary("nv_x_summary_us", "X.", {{"model", "m"}}, *r.latency_summaries());
  EXPECT_EQ(s, r.GetSummary("nv_x_summary_us", "X.", {{"model", "m"}}, {}));
  s->Observe(64);
  const std::string text = r.Exposition();
  EXPECT_NE(text.find("# TYPE nv_x_summary_us summary\n"), std::string::npos) << text;
  EXPECT_NE(text.find("nv_x_summary_us{model=\"m\",quantile=\"0.5\"} 64.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("nv_x_summary_us{model=\"m\",quantile=\"0.99\"} 64.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("nv_x_summary_us_sum{model=\"m\"} 64\n"), std::string::npos) << text;
  EXPECT_NE(text.find("nv_x_summary_us_count{model=\"m\"} 1\n"), std::string::npos) << text;
  r.Remove("nv_x_summary_us", {{"model", "m"}});
  EXPECT_EQ(r.Exposition().find("nv_x_summary_us{"), std::string::npos);
}

TEST(MetricsConfigTest, TritonsSettings) {
  auto none = ParseMetricsConfig({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto on = ParseMetricsConfig({"summary_quantiles=0.5:0.05,0.99:0.001", "summary_latencies=true"});
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  ASSERT_TRUE(on->has_value());
  EXPECT_EQ((*on)->quantiles, (std::vector<double>{0.5, 0.99}));
  auto defaults = ParseMetricsConfig({"summary_latencies=1"});
  ASSERT_TRUE(defaults.ok() && defaults->has_value());
  EXPECT_EQ((*defaults)->quantiles, (std::vector<double>{0.5, 0.9, 0.95, 0.99}));
  auto off = ParseMetricsConfig({"summary_latencies=true", "summary_latencies=false"});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->has_value());
  for (const char* bad : {"summary_latencies", "summary_latencies=yes", "summary_quantiles=1.5:0.1",
                          "summary_quantiles=", "summary_quantiles=0.5:0.1,x", "counter_latencies=false"}) {
    auto parsed = ParseMetricsConfig({bad});
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(MetricsTest, ConcurrentIncrementsAreNotLost) {
  MetricsRegistry r;
  Counter* c = r.GetCounter("weft_c_total", "c");
  std::vector<std::jthread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([c] {
      for (int i = 0; i < 10000; ++i) c->Increment();
    });
  }
  threads.clear();
  EXPECT_EQ(c->value(), 40000);
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

TEST(MetricsTest, RemovedSeriesIsNotExportedAndComesBackFresh) {
  MetricsRegistry registry;
  registry.GetGauge("state", "help", {{"version", "1"}})->Set(1);
  registry.GetGauge("state", "help", {{"version", "2"}})->Set(1);
  registry.Remove("state", {{"version", "1"}});
  registry.Remove("absent", {{"version", "1"}});  // no such family: nothing happens
  std::string text = registry.Exposition();
  EXPECT_EQ(text.find("version=\"1\""), std::string::npos) << text;
  EXPECT_NE(text.find("state{version=\"2\"} 1"), std::string::npos) << text;
  EXPECT_EQ(registry.GetGauge("state", "help", {{"version", "1"}})->value(), 0);
}

}  // namespace
}  // namespace weft
