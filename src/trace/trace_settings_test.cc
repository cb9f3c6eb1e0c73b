#include "trace/trace_settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Resource = std::vector<std::pair<std::string, std::string>>;

void ExpectInvalid(const Status& status, std::string_view needle) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr(std::string(needle)));
}

TEST(TraceConfigTest, NoFlagsKeepTheBase) {
  auto s = ParseTraceConfig({}, TraceSettings{.rate = 7});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rate, 7u);
  EXPECT_EQ(s->otel_resource, (Resource{{"service.name", "weft"}}));
}

TEST(TraceConfigTest, ParsesEverySetting) {
  auto s = ParseTraceConfig({"mode=opentelemetry", "level=TIMESTAMPS", "rate=10", "count=100", "parent_based=false",
                             "triton,file=/tmp/trace.json", "triton,log-frequency=50",
                             "opentelemetry,url=http://collector:4318/v1/traces", "opentelemetry,resource=a=b",
                             "opentelemetry,bsp_max_queue_size=100", "opentelemetry,bsp_max_export_batch_size=10",
                             "opentelemetry,bsp_schedule_delay=250"});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->mode, TraceMode::kOpenTelemetry);
  EXPECT_TRUE(s->timestamps);
  EXPECT_EQ(s->rate, 10u);
  EXPECT_EQ(s->count, 100);
  EXPECT_FALSE(s->parent_based);
  EXPECT_EQ(s->file, "/tmp/trace.json");
  EXPECT_EQ(s->log_frequency, 50u);
  EXPECT_EQ(s->otel_url, "http://collector:4318/v1/traces");
  EXPECT_EQ(s->otel_resource, (Resource{{"service.name", "weft"}, {"a", "b"}}));
  EXPECT_EQ(s->bsp_max_queue_size, 100u);
  EXPECT_EQ(s->bsp_max_export_batch_size, 10u);
  EXPECT_EQ(s->bsp_schedule_delay, std::chrono::milliseconds(250));
}

TEST(TraceConfigTest, AcceptsModeSettingsWithoutTheirModeAndBothLogFrequencySpellings) {
  auto s = ParseTraceConfig({"file=f.json", "log_frequency=3", "url=http://h/", "bsp_schedule_delay=1"});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->file, "f.json");
  EXPECT_EQ(s->log_frequency, 3u);
  EXPECT_EQ(s->otel_url, "http://h/");
  EXPECT_EQ(s->bsp_schedule_delay, std::chrono::milliseconds(1));
  auto t = ParseTraceConfig({"triton,log_frequency=4", "triton,file="});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->log_frequency, 4u);
  EXPECT_EQ(t->file, "");
}

TEST(TraceConfigTest, LaterFlagsWinAndLevelOffTurnsTracingOff) {
  auto s = ParseTraceConfig({"rate=5", "level=TIMESTAMPS", "rate=6", "level=OFF", "mode=opentelemetry", "mode=triton"});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rate, 6u);
  EXPECT_FALSE(s->timestamps);
  EXPECT_EQ(s->mode, TraceMode::kTriton);
}

TEST(TraceConfigTest, ResourceAttributesAppendAndReplaceByKey) {
  auto s = ParseTraceConfig({"opentelemetry,resource=host=a", "opentelemetry,resource=env=prod=eu",
                             "opentelemetry,resource=host=b", "opentelemetry,resource=empty="});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->otel_resource, (Resource{{"service.name", "weft"}, {"host", "b"}, {"env", "prod=eu"}, {"empty", ""}}));
  auto named = ParseTraceConfig({"opentelemetry,resource=x=1", "opentelemetry,resource=service.name=detector"});
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(named->otel_resource, (Resource{{"service.name", "detector"}, {"x", "1"}}));
}

TEST(TraceConfigTest, NumbersAtTheirBounds) {
  auto s = ParseTraceConfig({"rate=4294967296", "count=-1", "bsp_max_queue_size=1000000",
                             "bsp_max_export_batch_size=1000000", "bsp_schedule_delay=600000",
                             "log-frequency=18446744073709551615"});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rate, kMaxTraceRate);
  EXPECT_EQ(s->count, -1);
  EXPECT_EQ(s->bsp_max_queue_size, kMaxBspQueueSize);
  EXPECT_EQ(s->bsp_schedule_delay, kMaxBspScheduleDelay);
  EXPECT_EQ(s->log_frequency, UINT64_MAX);
  auto zero = ParseTraceConfig({"rate=0", "count=0"});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->rate, 0u);
  EXPECT_EQ(zero->count, 0);
}

TEST(TraceConfigTest, RefusesWhatItCannotParseQuotingTheFlag) {
  for (const auto& [flag, needle] : std::initializer_list<std::pair<std::string, std::string_view>>{
           {"rate", "expected <setting>=<value>"},
           {"nope=1", "unknown trace setting 'nope'"},
           {"jaeger,url=http://h", "unknown trace mode 'jaeger'"},
           {"triton,url=http://h", "'url' is a setting of mode opentelemetry"},
           {"opentelemetry,file=x", "'file' is a setting of mode triton"},
           {"triton,rate=5", "belongs to every mode"},
           {"mode=zipkin", "not a trace mode"},
           {"level=TENSORS", "not supported"},
           {"level=timestamps", "not a trace level"},
           {"level=", "not a trace level"},
           {"rate=", "not an unsigned integer"},
           {"rate=-1", "not an unsigned integer"},
           {"rate=+1", "not an unsigned integer"},
           {"rate= 1", "not an unsigned integer"},
           {"rate=1 ", "not an unsigned integer"},
           {"rate=1.5", "not an unsigned integer"},
           {"rate=0x10", "not an unsigned integer"},
           {"rate=4294967297", "out of range"},
           {"rate=18446744073709551616", "out of range"},
           {"count=-2", "below -1"},
           {"count=9223372036854775808", "out of range"},
           {"count=abc", "not an integer"},
           {"log-frequency=18446744073709551616", "out of range"},
           {"parent_based=yes", "not true or false"},
           {"parent_based=TRUE", "not true or false"},
           {"opentelemetry,url=https://h/v1/traces", "https is not supported yet"},
           {"opentelemetry,url=ftp://h", "not an http:// url"},
           {"opentelemetry,url=http://", "not an http:// url"},
           {"opentelemetry,url=http://a b", "not an http:// url"},
           {"opentelemetry,resource=novalue", "not a resource attribute"},
           {"opentelemetry,resource==v", "not a resource attribute"},
           {"opentelemetry,resource=k=\xff", "must be UTF-8"},
           {"opentelemetry,bsp_max_queue_size=0", "out of range [1, 1000000]"},
           {"opentelemetry,bsp_max_queue_size=1000001", "out of range"},
           {"opentelemetry,bsp_max_export_batch_size=0", "out of range"},
           {"opentelemetry,bsp_schedule_delay=0", "out of range [1, 600000]"},
           {"opentelemetry,bsp_schedule_delay=600001", "out of range"},
       }) {
    auto s = ParseTraceConfig({"rate=1", flag});
    ASSERT_FALSE(s.ok()) << flag;
    ExpectInvalid(s.status(), needle);
    ExpectInvalid(s.status(), "--trace-config '" + flag + "'");
  }
}

TEST(TraceConfigTest, TheBatchMustFitTheQueueWhateverTheOrder) {
  ExpectInvalid(ParseTraceConfig({"bsp_max_queue_size=100"}).status(),
                "bsp_max_export_batch_size (512) must not exceed bsp_max_queue_size (100)");
  EXPECT_TRUE(ParseTraceConfig({"bsp_max_queue_size=100", "bsp_max_export_batch_size=100"}).ok());
  EXPECT_TRUE(ParseTraceConfig({"bsp_max_export_batch_size=4000", "bsp_max_queue_size=4000"}).ok());
  EXPECT_FALSE(ParseTraceConfig({"bsp_max_export_batch_size=4001", "bsp_max_queue_size=4000"}).ok());
}

TEST(TraceSettingUpdateTest, AppliesEverySettingByItsApiName) {
  TraceSettingUpdate update = {
      {"trace_mode", {{"opentelemetry"}}},
      {"trace_level", {{"TIMESTAMPS"}}},
      {"trace_rate", {{"100"}}},
      {"trace_count", {{"-1"}}},
      {"trace_file", {{""}}},  // its current value
      {"log_frequency", {{"7"}}},
      {"parent_based", {{"false"}}},
      {"opentelemetry_url", {{"http://otel:4318/v1/traces"}}},
      {"opentelemetry_resource", {{"service.name=det", "zone=a"}}},
      {"opentelemetry_bsp_max_queue_size", {{"64"}}},
      {"opentelemetry_bsp_max_export_batch_size", {{"8"}}},
      {"opentelemetry_bsp_schedule_delay", {{"20"}}},
  };
  auto s = ApplyTraceSettingUpdate(TraceSettings{.count = 5}, update);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->mode, TraceMode::kOpenTelemetry);
  EXPECT_TRUE(s->timestamps);
  EXPECT_EQ(s->rate, 100u);
  EXPECT_EQ(s->count, -1);
  EXPECT_EQ(s->log_frequency, 7u);
  EXPECT_FALSE(s->parent_based);
  EXPECT_EQ(s->otel_url, "http://otel:4318/v1/traces");
  EXPECT_EQ(s->otel_resource, (Resource{{"service.name", "det"}, {"zone", "a"}}));
  EXPECT_EQ(s->bsp_max_queue_size, 64u);
  EXPECT_EQ(s->bsp_max_export_batch_size, 8u);
  EXPECT_EQ(s->bsp_schedule_delay, std::chrono::milliseconds(20));
}

TEST(TraceSettingUpdateTest, AnEmptyUpdateChangesNothing) {
  auto s = ApplyTraceSettingUpdate(TraceSettings{.rate = 3}, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rate, 3u);
}

TEST(TraceSettingUpdateTest, AllOrNothingNamingTheSetting) {
  const TraceSettings current{.rate = 3, .file = "/var/trace.json"};
  for (const auto& [update, needle] : std::initializer_list<std::pair<TraceSettingUpdate, std::string_view>>{
           {{{"trace_rate", {{"10"}}}, {"trace_count", {{"x"}}}}, "trace setting 'trace_count': 'x' is not an integer"},
           {{{"trace_rate", {{"10"}}}, {"nope", {{"1"}}}}, "unknown trace setting 'nope'"},
           {{{"trace_rate", std::nullopt}}, "trace setting 'trace_rate': a server-wide setting cannot be cleared"},
           {{{"trace_rate", {{"1", "2"}}}}, "'trace_rate': takes exactly one value, not 2"},
           {{{"trace_rate", std::vector<std::string>{}}}, "takes exactly one value, not 0"},
           {{{"trace_rate", {{"4294967297"}}}}, "out of range"},
           {{{"trace_level", std::vector<std::string>{}}}, "'trace_level': needs a level"},
           {{{"trace_level", {{"OFF", "TIMESTAMPS"}}}}, "OFF cannot be given with another level"},
           {{{"trace_level", {{"TIMESTAMPS", "OFF"}}}}, "OFF cannot be given with another level"},
           {{{"trace_level", {{"TIMESTAMPS", "TENSORS"}}}}, "TENSORS is not supported"},
           {{{"trace_mode", {{"Triton"}}}}, "'trace_mode': 'Triton' is not a trace mode"},
           {{{"trace_file", {{"/etc/passwd"}}}}, "'trace_file': the trace file cannot be changed over the network"},
           {{{"trace_file", {{"/var/trace.json", "x"}}}}, "cannot be changed"},
           {{{"parent_based", {{"1"}}}}, "not true or false"},
           {{{"opentelemetry_url", {{"https://h"}}}}, "'opentelemetry_url': https is not supported yet"},
           {{{"opentelemetry_resource", {{"a=1", "b"}}}}, "'b' is not a resource attribute"},
           {{{"opentelemetry_bsp_max_queue_size", {{"10"}}}},
            "opentelemetry_bsp_max_export_batch_size (512) must not exceed opentelemetry_bsp_max_queue_size (10)"},
           {{{"opentelemetry_bsp_schedule_delay", {{"0"}}}}, "out of range"},
       }) {
    auto s = ApplyTraceSettingUpdate(current, update);
    ASSERT_FALSE(s.ok()) << needle;
    ExpectInvalid(s.status(), needle);
  }
}

TEST(TraceSettingUpdateTest, ALevelListMayRepeatTimestampsAndResourceMayBeEmptied) {
  auto s = ApplyTraceSettingUpdate(
      {}, {{"trace_level", {{"TIMESTAMPS", "TIMESTAMPS"}}}, {"opentelemetry_resource", {std::vector<std::string>{}}}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->timestamps);
  EXPECT_TRUE(s->otel_resource.empty());
}

TEST(ModelTraceSettingUpdateTest, SetsAndClearsTheThreeOverrides) {
  auto s = ApplyModelTraceSettingUpdate(
      {}, {{"trace_level", {{"TIMESTAMPS"}}}, {"trace_rate", {{"5"}}}, {"trace_count", {{"20"}}}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->timestamps, true);
  EXPECT_EQ(s->rate, 5u);
  EXPECT_EQ(s->count, 20);
  auto cleared = ApplyModelTraceSettingUpdate(*s, {{"trace_rate", std::nullopt}, {"trace_level", {{"OFF"}}}});
  ASSERT_TRUE(cleared.ok()) << cleared.status().ToString();
  EXPECT_EQ(cleared->timestamps, false);
  EXPECT_FALSE(cleared->rate.has_value());
  EXPECT_EQ(cleared->count, 20);
  auto all = ApplyModelTraceSettingUpdate(
      *s, {{"trace_level", std::nullopt}, {"trace_rate", std::nullopt}, {"trace_count", std::nullopt}});
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->timestamps || all->rate || all->count);
}

TEST(ModelTraceSettingUpdateTest, RefusesServerWideAndBadValuesAllOrNothing) {
  for (const auto& [update, needle] : std::initializer_list<std::pair<TraceSettingUpdate, std::string_view>>{
           {{{"trace_rate", {{"5"}}}, {"trace_file", {{"x"}}}}, "'trace_file' is server-wide"},
           {{{"trace_mode", {{"triton"}}}}, "'trace_mode' is server-wide"},
           {{{"log_frequency", std::nullopt}}, "'log_frequency' is server-wide"},
           {{{"opentelemetry_url", {{"http://h"}}}}, "is server-wide"},
           {{{"trace_rate", {{"5"}}}, {"bogus", {{"1"}}}}, "unknown trace setting 'bogus'"},
           {{{"trace_count", {{"-2"}}}}, "'trace_count': '-2' is below -1"},
           {{{"trace_rate", {{"99999999999"}}}}, "out of range"},
           {{{"trace_level", {{"TENSORS"}}}}, "not supported"},
       }) {
    auto s = ApplyModelTraceSettingUpdate({}, update);
    ASSERT_FALSE(s.ok()) << needle;
    ExpectInvalid(s.status(), needle);
  }
}

TEST(TraceSettingsViewTest, ListsEverySettingAsStrings) {
  TraceSettings server{.timestamps = true, .rate = 50, .file = "t.json"};
  server.otel_resource.emplace_back("zone", "a");
  const auto view = TraceSettingsView(server, nullptr);
  EXPECT_EQ(view.size(), 12u);
  EXPECT_THAT(view.at("trace_mode"), ElementsAre("triton"));
  EXPECT_THAT(view.at("trace_level"), ElementsAre("TIMESTAMPS"));
  EXPECT_THAT(view.at("trace_rate"), ElementsAre("50"));
  EXPECT_THAT(view.at("trace_count"), ElementsAre("-1"));
  EXPECT_THAT(view.at("trace_file"), ElementsAre("t.json"));
  EXPECT_THAT(view.at("log_frequency"), ElementsAre("0"));
  EXPECT_THAT(view.at("parent_based"), ElementsAre("true"));
  EXPECT_THAT(view.at("opentelemetry_url"), ElementsAre("http://localhost:4318/v1/traces"));
  EXPECT_THAT(view.at("opentelemetry_resource"), ElementsAre("service.name=weft", "zone=a"));
  EXPECT_THAT(view.at("opentelemetry_bsp_max_queue_size"), ElementsAre("2048"));
  EXPECT_THAT(view.at("opentelemetry_bsp_max_export_batch_size"), ElementsAre("512"));
  EXPECT_THAT(view.at("opentelemetry_bsp_schedule_delay"), ElementsAre("5000"));
}

TEST(TraceSettingsViewTest, AModelsOverridesReplaceTheServers) {
  const TraceSettings server{.timestamps = true, .rate = 50, .count = 9};
  const ModelTraceSettings model{.timestamps = false, .count = 3};
  const auto view = TraceSettingsView(server, &model);
  EXPECT_THAT(view.at("trace_level"), ElementsAre("OFF"));
  EXPECT_THAT(view.at("trace_rate"), ElementsAre("50"));
  EXPECT_THAT(view.at("trace_count"), ElementsAre("3"));
  EXPECT_THAT(view.at("trace_mode"), ElementsAre("triton"));
  const ModelTraceSettings none;
  EXPECT_EQ(TraceSettingsView(server, &none), TraceSettingsView(server, nullptr));
}

TEST(TraceSettingsViewTest, TheViewAppliedAsAnUpdateGivesBackTheSettings) {
  auto s = ParseTraceConfig({"mode=opentelemetry", "level=TIMESTAMPS", "rate=0", "count=12", "parent_based=false",
                             "file=x.json", "log-frequency=2", "url=http://c:1/", "resource=k=v=w",
                             "bsp_max_queue_size=10", "bsp_max_export_batch_size=10", "bsp_schedule_delay=9"});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const auto view = TraceSettingsView(*s, nullptr);
  TraceSettingUpdate update(view.begin(), view.end());
  auto back = ApplyTraceSettingUpdate(TraceSettings{.file = "x.json"}, update);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(TraceSettingsView(*back, nullptr), view);
}

}  // namespace
}  // namespace weft
