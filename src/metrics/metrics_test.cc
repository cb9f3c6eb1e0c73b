#include "metrics/metrics.h"

#include <gtest/gtest.h>

#include <thread>

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
