#include "frontend/http/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace weft {
namespace {

TEST(Float16Test, KnownHalfValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(0.1f), 0x2e66);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // the tie goes to the even infinity
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);     // tie to even zero
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -26)), 0x0001);     // above the tie
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);  // a subnormal that rounds up to normal
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

TEST(Float16Test, EveryHalfRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    float f = HalfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
    } else {
      ASSERT_EQ(FloatToHalf(f), h) << std::hex << bits;
    }
  }
}

TEST(Float16Test, Bfloat16) {
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBfloat16(-2.0f), 0xc000);
  EXPECT_EQ(Bfloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(FloatToBfloat16(1.00390625f), 0x3f80);  // exactly halfway: ties to even
  EXPECT_EQ(FloatToBfloat16(1.01171875f), 0x3f82);  // halfway between 0x3f81 and 0x3f82: even is 0x3f82
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(std::nanf("")))));
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    float f = Bfloat16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBfloat16(f), bits);
  }
}

}  // namespace
}  // namespace weft
