#include "base/ascii.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

namespace weft {
namespace {

TEST(EqualsIgnoringAsciiCase, ComparesLettersWithoutCase) {
  EXPECT_TRUE(EqualsIgnoringAsciiCase("gzip", "GZIP"));
  EXPECT_TRUE(EqualsIgnoringAsciiCase("100-Continue", "100-continue"));
  EXPECT_TRUE(EqualsIgnoringAsciiCase("", ""));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("gzip", "gzi"));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("gzip", "gzjp"));
  // Only ASCII letters fold: '@' and '`' sit next to 'A' and 'a' but are not the same character.
  EXPECT_FALSE(EqualsIgnoringAsciiCase("@", "`"));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("\xc4", "\xe4"));
}

TEST(TrimOptionalWhitespace, TrimsSpacesAndTabsAtBothEndsOnly) {
  EXPECT_EQ(TrimOptionalWhitespace(" \t a b\t "), "a b");
  EXPECT_EQ(TrimOptionalWhitespace("a"), "a");
  EXPECT_EQ(TrimOptionalWhitespace(" \t "), "");
  EXPECT_EQ(TrimOptionalWhitespace(""), "");
  EXPECT_EQ(TrimOptionalWhitespace("\ra\n"), "\ra\n");
}

// The bug this replaces: a last character that differs only in case made beast::iequals read past both ends.
// Under ASan this test fails if the compare reads outside exact-size heap buffers.
TEST(EqualsIgnoringAsciiCase, ReadsNothingPastTheEnds) {
  auto upper = std::make_unique<char[]>(4);
  std::memcpy(upper.get(), "GZIP", 4);
  auto lower = std::make_unique<char[]>(4);
  std::memcpy(lower.get(), "gzip", 4);
  EXPECT_TRUE(EqualsIgnoringAsciiCase({upper.get(), 4}, {lower.get(), 4}));
  EXPECT_FALSE(EqualsIgnoringAsciiCase({upper.get(), 4}, {"gzix", 4}));
}

}  // namespace
}  // namespace weft
