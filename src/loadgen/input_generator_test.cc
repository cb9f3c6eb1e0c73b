#include "loadgen/input_generator.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>

namespace weft {
namespace {

ModelMetadata Model(std::vector<TensorMetadata> inputs) {
  return ModelMetadata{.name = "m", .inputs = std::move(inputs)};
}

TEST(ResolveInputShapesTest, BatchSizeFillsTheBatchDim) {
  ModelMetadata m = Model({{"x", DataType::kFp32, {-1, 3, 4}}});
  auto shapes = ResolveInputShapes(m, {.batch_size = 8, .max_batch_size = 64});
  ASSERT_TRUE(shapes.ok()) << shapes.status().ToString();
  EXPECT_EQ((*shapes)[0], (std::vector<int64_t>{8, 3, 4}));
  // Without the configuration, a leading -1 on every input says the model batches.
  auto guessed = ResolveInputShapes(m, {.batch_size = 2});
  ASSERT_TRUE(guessed.ok());
  EXPECT_EQ((*guessed)[0], (std::vector<int64_t>{2, 3, 4}));
  EXPECT_FALSE(ResolveInputShapes(m, {.batch_size = 65, .max_batch_size = 64}).ok());
}

TEST(ResolveInputShapesTest, ShapeFlagFillsVariableDims) {
  ModelMetadata m = Model({{"img", DataType::kUint8, {-1, 3, -1, -1}}, {"k", DataType::kInt32, {-1, 1}}});
  InputGenerationOptions o{.batch_size = 4, .shapes = {{"img", {3, 32, 16}}}, .max_batch_size = 8};
  auto shapes = ResolveInputShapes(m, o);
  ASSERT_TRUE(shapes.ok()) << shapes.status().ToString();
  EXPECT_EQ((*shapes)[0], (std::vector<int64_t>{4, 3, 32, 16}));
  EXPECT_EQ((*shapes)[1], (std::vector<int64_t>{4, 1}));

  auto missing = ResolveInputShapes(m, {.batch_size = 4, .max_batch_size = 8});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--shape img"), std::string::npos) << missing.status().message();

  EXPECT_FALSE(ResolveInputShapes(m, {.shapes = {{"img", {4, 32, 16}}}, .max_batch_size = 8}).ok())
      << "contradicts the fixed dim 3";
  EXPECT_FALSE(ResolveInputShapes(m, {.shapes = {{"img", {3, 32}}}, .max_batch_size = 8}).ok()) << "wrong rank";
  EXPECT_FALSE(ResolveInputShapes(m, {.shapes = {{"nope", {1}}}, .max_batch_size = 8}).ok()) << "unknown input";
}

TEST(ResolveInputShapesTest, ModelWithoutBatchingTakesFullShapes) {
  ModelMetadata identity = Model({{"INPUT0", DataType::kFp32, {-1}}});
  auto shapes = ResolveInputShapes(identity, {.shapes = {{"INPUT0", {16}}}, .max_batch_size = 0});
  ASSERT_TRUE(shapes.ok()) << shapes.status().ToString();
  EXPECT_EQ((*shapes)[0], (std::vector<int64_t>{16}));
  EXPECT_FALSE(ResolveInputShapes(identity, {.max_batch_size = 0}).ok()) << "the -1 needs --shape";
  EXPECT_FALSE(ResolveInputShapes(identity, {.batch_size = 2, .shapes = {{"INPUT0", {16}}}, .max_batch_size = 0}).ok())
      << "no batching, so no batch size";
}

TEST(GenerateInputsTest, ByteSizesMatchShapesAndTypes) {
  ModelMetadata m = Model({{"f", DataType::kFp32, {-1, 5}},
                           {"h", DataType::kFp16, {-1, 3}},
                           {"b", DataType::kBool, {-1, 7}},
                           {"i", DataType::kInt64, {-1, 2}},
                           {"s", DataType::kBytes, {-1, 3}}});
  auto inputs = GenerateInputs(m, {.batch_size = 2, .max_batch_size = 4, .string_length = 5});
  ASSERT_TRUE(inputs.ok()) << inputs.status().ToString();
  ASSERT_EQ(inputs->size(), 5u);
  EXPECT_EQ((*inputs)[0].data.size(), 2u * 5 * 4);
  EXPECT_EQ((*inputs)[1].data.size(), 2u * 3 * 2);
  EXPECT_EQ((*inputs)[2].data.size(), 2u * 7);
  EXPECT_EQ((*inputs)[3].data.size(), 2u * 2 * 8);
  EXPECT_EQ((*inputs)[4].data.size(), 2u * 3 * (4 + 5));
  EXPECT_EQ((*inputs)[4].element_count(), 6);
}

TEST(GenerateInputsTest, ValuesAreInTheirRangesAndBytesAreLengthPrefixed) {
  ModelMetadata m = Model({{"f", DataType::kFp32, {1000}},
                           {"u", DataType::kUint8, {1000}},
                           {"b", DataType::kBool, {1000}},
                           {"s", DataType::kBytes, {2}}});
  auto inputs = GenerateInputs(m, {.max_batch_size = 0, .string_length = 3});
  ASSERT_TRUE(inputs.ok()) << inputs.status().ToString();
  const std::string& f = (*inputs)[0].data;
  bool negative = false, positive = false;
  for (size_t i = 0; i < f.size(); i += 4) {
    float v;
    std::memcpy(&v, f.data() + i, 4);
    ASSERT_GE(v, -1.0f);
    ASSERT_LE(v, 1.0f);
    negative = negative || v < 0;
    positive = positive || v > 0;
  }
  EXPECT_TRUE(negative && positive);
  for (char c : (*inputs)[1].data) EXPECT_LT(static_cast<unsigned char>(c), 100);
  for (char c : (*inputs)[2].data) EXPECT_TRUE(c == 0 || c == 1);
  const std::string& s = (*inputs)[3].data;
  ASSERT_EQ(s.size(), 2u * (4 + 3));
  EXPECT_EQ(s.substr(0, 4), std::string("\x03\x00\x00\x00", 4));
  EXPECT_EQ(s.substr(7, 4), std::string("\x03\x00\x00\x00", 4));
  for (char c : s.substr(4, 3)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << c;
}

TEST(GenerateInputsTest, TheSeedFixesTheData) {
  ModelMetadata m = Model({{"f", DataType::kFp32, {64}}});
  auto a = GenerateInputs(m, {.max_batch_size = 0, .seed = 1});
  auto b = GenerateInputs(m, {.max_batch_size = 0, .seed = 1});
  auto c = GenerateInputs(m, {.max_batch_size = 0, .seed = 2});
  EXPECT_EQ((*a)[0].data, (*b)[0].data);
  EXPECT_NE((*a)[0].data, (*c)[0].data);
}

TEST(GenerateInputsTest, HalfValuesAreExactOnTheirGrid) {
  ModelMetadata m = Model({{"h", DataType::kFp16, {500}}});
  auto inputs = GenerateInputs(m, {.max_batch_size = 0});
  ASSERT_TRUE(inputs.ok());
  const std::string& h = (*inputs)[0].data;
  for (size_t i = 0; i < h.size(); i += 2) {
    uint16_t bits =
        static_cast<uint16_t>(static_cast<unsigned char>(h[i]) | (static_cast<unsigned char>(h[i + 1]) << 8));
    float v = HalfBitsToFloat(bits);
    ASSERT_GE(v, -1.0f);
    ASSERT_LE(v, 1.0f);
    EXPECT_EQ(v * 1024, std::round(v * 1024)) << bits;
  }
  EXPECT_EQ(HalfBitsToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfBitsToFloat(0xbc00), -1.0f);
  EXPECT_EQ(HalfBitsToFloat(0x0001), std::ldexp(1.0f, -24));
}

TEST(GenerateInputsTest, RefusesInputsOverTwoGigabytes) {
  ModelMetadata m = Model({{"f", DataType::kFp32, {1 << 20, 1 << 10}}});
  EXPECT_FALSE(GenerateInputs(m, {.max_batch_size = 0}).ok());
}

// A server's metadata may list many inputs, each under the bound alone (a thousand of 1.5 GiB would be 1.5 TB). The
// bound is on their sum, checked before an input is allocated.
TEST(GenerateInputsTest, RefusesInputsOverTwoGigabytesTogether) {
  const int64_t just_under = (int64_t{2} << 30) - 512;
  ModelMetadata m = Model({{"small", DataType::kUint8, {1024}}, {"large", DataType::kUint8, {just_under}}});
  Result<std::vector<GeneratedInput>> refused = GenerateInputs(m, {.max_batch_size = 0});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("together exceed 2 GiB (at input 'large')"), std::string::npos)
      << refused.status().message();
  // Two inputs that fit together are generated.
  auto two =
      GenerateInputs(Model({{"a", DataType::kUint8, {1024}}, {"b", DataType::kFp32, {256}}}), {.max_batch_size = 0});
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ((*two)[0].data.size() + (*two)[1].data.size(), 2048u);
}

}  // namespace
}  // namespace weft
