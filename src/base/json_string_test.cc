#include "base/json_string.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

TEST(JsonStringTest, QuotesPlainText) {
  EXPECT_EQ(JsonString(""), "\"\"");
  EXPECT_EQ(JsonString("resnet50"), "\"resnet50\"");
}

TEST(JsonStringTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonString("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
  EXPECT_EQ(JsonString(std::string_view("\x01\x1f\0", 3)), "\"\\u0001\\u001f\\u0000\"");
}

TEST(JsonStringTest, PassesUtf8AndDelAsTheyAre) { EXPECT_EQ(JsonString("caf\xc3\xa9 \x7f"), "\"caf\xc3\xa9 \x7f\""); }

TEST(JsonStringTest, AppendsAfterWhatIsThere) {
  std::string out = "{\"k\":";
  AppendJsonString(&out, "v");
  EXPECT_EQ(out, "{\"k\":\"v\"");
}

}  // namespace
}  // namespace weft
