#include "base/log.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

class LogSettingsTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = GetLogSettings(); }
  void TearDown() override { SetLogSettings(saved_); }
  LogSettings saved_;
};

TEST_F(LogSettingsTest, TritonsSettingsTurnEachSeverityOnAndOff) {
  SetLogSettings({.info = false, .warning = true, .error = false, .verbose_level = 2});
  EXPECT_TRUE(LogEnabled(LogLevel::kDebug));
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kWarning));
  EXPECT_FALSE(LogEnabled(LogLevel::kError));
  EXPECT_EQ(GetLogSettings().verbose_level, 2u);

  SetLogLevel(LogLevel::kWarning);
  EXPECT_FALSE(LogEnabled(LogLevel::kDebug));
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kWarning));
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
  SetLogLevel(LogLevel::kDebug);
  EXPECT_TRUE(LogEnabled(LogLevel::kDebug));
  EXPECT_EQ(GetLogSettings().verbose_level, 1u);
}

TEST_F(LogSettingsTest, AppliesSettingsByTritonsNames) {
  LogSettings s;
  EXPECT_TRUE(ApplyLogSetting("log_info", false, &s).ok());
  EXPECT_TRUE(ApplyLogSetting("log_verbose_level", uint64_t{3}, &s).ok());
  EXPECT_TRUE(ApplyLogSetting("log_format", std::string("ISO8601"), &s).ok());
  EXPECT_TRUE(ApplyLogSetting("log_file", std::string(), &s).ok());
  EXPECT_EQ(s, (LogSettings{.info = false, .verbose_level = 3, .format = LogFormat::kIso8601}));
  EXPECT_EQ(LogFormatName(s.format), "ISO8601");

  auto refused = [&](std::string_view name, const LogSettingValue& value, std::string_view needle) {
    LogSettings before = s;
    Status status = ApplyLogSetting(name, value, &s);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(status.message().find(needle), std::string::npos) << status.message();
    EXPECT_EQ(s, before);
  };
  refused("log_info", uint64_t{1}, "boolean");
  refused("log_verbose_level", uint64_t{1} << 32, "integer");
  refused("log_verbose_level", true, "integer");
  refused("log_format", std::string("json"), "ISO8601");
  refused("log_file", std::string("/tmp/weft.log"), "stderr");
  refused("log_colour", true, "unknown log setting 'log_colour'");
}

}  // namespace
}  // namespace weft
