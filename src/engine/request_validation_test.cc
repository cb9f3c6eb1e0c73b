#include "engine/request_validation.h"

#include <gtest/gtest.h>

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
  auto out = FinishOutputs(TwoInputs(), r, {Fp32("Y", {3, 1}), Fp32("X", {3, 2, 2})}, 3);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 4}));
  r.requested_outputs.clear();
  auto missing = FinishOutputs(TwoInputs(), r, {Fp32("X", {3, 2, 2})}, 3);
  EXPECT_EQ(missing.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace weft
