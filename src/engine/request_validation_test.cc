#include "engine/request_validation.h"

#include <gtest/gtest.h>

#include <tuple>

namespace weft {
namespace {

Tensor Fp32(std::string name, Shape shape) {
  std::byte* unused;
  return Tensor::Allocate(std::move(name), DataType::kFp32, std::move(shape), &unused);
}

ModelConfig TwoInputs() {
  ModelConfig c;
  c.name = "m";
  c.max_batch_size = 8;
  c.inputs = {{"A", DataType::kFp32, {4}, Shape{2, 2}}, {"B", DataType::kFp32, {-1}, std::nullopt}};
  c.outputs = {{"X", DataType::kFp32, {4}, Shape{2, 2}}, {"Y", DataType::kFp32, {1}, std::nullopt}};
  return c;
}

TEST(RequestValidationTest, OrdersAndReshapesInputs) {
  InferenceRequest r;
  r.inputs = {Fp32("B", {3, 5}), Fp32("A", {3, 4})};
  auto prepared = PrepareInputs(TwoInputs(), r);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_EQ((*prepared)[0].name(), "A");
  EXPECT_EQ((*prepared)[0].shape(), (Shape{3, 2, 2}));
  EXPECT_EQ((*prepared)[1].shape(), (Shape{3, 5}));
  EXPECT_EQ((*prepared)[0].data(), r.inputs[1].data());  // zero-copy
  EXPECT_EQ(BatchSize(TwoInputs(), *prepared), 3);
}

TEST(RequestValidationTest, RejectsWhatDoesNotMatchTheConfig) {
  auto check = [](std::vector<Tensor> inputs, std::vector<std::string> outputs, const std::string& needle) {
    InferenceRequest r;
    r.inputs = std::move(inputs);
    r.requested_outputs = std::move(outputs);
    auto prepared = PrepareInputs(TwoInputs(), r);
    ASSERT_FALSE(prepared.ok());
    EXPECT_EQ(prepared.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(prepared.status().message().find(needle), std::string::npos) << prepared.status().message();
  };
  check({Fp32("A", {1, 4})}, {}, "missing input 'B'");
  check({Fp32("A", {1, 4}), Fp32("B", {1, 1}), Fp32("C", {1})}, {}, "unexpected input 'C'");
  check({Fp32("A", {1, 5}), Fp32("B", {1, 1})}, {}, "shape [1,5]");
  check({Fp32("A", {9, 4}), Fp32("B", {9, 1})}, {}, "batch size 9");
  check({Fp32("A", {2, 4}), Fp32("B", {1, 1})}, {}, "differs");
  check({Fp32("A", {1, 4}), Fp32("B", {1, 1})}, {"Z"}, "unknown output 'Z'");
  std::byte* unused;
  check({Tensor::Allocate("A", DataType::kInt32, {1, 4}, &unused), Fp32("B", {1, 1})}, {}, "datatype INT32");
  check({Tensor("A", DataType::kFp32, {1, 4}, nullptr, nullptr, 3), Fp32("B", {1, 1})}, {}, "needs 16 bytes");
}

TEST(RequestValidationTest, FinishOutputsSelectsAndReshapes) {
  InferenceRequest r;
  r.requested_outputs = {"X"};
  auto out = FinishOutputs(TwoInputs(), {}, r, {Fp32("Y", {3, 1}), Fp32("X", {3, 2, 2})}, 3);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 4}));
  r.requested_outputs.clear();
  auto missing = FinishOutputs(TwoInputs(), {}, r, {Fp32("X", {3, 2, 2})}, 3);
  EXPECT_EQ(missing.status().code(), StatusCode::kInternal);
}

TEST(RequestValidationTest, ClassificationAnswersTopClassesWithTheOutputsLabels) {
  InferenceRequest r;
  r.requested_outputs = {"Y", "X"};
  r.class_counts = {{"X", 2}};
  std::byte* x = nullptr;
  Tensor scores = Tensor::Allocate("X", DataType::kFp32, {1, 2, 2}, &x);
  reinterpret_cast<float*>(x)[2] = 1.0f;  // class 2 first, then class 0 (equal values: the lower index)
  auto out = FinishOutputs(TwoInputs(), {{"X", {"zero", "one", "two"}}}, r, {Fp32("Y", {1, 1}), scores}, 1);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].type(), DataType::kFp32);
  const Tensor& top = (*out)[1];
  EXPECT_EQ(top.type(), DataType::kBytes);
  EXPECT_EQ(top.shape(), (Shape{1, 2}));
  std::vector<std::string_view> classes = SplitBytesElements(top.bytes());
  EXPECT_EQ(classes, (std::vector<std::string_view>{"1.000000:2:two", "0.000000:0:zero"}));
}

TEST(RequestValidationTest, ClassificationOfWhatCannotBeClassifiedIsTheClientsError) {
  ModelConfig config = TwoInputs();
  config.outputs.push_back({"S", DataType::kBytes, {1}, std::nullopt});
  InferenceRequest r;
  r.inputs = {Fp32("A", {1, 4}), Fp32("B", {1, 1})};
  for (const auto& [name, count, needle] :
       {std::tuple{"Z", 1u, "unknown output 'Z'"}, std::tuple{"S", 1u, "BYTES"}, std::tuple{"X", 0u, "above 0"}}) {
    r.class_counts = {{name, count}};
    auto prepared = PrepareInputs(config, r);
    ASSERT_FALSE(prepared.ok()) << name;
    EXPECT_EQ(prepared.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(prepared.status().message().find(needle), std::string::npos) << prepared.status().message();
  }
}

}  // namespace
}  // namespace weft
