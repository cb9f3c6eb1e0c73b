#include "trace/tracer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "trace/trace_context.h"

namespace weft {
namespace {

TEST(ShouldTrace, NothingWhenTheLevelIsOff) {
  EXPECT_FALSE(ShouldTrace({.timestamps = false, .rate = 1, .caller = true, .sequence = 1}));
}

TEST(ShouldTrace, OneInRateRequests) {
  int traced = 0;
  for (uint64_t n = 1; n <= 100; ++n) traced += ShouldTrace({.timestamps = true, .rate = 10, .sequence = n});
  EXPECT_EQ(traced, 10);
  EXPECT_FALSE(ShouldTrace({.timestamps = true, .rate = 0, .sequence = 5}));
}

TEST(ShouldTrace, TheCallersFlagDecidesWhenParentBased) {
  EXPECT_TRUE(ShouldTrace({.timestamps = true, .rate = 0, .parent_based = true, .caller = true}));
  EXPECT_FALSE(ShouldTrace({.timestamps = true, .rate = 1, .parent_based = true, .caller = false, .sequence = 1}));
  // Not parent based: the rate decides whatever the caller sent.
  EXPECT_TRUE(ShouldTrace({.timestamps = true, .rate = 1, .parent_based = false, .caller = false, .sequence = 1}));
  EXPECT_FALSE(ShouldTrace({.timestamps = true, .rate = 0, .parent_based = false, .caller = true, .sequence = 1}));
}

TEST(ShouldTrace, NothingOnceTheCountIsSpent) {
  EXPECT_FALSE(ShouldTrace({.timestamps = true, .rate = 1, .caller = true, .sequence = 1, .remaining = 0}));
  EXPECT_TRUE(ShouldTrace({.timestamps = true, .rate = 1, .sequence = 1, .remaining = 1}));
}

TEST(Tracer, OffStartsNothing) {
  Tracer tracer(TraceSettings{}, nullptr);
  EXPECT_EQ(tracer.MaybeStart("m", TraceProtocol::kHttp, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "",
                              std::chrono::steady_clock::now()),
            nullptr);
}

TEST(Tracer, KeepsTheCallersTraceIdAndCountsDown) {
  TraceSettings settings;
  settings.timestamps = true;
  settings.rate = 1;
  settings.count = 2;
  Tracer tracer(settings, nullptr);
  auto trace = tracer.MaybeStart("m", TraceProtocol::kHttp, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                                 "", std::chrono::steady_clock::now());
  ASSERT_NE(trace, nullptr);
  EXPECT_EQ(HexOf(trace->trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_NE(tracer.MaybeStart("m", TraceProtocol::kHttp, "", "", std::chrono::steady_clock::now()), nullptr);
  EXPECT_EQ(tracer.MaybeStart("m", TraceProtocol::kHttp, "", "", std::chrono::steady_clock::now()), nullptr);
  EXPECT_EQ(tracer.View("").at("trace_count"), std::vector<std::string>{"0"});
}

TEST(Tracer, AModelsOwnSettingsOverrideTheServers) {
  TraceSettings settings;
  settings.timestamps = true;
  settings.rate = 1;
  Tracer tracer(settings, nullptr);
  ASSERT_TRUE(tracer.Update("quiet", {{"trace_level", std::vector<std::string>{"OFF"}}}).ok());
  const SteadyTime now = std::chrono::steady_clock::now();
  EXPECT_EQ(tracer.MaybeStart("quiet", TraceProtocol::kHttp, "", "", now), nullptr);
  EXPECT_NE(tracer.MaybeStart("loud", TraceProtocol::kHttp, "", "", now), nullptr);
  ASSERT_TRUE(tracer.Update("quiet", {{"trace_level", std::nullopt}}).ok());
  EXPECT_NE(tracer.MaybeStart("quiet", TraceProtocol::kHttp, "", "", now), nullptr);
  // The server off, one model on: only it is traced.
  ASSERT_TRUE(tracer.Update("", {{"trace_level", std::vector<std::string>{"OFF"}}}).ok());
  ASSERT_TRUE(tracer.Update("loud", {{"trace_level", std::vector<std::string>{"TIMESTAMPS"}}}).ok());
  EXPECT_EQ(tracer.MaybeStart("quiet", TraceProtocol::kHttp, "", "", now), nullptr);
  EXPECT_NE(tracer.MaybeStart("loud", TraceProtocol::kHttp, "", "", now), nullptr);
}

TEST(Tracer, WritesTritonsFileWithEveryStampInOrder) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("weft_tracer_test_" + std::to_string(getpid()) + ".json");
  TraceSettings settings;
  settings.timestamps = true;
  settings.rate = 1;
  settings.file = path.string();
  {
    Tracer tracer(settings, nullptr);
    SteadyTime t = std::chrono::steady_clock::now();
    auto trace = tracer.MaybeStart("m", TraceProtocol::kHttp, "", "", t);
    ASSERT_NE(trace, nullptr);
    for (size_t i = 1; i < kTraceStageCount; ++i)
      trace->Stamp(static_cast<TraceStage>(i), t + std::chrono::microseconds(i));
    trace->SetModel("m", 3);
    trace->SetRequest("req-1", 1);
    trace->End();
    trace->End();  // once only
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  const std::string json = text.str();
  EXPECT_EQ(json.front(), '[');
  EXPECT_NE(json.find("\"model_name\":\"m\",\"model_version\":3,\"request_id\":\"req-1\""), std::string::npos) << json;
  size_t last = 0;
  for (const char* name :
       {"HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
        "INFER_START", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END", "HTTP_SEND_START", "HTTP_SEND_END"}) {
    size_t at = json.find(name);
    ASSERT_NE(at, std::string::npos) << name;
    EXPECT_GT(at, last) << name;
    last = at;
  }
  EXPECT_EQ(json.find("\"id\":2"), std::string::npos) << "one trace, two records";
  EXPECT_NE(json.rfind(']'), std::string::npos);
}

TEST(Tracer, ATraceNeverEndedEndsWhenDropped) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("weft_tracer_drop_" + std::to_string(getpid()) + ".json");
  TraceSettings settings;
  settings.timestamps = true;
  settings.rate = 1;
  settings.file = path.string();
  {
    Tracer tracer(settings, nullptr);
    auto trace = tracer.MaybeStart("m", TraceProtocol::kGrpc, "", "", std::chrono::steady_clock::now());
    trace->SetOutcome(Unavailable("went away"));
    trace.reset();
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  EXPECT_NE(text.str().find("\"error\":\"went away\""), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("GRPC_SEND_END"), std::string::npos);
}

// Requests traced on several threads while the settings change under them (run under ThreadSanitizer in CI): every
// trace ends once, whatever the mode it started in, and the exporter's thread takes the spans.
TEST(Tracer, TracesOnManyThreadsWhileTheSettingsChange) {
  TraceSettings settings;
  settings.mode = TraceMode::kOpenTelemetry;
  settings.otel_url = "http://127.0.0.1:9/v1/traces";  // nothing listens: export fails, and that costs only drops
  settings.timestamps = true;
  settings.rate = 1;
  settings.bsp_schedule_delay = std::chrono::milliseconds(5);
  Tracer tracer(settings, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> traced{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      while (!stop.load()) {
        auto trace = tracer.MaybeStart(t % 2 ? "a" : "b", t % 2 ? TraceProtocol::kHttp : TraceProtocol::kGrpc,
                                       "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "",
                                       std::chrono::steady_clock::now());
        if (!trace) continue;
        traced.fetch_add(1);
        for (size_t i = 1; i < kTraceStageCount; ++i) trace->Stamp(static_cast<TraceStage>(i));
        trace->SetModel("a", 1);
        trace->JoinBatch(trace->trace_id(), trace->server_span_id(), 2);
        trace->SetOutcome(t == 3 ? Internal("failed") : Status::Ok());
        trace->End();
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(tracer.Update("a", {{"trace_rate", std::vector<std::string>{i % 2 ? "1" : "2"}}}).ok());
    ASSERT_TRUE(tracer.Update("", {{"trace_mode", std::vector<std::string>{i % 5 ? "opentelemetry" : "triton"}}}).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_GT(traced.load(), 0);
}

}  // namespace
}  // namespace weft
