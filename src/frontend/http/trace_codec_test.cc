#include "frontend/http/trace_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace weft {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Values = std::optional<std::vector<std::string>>;

TEST(TraceCodecTest, ReadsEveryKindOfValue) {
  auto update = ParseTraceSettingJson(
      R"({"trace_rate": "10", "trace_level": ["TIMESTAMPS"], "trace_count": null, "log_frequency": 7,
          "opentelemetry_bsp_schedule_delay": -1, "parent_based": false, "trace_mode": true,
          "opentelemetry_resource": [], "trace_file": "", "big": 18446744073709551615})");
  ASSERT_TRUE(update.ok()) << update.status().ToString();
  EXPECT_EQ(*update, (TraceSettingUpdate{
                         {"trace_rate", Values({"10"})},
                         {"trace_level", Values({"TIMESTAMPS"})},
                         {"trace_count", std::nullopt},
                         {"log_frequency", Values({"7"})},
                         {"opentelemetry_bsp_schedule_delay", Values({"-1"})},
                         {"parent_based", Values({"false"})},
                         {"trace_mode", Values({"true"})},
                         {"opentelemetry_resource", Values(std::vector<std::string>{})},
                         {"trace_file", Values({""})},
                         {"big", Values({"18446744073709551615"})},
                     }));
}

TEST(TraceCodecTest, AnEmptyBodyIsAnEmptyUpdate) {
  for (std::string_view body : {"", " \r\n\t", "{}"}) {
    auto update = ParseTraceSettingJson(body);
    ASSERT_TRUE(update.ok()) << body;
    EXPECT_TRUE(update->empty());
  }
}

TEST(TraceCodecTest, RefusesOtherShapes) {
  for (const auto& [body, needle] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"{", "malformed JSON"},
           {R"({"trace_rate": "1"} x)", "malformed JSON"},
           {"[]", "JSON object of trace settings"},
           {R"("trace_rate")", "JSON object"},
           {R"({"trace_rate": 1.5})", "'trace_rate' must be a string, an integer, a boolean"},
           {R"({"trace_rate": 1e3})", "must be a string"},
           {R"({"trace_rate": {"a": 1}})", "must be a string"},
           {R"({"trace_level": ["TIMESTAMPS", 1]})", "'trace_level' must be an array of strings"},
           {R"({"trace_level": [null]})", "array of strings"},
           {R"({"trace_level": [["OFF"]]})", "array of strings"},
           {R"({"trace_rate": "1", "trace_rate": "2"})", "'trace_rate' is given twice"},
       }) {
    auto update = ParseTraceSettingJson(body);
    ASSERT_FALSE(update.ok()) << body;
    EXPECT_EQ(update.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(update.status().message(), HasSubstr(std::string(needle))) << body;
  }
}

TEST(TraceCodecTest, RefusesABodyOver64KiB) {
  std::string body = R"({"trace_file": ")" + std::string(64 << 10, 'x') + R"("})";
  auto update = ParseTraceSettingJson(body);
  ASSERT_FALSE(update.ok());
  EXPECT_THAT(update.status().message(), HasSubstr("at most 65536 bytes"));
}

TEST(TraceCodecTest, WritesListsAsArraysAndTheRestAsStrings) {
  EXPECT_EQ(TraceSettingsJson({{"trace_rate", {"1000"}},
                               {"trace_level", {"OFF"}},
                               {"opentelemetry_resource", {"service.name=weft", "k=\"v\""}},
                               {"trace_file", {""}}}),
            R"({"opentelemetry_resource":["service.name=weft","k=\"v\""],"trace_file":"","trace_level":["OFF"],)"
            R"("trace_rate":"1000"})");
  EXPECT_EQ(TraceSettingsJson({{"opentelemetry_resource", {}}, {"odd", {"a", "b"}}}),
            R"({"odd":["a","b"],"opentelemetry_resource":[]})");
  EXPECT_EQ(TraceSettingsJson({}), "{}");
}

TEST(TraceCodecTest, WhatGetAnswersPostsBackToTheSameSettings) {
  TraceSettings server{.mode = TraceMode::kOpenTelemetry, .timestamps = true, .rate = 3, .count = 40};
  server.otel_resource.emplace_back("host", "a=b");
  const auto view = TraceSettingsView(server, nullptr);
  auto update = ParseTraceSettingJson(TraceSettingsJson(view));
  ASSERT_TRUE(update.ok()) << update.status().ToString();
  auto back = ApplyTraceSettingUpdate(TraceSettings{}, *update);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(TraceSettingsView(*back, nullptr), view);
  EXPECT_THAT(view.at("trace_level"), ElementsAre("TIMESTAMPS"));
}

TEST(TraceCodecTest, AModelPostClearsAnOverrideWithNull) {
  auto update = ParseTraceSettingJson(R"({"trace_rate": null, "trace_count": 5})");
  ASSERT_TRUE(update.ok());
  auto model = ApplyModelTraceSettingUpdate(ModelTraceSettings{.rate = 9}, *update);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_FALSE(model->rate.has_value());
  EXPECT_EQ(model->count, 5);
}

}  // namespace
}  // namespace weft
