#include "backends/common/model_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft {
namespace {

using ::testing::HasSubstr;

ModelConfig Config(int max_batch_size, Shape dims, std::optional<Shape> reshape = std::nullopt) {
  ModelConfig config;
  config.name = "m";
  config.max_batch_size = max_batch_size;
  config.inputs = {{"x", DataType::kFp32, std::move(dims), std::move(reshape)}};
  config.outputs = {{"y", DataType::kFp32, {2}, {}}};
  return config;
}

Tensor Zeros(Shape shape, DataType type = DataType::kFp32) {
  std::byte* data;
  return Tensor::Allocate("x", type, std::move(shape), &data);
}

TEST(ModelChecksTest, FrameworkShapeAddsBatchAndPrefersReshape) {
  auto config = Config(4, {6}, Shape{2, 3});
  EXPECT_EQ(FrameworkShape(config, config.inputs[0]), Shape({-1, 2, 3}));
  config.max_batch_size = 0;
  EXPECT_EQ(FrameworkShape(config, config.inputs[0]), Shape({2, 3}));
}

TEST(ModelChecksTest, CheckInputs) {
  auto config = Config(4, {-1, 3});
  std::vector<Tensor> ok = {Zeros({2, 5, 3})};
  EXPECT_TRUE(CheckInputs(config, ok).ok());
  EXPECT_EQ(BatchSize(config, ok), 2);

  std::vector<Tensor> none;
  EXPECT_THAT(CheckInputs(config, none).message(), HasSubstr("expects 1 inputs, got 0"));
  std::vector<Tensor> wrong_rank = {Zeros({5, 3})};
  EXPECT_THAT(CheckInputs(config, wrong_rank).message(), HasSubstr("the model expects [-1,-1,3]"));
  std::vector<Tensor> wrong_dim = {Zeros({1, 5, 4})};
  EXPECT_EQ(CheckInputs(config, wrong_dim).code(), StatusCode::kInvalidArgument);
  std::vector<Tensor> wrong_type = {Zeros({1, 5, 3}, DataType::kInt32)};
  EXPECT_THAT(CheckInputs(config, wrong_type).message(), HasSubstr("must be FP32, got INT32"));
  Tensor t = Zeros({1, 2, 3});
  std::vector<Tensor> short_bytes = {Tensor("x", DataType::kFp32, {1, 2, 3}, t.owner(), t.data(), 20)};
  EXPECT_THAT(CheckInputs(config, short_bytes).message(), HasSubstr("input 'x'"));
  std::vector<Tensor> on_gpu = {
      Tensor("x", DataType::kFp32, {1, 2, 3}, t.owner(), t.data(), 24, {MemoryKind::kGpu, 0})};
  EXPECT_THAT(CheckInputs(config, on_gpu).message(), HasSubstr("GPU memory"));
}

TEST(ModelChecksTest, CheckOutputWantsTheBatchSize) {
  auto config = Config(4, {2});
  const TensorConfig& y = config.outputs[0];
  EXPECT_TRUE(CheckOutput(config, y, DataType::kFp32, {3, 2}, 3).ok());
  EXPECT_THAT(CheckOutput(config, y, DataType::kFp32, {1, 2}, 3).message(), HasSubstr("the config expects [3,2]"));
  EXPECT_EQ(CheckOutput(config, y, DataType::kFp64, {3, 2}, 3).code(), StatusCode::kInternal);
  config.max_batch_size = 0;
  EXPECT_TRUE(CheckOutput(config, y, DataType::kFp32, {2}, 1).ok());
}

TEST(ModelChecksTest, NonNegativeIntParameter) {
  auto config = Config(0, {1});
  EXPECT_EQ(*NonNegativeIntParameter(config, "n", 7), 7);
  config.parameters["n"] = "42";
  EXPECT_EQ(*NonNegativeIntParameter(config, "n", 7), 42);
  config.parameters["n"] = std::to_string(kMaxIntParameter);
  EXPECT_EQ(*NonNegativeIntParameter(config, "n", 7), kMaxIntParameter);
  for (const char* bad : {"", "-1", "1.5", " 3", "3us", "1099511627777", "9223372036854775807"}) {
    config.parameters["n"] = bad;
    EXPECT_FALSE(NonNegativeIntParameter(config, "n", 7).ok()) << bad;
  }
}

}  // namespace
}  // namespace weft
