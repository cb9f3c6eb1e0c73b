#include "loadgen/bench_report.h"

#include <gtest/gtest.h>
#include <simdjson.h>

namespace weft {
namespace {

using std::chrono::milliseconds;

RunStats SampleStats() {
  RunStats stats;
  SteadyTime t{};
  for (int i = 1; i <= 1000; ++i) stats.Record(200, milliseconds(i % 100 + 1), t + milliseconds(i));
  for (int i = 0; i < 10; ++i) stats.Record(429, milliseconds(1), t, R"({"error":"queue full"})");
  stats.Record(kOutcomeTimeout, milliseconds(30000), t, "no answer before the deadline");
  stats.sent = 1011;
  stats.peak_connections = 4;
  return stats;
}

BenchOptions SampleOptions() {
  BenchOptions o;
  o.model = "sleep";
  o.batch_size = 4;
  o.concurrency = 4;
  return o;
}

TEST(BenchReportTest, BuildsCountsAndThroughput) {
  BenchReport r = BuildReport(SampleOptions(), SampleStats(), std::chrono::seconds(2));
  EXPECT_EQ(r.sent, 1011u);
  EXPECT_EQ(r.answered, 1010u);
  EXPECT_EQ(r.unanswered, 1u);
  EXPECT_EQ(r.successes, 1000u);
  EXPECT_TRUE(r.consistent());
  EXPECT_DOUBLE_EQ(r.throughput_rps, 500);
  EXPECT_DOUBLE_EQ(r.inferences_per_s, 2000);
  EXPECT_EQ(r.latency.count, 1000u);
  EXPECT_NEAR(r.latency.p50_ms, 50, 0.5);
  EXPECT_NEAR(r.latency.p99_ms, 99, 1);
  EXPECT_DOUBLE_EQ(r.latency.max_ms, 100);
  // 200, 429, then the failures, each present even at zero.
  ASSERT_EQ(r.outcomes.size(), 5u);
  EXPECT_EQ(r.outcomes[0].name, "200");
  EXPECT_EQ(r.outcomes[1].name, "429");
  EXPECT_EQ(r.outcomes[1].first_error, R"({"error":"queue full"})");
  ASSERT_TRUE(r.outcomes[1].latency.has_value());
  EXPECT_DOUBLE_EQ(r.outcomes[1].latency->p99_ms, 1);
  EXPECT_EQ(r.outcomes[2].name, "connect_error");
  EXPECT_EQ(r.outcomes[2].count, 0u);
  EXPECT_FALSE(r.outcomes[2].latency.has_value());
  EXPECT_EQ(r.outcomes[4].name, "timeout");
  EXPECT_EQ(r.outcomes[4].count, 1u);
}

TEST(BenchReportTest, TableShowsEveryField) {
  std::string table = RenderTable(BuildReport(SampleOptions(), SampleStats(), std::chrono::seconds(2)));
  for (const char* expected :
       {"closed loop, concurrency 4", "batch size 4", "500.0 req/s", "2000.0 infer/s", "p99.9", "429", "connect_error",
        "timeout", "sent 1011 = answered 1010 + unanswered 1   (consistent)", "queue full"}) {
    EXPECT_NE(table.find(expected), std::string::npos) << expected << "\n" << table;
  }
}

TEST(BenchReportTest, JsonHasStableKeys) {
  BenchOptions o = SampleOptions();
  o.mode = LoadMode::kOpenLoop;
  o.request_rate = 250;
  o.arrivals = Arrivals::kPoisson;
  std::string json = RenderJson(BuildReport(o, SampleStats(), std::chrono::seconds(2)));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_EQ(std::string_view(doc["model"]), "sleep");
  EXPECT_EQ(std::string_view(doc["load"]["mode"]), "open_loop");
  EXPECT_EQ(double(doc["load"]["request_rate"]), 250);
  EXPECT_EQ(std::string_view(doc["load"]["arrivals"]), "poisson");
  EXPECT_EQ(uint64_t(doc["sent"]), 1011u);
  EXPECT_EQ(uint64_t(doc["answered"]), 1010u);
  EXPECT_EQ(uint64_t(doc["unanswered"]), 1u);
  EXPECT_TRUE(bool(doc["consistent"]));
  EXPECT_EQ(double(doc["throughput"]["requests_per_s"]), 500);
  EXPECT_EQ(double(doc["throughput"]["inferences_per_s"]), 2000);
  for (const char* key : {"count", "mean", "p50", "p90", "p99", "p99_9", "max"}) {
    EXPECT_FALSE(doc["latency_ms"][key].error()) << key;
  }
  EXPECT_EQ(uint64_t(doc["outcomes"]["200"]["count"]), 1000u);
  EXPECT_EQ(std::string_view(doc["outcomes"]["429"]["first_error"]), R"({"error":"queue full"})");
  EXPECT_FALSE(doc["outcomes"]["429"]["latency_ms"]["p99"].error());
  EXPECT_EQ(uint64_t(doc["outcomes"]["timeout"]["count"]), 1u);
  EXPECT_EQ(uint64_t(doc["outcomes"]["connect_error"]["count"]), 0u);
  EXPECT_TRUE(doc["outcomes"]["timeout"]["latency_ms"].error());
  EXPECT_FALSE(doc["started_late"].error());
  EXPECT_EQ(uint64_t(doc["peak_connections"]), 4u);
}

TEST(BenchReportTest, EmptyRunRendersWithoutDividingByZero) {
  BenchReport r = BuildReport(SampleOptions(), RunStats{}, std::chrono::seconds(0));
  EXPECT_EQ(r.throughput_rps, 0);
  EXPECT_TRUE(r.consistent());
  EXPECT_NE(RenderTable(r).find("no 2xx answers"), std::string::npos);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  EXPECT_EQ(parser.parse(RenderJson(r)).get(doc), simdjson::SUCCESS);
}

}  // namespace
}  // namespace weft
