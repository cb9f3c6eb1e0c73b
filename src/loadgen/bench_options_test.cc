#include "loadgen/bench_options.h"

#include <gtest/gtest.h>

#include <limits>

namespace weft {
namespace {

TEST(BenchOptionsTest, ParsesShapes) {
  auto shape = ParseShapeFlag("INPUT0:3,224,224");
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->first, "INPUT0");
  EXPECT_EQ(shape->second, (std::vector<int64_t>{3, 224, 224}));
  // The last colon splits, so input names may contain colons.
  auto colon = ParseShapeFlag("a:b:7");
  ASSERT_TRUE(colon.ok());
  EXPECT_EQ(colon->first, "a:b");
  for (const char* bad : {"INPUT0", "INPUT0:", ":3", "INPUT0:3,,4", "INPUT0:0", "INPUT0:-1", "INPUT0:x"}) {
    EXPECT_FALSE(ParseShapeFlag(bad).ok()) << bad;
  }
}

TEST(BenchOptionsTest, ParsesParametersAsIntOrString) {
  auto source = ParseParameterFlag("source=cam1");
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(source->first, "source");
  EXPECT_EQ(std::get<std::string>(source->second), "cam1");
  auto number = ParseParameterFlag("k=-42");
  ASSERT_TRUE(number.ok());
  EXPECT_EQ(std::get<int64_t>(number->second), -42);
  auto empty = ParseParameterFlag("k=");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(std::get<std::string>(empty->second), "");
  auto equals = ParseParameterFlag("k=a=b");
  ASSERT_TRUE(equals.ok());
  EXPECT_EQ(std::get<std::string>(equals->second), "a=b");
  EXPECT_FALSE(ParseParameterFlag("novalue").ok());
  EXPECT_FALSE(ParseParameterFlag("=x").ok());
  EXPECT_FALSE(ParseParameterFlag("priority=1").ok());  // has its own flag
}

TEST(BenchOptionsTest, ParsesHeaders) {
  auto bearer = ParseHeaderFlag("Authorization:   Bearer abc.def-1 ");
  ASSERT_TRUE(bearer.ok()) << bearer.status().ToString();
  EXPECT_EQ(bearer->first, "Authorization");
  EXPECT_EQ(bearer->second, "Bearer abc.def-1");
  auto colon = ParseHeaderFlag("X-Route-Key: a:b");
  ASSERT_TRUE(colon.ok());
  EXPECT_EQ(colon->second, "a:b");
  EXPECT_TRUE(ParseHeaderFlag("X-Empty:").ok());
  for (const char* bad : {"NoColon", ": value", "Bad Name: v", "X:a\r\nInjected: 1", "X:a\nb", "(x): v"}) {
    EXPECT_FALSE(ParseHeaderFlag(bad).ok()) << bad;
  }
}

TEST(BenchOptionsTest, ValidatesCombinations) {
  BenchOptions ok;
  ok.model = "m";
  EXPECT_TRUE(ValidateBenchOptions(ok).ok());

  BenchOptions no_model;
  EXPECT_FALSE(ValidateBenchOptions(no_model).ok());

  // 4 + the length is each element's size: INT64_MAX once overflowed it.
  BenchOptions long_strings = ok;
  long_strings.string_length = std::numeric_limits<int64_t>::max();
  EXPECT_FALSE(ValidateBenchOptions(long_strings).ok());
  long_strings.string_length = kMaxStringLength;
  EXPECT_TRUE(ValidateBenchOptions(long_strings).ok());

  BenchOptions open = ok;
  open.mode = LoadMode::kOpenLoop;
  EXPECT_FALSE(ValidateBenchOptions(open).ok()) << "an open loop needs a rate";
  open.request_rate = 100;
  EXPECT_TRUE(ValidateBenchOptions(open).ok());

  BenchOptions file = ok;
  file.input_data_path = "body.json";
  EXPECT_TRUE(ValidateBenchOptions(file).ok());
  file.binary = true;
  EXPECT_FALSE(ValidateBenchOptions(file).ok());
  file.binary = false;
  file.priority = 1;
  EXPECT_FALSE(ValidateBenchOptions(file).ok());

  BenchOptions zero = ok;
  zero.requests = 0;
  EXPECT_FALSE(ValidateBenchOptions(zero).ok());
  zero = ok;
  zero.duration = std::chrono::duration<double>(0);
  EXPECT_FALSE(ValidateBenchOptions(zero).ok());
  zero = ok;
  zero.batch_size = 0;
  EXPECT_FALSE(ValidateBenchOptions(zero).ok());
}

}  // namespace
}  // namespace weft
