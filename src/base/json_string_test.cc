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

// Hardening issue, item 6: a region or model name that is not UTF-8 made status and metadata answers invalid JSON.
TEST(JsonStringTest, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  const std::string kReplacement = "\xEF\xBF\xBD";
  EXPECT_EQ(JsonString("a\xff"
                       "b"),
            "\"a" + kReplacement + "b\"");
  EXPECT_EQ(JsonString("\xc3"), "\"" + kReplacement + "\"");                     // truncated sequence
  EXPECT_EQ(JsonString("\xc0\xaf"), "\"" + kReplacement + kReplacement + "\"");  // overlong '/'
  EXPECT_EQ(JsonString("\xed\xa0\x80"), "\"" + kReplacement + kReplacement + kReplacement + "\"");  // surrogate
  EXPECT_EQ(JsonString("\xf4\x90\x80\x80").size(), 2 + 4 * kReplacement.size());                    // past U+10FFFF
  EXPECT_EQ(JsonString("\xe2\x82\xac\xf0\x9f\x98\x80"), "\"\xe2\x82\xac\xf0\x9f\x98\x80\"");        // euro, emoji
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));
  for (int b = 0; b < 256; ++b) {  // whatever the byte, the output is valid UTF-8
    std::string one(1, static_cast<char>(b));
    EXPECT_TRUE(IsValidUtf8(JsonString(one))) << b;
  }
}

TEST(JsonStringTest, TruncationKeepsCharactersWhole) {
  EXPECT_EQ(TruncateUtf8("short", 10), "short");
  EXPECT_EQ(TruncateUtf8(std::string(100, 'x'), 10), std::string(10, 'x') + "... (90 more bytes)");
  EXPECT_EQ(TruncateUtf8("ab\xc3\xa9", 3), "ab... (2 more bytes)");  // not half of the e-acute
}

TEST(JsonStringTest, AppendsAfterWhatIsThere) {
  std::string out = "{\"k\":";
  AppendJsonString(&out, "v");
  EXPECT_EQ(out, "{\"k\":\"v\"");
}

}  // namespace
}  // namespace weft
