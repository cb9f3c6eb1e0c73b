// `weft bench` against the real server in-process: the example repository's builtin models on an ephemeral port,
// real sockets, RunBench as the CLI runs it.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "loadgen/bench.h"
#include "test_server.h"

namespace weft {
namespace {

using std::chrono::duration;

// A sleep model slower than the request timeouts used below.
constexpr char kSlowModel[] = R"(
name: "slow"
backend: "weft_builtin"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
parameters { key: "builtin" value: { string_value: "sleep" } }
parameters { key: "batch_delay_us" value: { string_value: "300000" } }
)";

class BenchE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server =
        testing::TestServer::Start({.example_models = {"identity", "sleep"}, .extra_configs = {{"slow", kSlowModel}}});
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  BenchOptions Options(const std::string& model) const {
    BenchOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(server_->port());
    o.model = model;
    o.progress = false;
    return o;
  }

  static testing::TestServer* server_;
};

testing::TestServer* BenchE2eTest::server_ = nullptr;

const OutcomeSummary* FindOutcome(const BenchReport& r, const std::string& name) {
  for (const OutcomeSummary& s : r.outcomes) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

uint64_t SumOfOutcomes(const BenchReport& r) {
  uint64_t n = 0;
  for (const OutcomeSummary& s : r.outcomes) n += s.count;
  return n;
}

void ExpectOrderedPercentiles(const LatencySummary& l) {
  EXPECT_GT(l.p50_ms, 0);
  EXPECT_LE(l.p50_ms, l.p90_ms);
  EXPECT_LE(l.p90_ms, l.p99_ms);
  EXPECT_LE(l.p99_ms, l.p999_ms);
  EXPECT_LE(l.p999_ms, l.max_ms);
}

void ExpectAllOk(const BenchReport& r, uint64_t requests) {
  EXPECT_EQ(r.sent, requests);
  EXPECT_EQ(SumOfOutcomes(r), r.sent);
  EXPECT_TRUE(r.consistent());
  const OutcomeSummary* ok = FindOutcome(r, "200");
  ASSERT_NE(ok, nullptr) << RenderTable(r);
  EXPECT_EQ(ok->count, requests) << RenderTable(r);
  EXPECT_EQ(r.successes, requests);
  EXPECT_GT(r.throughput_rps, 0);
  ExpectOrderedPercentiles(r.latency);
}

TEST_F(BenchE2eTest, ClosedLoopJson) {
  BenchOptions o = Options("sleep");
  o.concurrency = 4;
  o.requests = 200;
  o.batch_size = 2;
  auto report = RunBench(o, nullptr);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ExpectAllOk(*report, 200);
  EXPECT_EQ(report->peak_connections, 4u);
  EXPECT_DOUBLE_EQ(report->inferences_per_s, 2 * report->throughput_rps);
  // The sleep model takes 2 ms per batch: no answer can be faster.
  EXPECT_GE(report->latency.p50_ms, 2.0);
}

TEST_F(BenchE2eTest, ClosedLoopBinaryOnTwoThreads) {
  BenchOptions o = Options("sleep");
  o.binary = true;
  o.concurrency = 3;
  o.threads = 2;
  o.requests = 150;
  o.priority = 1;
  o.parameters["source"] = std::string("cam1");
  auto report = RunBench(o, nullptr);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ExpectAllOk(*report, 150);
}

TEST_F(BenchE2eTest, OpenLoopJsonAndBinary) {
  for (bool binary : {false, true}) {
    BenchOptions o = Options("sleep");
    o.mode = LoadMode::kOpenLoop;
    o.request_rate = 400;
    o.requests = 100;
    o.binary = binary;
    auto report = RunBench(o, nullptr);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    ExpectAllOk(*report, 100);
    EXPECT_GE(report->peak_connections, 1u);
  }
}

TEST_F(BenchE2eTest, VariableDimsFromShapeFlag) {
  BenchOptions o = Options("identity");
  o.requests = 20;
  auto missing = RunBench(o, nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("--shape INPUT0"), std::string::npos) << missing.status().message();

  o.shapes["INPUT0"] = {64};
  auto report = RunBench(o, nullptr);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ExpectAllOk(*report, 20);
}

TEST_F(BenchE2eTest, UnknownModelIsCountedAsAnswersWhenTheBodyIsGiven) {
  std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("weft_bench_body_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << R"({"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"FP32","data":[0.5]}]})";
  BenchOptions o = Options("no_such_model");
  o.input_data_path = file.string();
  o.concurrency = 2;
  o.requests = 30;
  auto report = RunBench(o, nullptr);
  std::filesystem::remove(file);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->sent, 30u);
  EXPECT_EQ(SumOfOutcomes(*report), 30u);
  const OutcomeSummary* not_found = FindOutcome(*report, "404");
  ASSERT_NE(not_found, nullptr) << RenderTable(*report);
  EXPECT_EQ(not_found->count, 30u);
  EXPECT_FALSE(not_found->first_error.empty());
  ASSERT_TRUE(not_found->latency.has_value());
  ExpectOrderedPercentiles(*not_found->latency);
  EXPECT_EQ(report->successes, 0u);
}

TEST_F(BenchE2eTest, UnknownModelFailsBeforeTheRunWhenInputsComeFromMetadata) {
  auto report = RunBench(Options("no_such_model"), nullptr);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kNotFound) << report.status().ToString();
}

TEST_F(BenchE2eTest, UnreachableServer) {
  BenchOptions o = Options("sleep");
  o.url = "http://127.0.0.1:1";
  auto report = RunBench(o, nullptr);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kUnavailable) << report.status().ToString();
  std::ostringstream out, err;
  EXPECT_EQ(RunBenchCommand(o, out, err), 1);
  EXPECT_NE(err.str().find("cannot reach"), std::string::npos) << err.str();
}

// A server slower than --request-timeout: every request ends as a timeout, and the run still ends on time.
TEST_F(BenchE2eTest, SlowAnswersBecomeTimeoutsAndTheRunIsBounded) {
  BenchOptions o = Options("slow");
  o.mode = LoadMode::kOpenLoop;
  o.request_rate = 50;
  o.duration = duration<double>(0.3);
  o.request_timeout = duration<double>(0.1);
  auto start = std::chrono::steady_clock::now();
  auto report = RunBench(o, nullptr);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_LT(took, std::chrono::seconds(3));
  EXPECT_GE(report->sent, 10u);
  EXPECT_EQ(SumOfOutcomes(*report), report->sent);
  const OutcomeSummary* timeout = FindOutcome(*report, "timeout");
  ASSERT_NE(timeout, nullptr);
  EXPECT_EQ(timeout->count, report->sent) << RenderTable(*report);
}

TEST_F(BenchE2eTest, DurationRunWithWarmupPoissonProgressAndJson) {
  BenchOptions o = Options("sleep");
  o.mode = LoadMode::kOpenLoop;
  o.request_rate = 200;
  o.arrivals = Arrivals::kPoisson;
  o.warmup = duration<double>(0.3);
  o.duration = duration<double>(1.5);
  o.json = true;
  o.progress = true;
  std::ostringstream out, err;
  ASSERT_EQ(RunBenchCommand(o, out, err), 0) << err.str();
  EXPECT_NE(err.str().find("answered"), std::string::npos) << "a progress line: " << err.str();

  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(out.str()).get(doc), simdjson::SUCCESS) << out.str();
  EXPECT_TRUE(bool(doc["consistent"]));
  uint64_t sent = doc["sent"];
  EXPECT_GT(sent, 150u);  // ~300 expected over 1.5 s at 200/s
  EXPECT_LT(sent, 500u);
  EXPECT_EQ(uint64_t(doc["outcomes"]["200"]["count"]), sent);
  double duration_s = doc["duration_s"];
  EXPECT_GT(duration_s, 1.4);
  EXPECT_LT(duration_s, 2.0);
}

}  // namespace
}  // namespace weft
