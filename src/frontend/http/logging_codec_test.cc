#include "frontend/http/logging_codec.h"

#include <gtest/gtest.h>

#include <string>

namespace weft {
namespace {

Result<LogSettings> Decode(std::string_view json, LogSettings current = {}) {
  return DecodeLogSettingsUpdate({reinterpret_cast<const std::byte*>(json.data()), json.size()}, current);
}

TEST(LoggingCodecTest, WritesEverySettingByTritonsNames) {
  EXPECT_EQ(EncodeLogSettings({}),
            R"({"log_file":"","log_info":true,"log_warning":true,"log_error":true,"log_verbose_level":0,)"
            R"("log_format":"default"})");
  EXPECT_EQ(EncodeLogSettings({.error = false, .verbose_level = 7, .format = LogFormat::kIso8601}),
            R"({"log_file":"","log_info":true,"log_warning":true,"log_error":false,"log_verbose_level":7,)"
            R"("log_format":"ISO8601"})");
}

TEST(LoggingCodecTest, AppliesWhatTheBodyNamesAndKeepsTheRest) {
  auto s = Decode(R"({"log_verbose_level": 1, "log_info": false, "log_format": "ISO8601", "log_file": ""})",
                  {.warning = false});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s, (LogSettings{.info = false, .warning = false, .verbose_level = 1, .format = LogFormat::kIso8601}));
  auto empty = Decode("  ", {.error = false});
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->error);
}

TEST(LoggingCodecTest, RefusesWhatItCannotApply) {
  for (const auto& [json, needle] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"{", "malformed JSON"},
           {"[]", "JSON object"},
           {R"({"log_info": "yes"})", "boolean"},
           {R"({"log_verbose_level": -1})", "negative"},
           {R"({"log_verbose_level": 1.5})", "boolean, an integer or a string"},
           {R"({"log_verbose_level": 4294967296})", "integer in"},
           {R"({"log_file": "/etc/passwd"})", "stderr"},
           {R"({"log_info": false, "nope": 1})", "unknown log setting 'nope'"}}) {
    auto s = Decode(json);
    ASSERT_FALSE(s.ok()) << json;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status().message();
  }
}

}  // namespace
}  // namespace weft
