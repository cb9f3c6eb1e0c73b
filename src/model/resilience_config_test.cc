#include "model/resilience_config.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace weft {
namespace {

using std::chrono::milliseconds;

ModelConfig Det(std::map<std::string, std::string> parameters = {}) {
  ModelConfig c;
  c.name = "det";
  c.platform = "pytorch_libtorch";
  c.max_batch_size = 8;
  c.inputs = {{"images", DataType::kFp32, {3, 640, 640}, std::nullopt}};
  c.outputs = {{"boxes", DataType::kFp32, {-1, 6}, std::nullopt}};
  c.parameters = std::move(parameters);
  return c;
}

// The error of parsing `parameters`, with a check that it is an InvalidArgument.
std::string ErrorOf(std::map<std::string, std::string> parameters) {
  Result<ResilienceConfig> r = ParseResilienceConfig(Det(std::move(parameters)));
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(ResilienceConfigTest, DefaultsWithoutParameters) {
  Result<ResilienceConfig> r = ParseResilienceConfig(Det({{"weft.latest_frame_wins", "true"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, ResilienceConfig{});
  const BreakerOptions& b = r->breaker;
  EXPECT_TRUE(b.enabled);
  EXPECT_EQ(b.window_calls, 50u);
  EXPECT_EQ(b.window, milliseconds(0));
  EXPECT_EQ(b.minimum_calls, 20u);
  EXPECT_EQ(b.failure_rate, 0.5);
  EXPECT_EQ(b.consecutive_failures, 5u);
  EXPECT_EQ(b.open_duration, milliseconds(5000));
  EXPECT_EQ(b.max_open_duration, milliseconds(60000));
  EXPECT_EQ(b.half_open_probes, 3u);
  EXPECT_TRUE(r->fallback_models.empty());
  EXPECT_TRUE(ValidateBreakerOptions(BreakerOptions{}).ok());
}

TEST(ResilienceConfigTest, ParsesEveryKey) {
  Result<ResilienceConfig> r = ParseResilienceConfig(Det({
      {"weft.breaker.enabled", "false"},
      {"weft.breaker.window_calls", "100"},
      {"weft.breaker.window_ms", " 10000 "},
      {"weft.breaker.minimum_calls", "200"},  // above window_calls: fine for a time-based window
      {"weft.breaker.failure_rate", "0.25"},
      {"weft.breaker.consecutive_failures", "0"},
      {"weft.breaker.open_ms", "250"},
      {"weft.breaker.max_open_ms", "30000"},
      {"weft.breaker.half_open_probes", "7"},
      {"weft.fallback_models", "det_small"},
  }));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const BreakerOptions& b = r->breaker;
  EXPECT_FALSE(b.enabled);
  EXPECT_EQ(b.window_calls, 100u);
  EXPECT_EQ(b.window, milliseconds(10000));
  EXPECT_EQ(b.minimum_calls, 200u);
  EXPECT_EQ(b.failure_rate, 0.25);
  EXPECT_EQ(b.consecutive_failures, 0u);
  EXPECT_EQ(b.open_duration, milliseconds(250));
  EXPECT_EQ(b.max_open_duration, milliseconds(30000));
  EXPECT_EQ(b.half_open_probes, 7u);
  EXPECT_EQ(r->fallback_models, std::vector<std::string>{"det_small"});

  // The bounds themselves are accepted.
  r = ParseResilienceConfig(Det({{"weft.breaker.window_calls", "10000"},
                                 {"weft.breaker.minimum_calls", "10000"},
                                 {"weft.breaker.failure_rate", "1"},
                                 {"weft.breaker.consecutive_failures", "10000"},
                                 {"weft.breaker.open_ms", "3600000"},
                                 {"weft.breaker.max_open_ms", "3600000"},
                                 {"weft.breaker.window_ms", "3600000"},
                                 {"weft.breaker.half_open_probes", "1000"},
                                 {"weft.breaker.enabled", "true"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->breaker.failure_rate, 1.0);
  r = ParseResilienceConfig(Det({{"weft.breaker.window_calls", "1"},
                                 {"weft.breaker.minimum_calls", "1"},
                                 {"weft.breaker.failure_rate", "1e-3"},
                                 {"weft.breaker.open_ms", "1"},
                                 {"weft.breaker.max_open_ms", "1"},
                                 {"weft.breaker.half_open_probes", "1"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->breaker.failure_rate, 0.001);
}

TEST(ResilienceConfigTest, RefusesEachBadValueNamingTheParameter) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"weft.breaker.enabled", "yes"},
      {"weft.breaker.enabled", "True"},
      {"weft.breaker.enabled", ""},
      {"weft.breaker.window_calls", "0"},
      {"weft.breaker.window_calls", "10001"},
      {"weft.breaker.window_calls", "-1"},
      {"weft.breaker.window_calls", "+5"},
      {"weft.breaker.window_calls", "50x"},
      {"weft.breaker.window_calls", "5 0"},
      {"weft.breaker.window_calls", "0x10"},
      {"weft.breaker.window_calls", "99999999999999999999999"},  // overflows uint64
      {"weft.breaker.window_calls", "4294967346"},               // 2^32 + 50: would wrap to 50 in a uint32
      {"weft.breaker.window_calls", "   "},
      {"weft.breaker.window_ms", "3600001"},
      {"weft.breaker.window_ms", "1.5"},
      {"weft.breaker.minimum_calls", "0"},
      {"weft.breaker.minimum_calls", "10001"},
      {"weft.breaker.failure_rate", "abc"},
      {"weft.breaker.failure_rate", "0"},
      {"weft.breaker.failure_rate", "1.01"},
      {"weft.breaker.failure_rate", "-0.5"},
      {"weft.breaker.failure_rate", "nan"},
      {"weft.breaker.failure_rate", "inf"},
      {"weft.breaker.failure_rate", "0.5%"},
      {"weft.breaker.failure_rate", "1e999"},
      {"weft.breaker.consecutive_failures", "10001"},
      {"weft.breaker.consecutive_failures", "-0"},
      {"weft.breaker.open_ms", "0"},
      {"weft.breaker.open_ms", "3600001"},
      {"weft.breaker.max_open_ms", "0"},
      {"weft.breaker.max_open_ms", "3600001"},
      {"weft.breaker.half_open_probes", "0"},
      {"weft.breaker.half_open_probes", "1001"},
  };
  for (const auto& [key, value] : bad) {
    SCOPED_TRACE(key + " = '" + value + "'");
    const std::string message = ErrorOf({{key, value}});
    EXPECT_NE(message.find("parameters '" + key + "': expected "), std::string::npos) << message;
    EXPECT_NE(message.find("got '" + value + "'"), std::string::npos) << message;
  }
  EXPECT_EQ(ErrorOf({{"weft.breaker.failure_rate", "abc"}}),
            "parameters 'weft.breaker.failure_rate': expected a number in (0, 1], got 'abc'");
}

TEST(ResilienceConfigTest, RefusesFieldsThatContradictEachOther) {
  std::string message = ErrorOf({{"weft.breaker.window_calls", "10"}, {"weft.breaker.minimum_calls", "11"}});
  EXPECT_NE(message.find("parameters 'weft.breaker.minimum_calls': 11 is more than weft.breaker.window_calls (10)"),
            std::string::npos)
      << message;
  // The default minimum_calls (20) does not fit a smaller count-based window.
  message = ErrorOf({{"weft.breaker.window_calls", "10"}});
  EXPECT_NE(message.find("'weft.breaker.minimum_calls'"), std::string::npos) << message;
  message = ErrorOf({{"weft.breaker.open_ms", "2000"}, {"weft.breaker.max_open_ms", "1000"}});
  EXPECT_NE(message.find("parameters 'weft.breaker.max_open_ms': 1000 is less than weft.breaker.open_ms (2000)"),
            std::string::npos)
      << message;
  // The default max_open_ms (60 s) is below a longer first open period.
  message = ErrorOf({{"weft.breaker.open_ms", "60001"}});
  EXPECT_NE(message.find("'weft.breaker.max_open_ms'"), std::string::npos) << message;
}

TEST(ResilienceConfigTest, RefusesUnknownBreakerKeys) {
  std::string message = ErrorOf({{"weft.breaker.failure_ratio", "0.5"}});
  EXPECT_NE(message.find("parameters 'weft.breaker.failure_ratio': unknown circuit breaker parameter"),
            std::string::npos)
      << message;
  EXPECT_FALSE(ParseResilienceConfig(Det({{"weft.breaker.", "1"}})).ok());
  // Other weft.* keys belong to other parts.
  EXPECT_TRUE(ParseResilienceConfig(Det({{"weft.breakers", "1"}, {"weft.max_inflight_batches", "2"}})).ok());
}

TEST(ResilienceConfigTest, QuotesAtMost64BytesOfAValueOrKey) {
  const std::string long_value = "0." + std::string(10000, '7') + "x";
  std::string message = ErrorOf({{"weft.breaker.failure_rate", long_value}});
  EXPECT_LT(message.size(), 200u) << message;
  EXPECT_NE(message.find("more bytes"), std::string::npos) << message;
  message = ErrorOf({{"weft.breaker." + std::string(10000, 'k'), "1"}});
  EXPECT_LT(message.size(), 300u) << message;
  message = ErrorOf({{"weft.fallback_models", "a," + std::string(10000, 'b') + ",," + "c"}});
  EXPECT_LT(message.size(), 300u) << message;
}

TEST(ResilienceConfigTest, FallbackListIsTrimmedAndKeepsItsOrder) {
  Result<ResilienceConfig> r =
      ParseResilienceConfig(Det({{"weft.fallback_models", " det_small ,det_tiny,\tdet_cpu "}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->fallback_models, (std::vector<std::string>{"det_small", "det_tiny", "det_cpu"}));
  r = ParseResilienceConfig(Det({{"weft.fallback_models", "  "}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->fallback_models.empty());
}

TEST(ResilienceConfigTest, RefusesEmptyNamesAndDuplicates) {
  for (const char* list : {"a,,b", "a,", ",a", "a, ,b"}) {
    SCOPED_TRACE(list);
    const std::string message = ErrorOf({{"weft.fallback_models", list}});
    EXPECT_NE(message.find("parameters 'weft.fallback_models': model name"), std::string::npos) << message;
    EXPECT_NE(message.find("is empty"), std::string::npos) << message;
  }
  const std::string message = ErrorOf({{"weft.fallback_models", "a, b, a"}});
  EXPECT_EQ(message, "parameters 'weft.fallback_models': lists 'a' twice");
}

TEST(ResilienceConfigTest, RefusesTheModelItselfAsItsFallback) {
  const std::string message = ErrorOf({{"weft.fallback_models", "det_small, det"}});
  EXPECT_EQ(message, "parameters 'weft.fallback_models': lists the model itself, 'det'");
  // A name that only starts like the model is another model.
  EXPECT_TRUE(ParseResilienceConfig(Det({{"weft.fallback_models", "det2, de"}})).ok());
}

// A stand-in is looked up as <repository>/<name>, and a config may come from a client: a name that would point
// outside the repository, or below a model's directory, is refused before any file is looked at.
TEST(ResilienceConfigTest, RefusesStandInNamesThatAreNoDirectoryOfTheRepository) {
  for (const char* key : {"weft.fallback_models", "weft.degrade_to"}) {
    for (const char* name : {"/etc", "../other_repository/m", "a/b", ".hidden", ".."}) {
      SCOPED_TRACE(std::string(key) + " = " + name);
      const std::string message = ErrorOf({{key, name}});
      EXPECT_NE(message.find(std::string("parameters '") + key + "'"), std::string::npos) << message;
      EXPECT_NE(message.find("is not a model name"), std::string::npos) << message;
    }
  }
}

TEST(ResilienceConfigTest, ValidateBreakerOptionsChecksRanges) {
  BreakerOptions o;
  o.window_calls = 0;
  EXPECT_EQ(ValidateBreakerOptions(o).message(),
            "parameters 'weft.breaker.window_calls': expected an integer in [1, 10000], got 0");
  o = {};
  o.failure_rate = 0;
  EXPECT_EQ(ValidateBreakerOptions(o).message(),
            "parameters 'weft.breaker.failure_rate': expected a number in (0, 1], got 0");
  o = {};
  o.open_duration = milliseconds(-1);
  EXPECT_NE(ValidateBreakerOptions(o).message().find("'weft.breaker.open_ms'"), std::string::npos);
  o = {};
  o.window = milliseconds(1000);
  o.minimum_calls = 500;  // time-based: not bounded by window_calls
  EXPECT_TRUE(ValidateBreakerOptions(o).ok());
}

TEST(ResilienceConfigTest, ValidateModelConfigRefusesABadBreakerValue) {
  EXPECT_TRUE(ValidateModelConfig(Det({{"weft.breaker.failure_rate", "0.3"}})).ok());
  Status s = ValidateModelConfig(Det({{"weft.breaker.failure_rate", "abc"}}));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("weft.breaker.failure_rate"), std::string::npos) << s.message();
  EXPECT_FALSE(ValidateModelConfig(Det({{"weft.breaker.open_msec", "100"}})).ok());
  EXPECT_FALSE(ValidateModelConfig(Det({{"weft.fallback_models", "det"}})).ok());
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

TEST(ResilienceConfigTest, DegradeToNamesOneOtherModel) {
  ModelConfig config;
  config.name = "det";
  EXPECT_EQ(ParseResilienceConfig(config)->degrade_to, "");
  config.parameters["weft.degrade_to"] = "  det_small ";
  EXPECT_EQ(ParseResilienceConfig(config)->degrade_to, "det_small");
  config.parameters["weft.degrade_to"] = "det";
  EXPECT_EQ(ParseResilienceConfig(config).status().code(), StatusCode::kInvalidArgument);
  config.parameters["weft.degrade_to"] = "a, b";
  Result<ResilienceConfig> two = ParseResilienceConfig(config);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("weft.degrade_to"), std::string::npos) << two.status().message();
}

TEST(ResilienceConfigTest, ExecutionTimeoutIsWholeMillisecondsUpToAnHour) {
  ModelConfig config;
  config.name = "det";
  EXPECT_EQ(ParseResilienceConfig(config)->execution_timeout, milliseconds(0));
  config.parameters["weft.execution_timeout_ms"] = " 250 ";
  EXPECT_EQ(ParseResilienceConfig(config)->execution_timeout, milliseconds(250));
  config.parameters["weft.execution_timeout_ms"] = "0";
  EXPECT_EQ(ParseResilienceConfig(config)->execution_timeout, milliseconds(0));
  config.parameters["weft.execution_timeout_ms"] = "3600000";
  EXPECT_EQ(ParseResilienceConfig(config)->execution_timeout, milliseconds(3600000));
  for (const std::string value : {"3600001", "-1", "+5", "1.5", "50ms", "", "  ", "99999999999999999999999"}) {
    SCOPED_TRACE("'" + value + "'");
    const std::string message = ErrorOf({{"weft.execution_timeout_ms", value}});
    EXPECT_NE(message.find("parameters 'weft.execution_timeout_ms': expected milliseconds in [0, 3600000]"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("got '" + value + "'"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace weft
