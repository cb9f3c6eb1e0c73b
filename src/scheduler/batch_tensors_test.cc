#include "scheduler/batch_tensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace weft {
namespace {

Tensor Floats(std::vector<float> values, Shape shape, std::string name = "x") {
  std::vector<std::byte> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return Tensor::FromBytes(std::move(name), DataType::kFp32, std::move(shape), std::move(bytes));
}

std::vector<float> Values(const Tensor& t) {
  auto v = t.as<float>();
  return {v.begin(), v.end()};
}

Tensor Strings(std::vector<std::string> values, Shape shape) {
  return Tensor::FromBytes("s", DataType::kBytes, std::move(shape), JoinBytesElements(values));
}

TEST(BatchKeyTest, EqualOnlyForTheSameNonBatchShapesAndTypes) {
  auto a = BatchKeyOf({Floats({1, 2}, {1, 2})});
  auto b = BatchKeyOf({Floats({1, 2, 3, 4}, {2, 2})});
  auto c = BatchKeyOf({Floats({1, 2}, {1, 1, 2})});
  auto d = BatchKeyOf({Floats({1, 2, 3}, {1, 3})});
  auto e = BatchKeyOf({Strings({"a", "b"}, {1, 2})});
  ASSERT_TRUE(a && b && c && d && e);
  EXPECT_EQ(*a, *b);  // the batch dimension does not matter
  EXPECT_NE(*a, *c);
  EXPECT_NE(*a, *d);
  EXPECT_NE(*a, *e);
  Tensor gpu("x", DataType::kFp32, {1}, nullptr, nullptr, 4, MemoryPlace{.kind = MemoryKind::kGpu, .device_id = 0});
  EXPECT_FALSE(BatchKeyOf({gpu}));
}

TEST(JoinInputsTest, OneRequestPassesThroughWithoutACopy) {
  std::vector<Tensor> inputs = {Floats({1, 2}, {1, 2})};
  const std::vector<Tensor>* parts[] = {&inputs};
  std::vector<Tensor> joined = JoinInputs(parts);
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0].data(), inputs[0].data());
}

TEST(JoinInputsTest, ConcatenatesAlongTheBatchDimension) {
  std::vector<Tensor> a = {Floats({1, 2}, {1, 2}, "x"), Strings({"p"}, {1, 1})};
  std::vector<Tensor> b = {Floats({3, 4, 5, 6}, {2, 2}, "x"), Strings({"qq", "r"}, {2, 1})};
  const std::vector<Tensor>* parts[] = {&a, &b};
  std::vector<Tensor> joined = JoinInputs(parts);
  ASSERT_EQ(joined.size(), 2u);
  EXPECT_EQ(joined[0].name(), "x");
  EXPECT_EQ(joined[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(Values(joined[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(joined[1].shape(), (Shape{3, 1}));
  auto strings = SplitBytesElements(joined[1].bytes());
  EXPECT_EQ(strings, (std::vector<std::string_view>{"p", "qq", "r"}));
}

TEST(SplitOutputsTest, ViewsIntoTheBatchOutput) {
  Tensor out = Floats({1, 2, 3, 4, 5, 6}, {3, 2}, "y");
  const int64_t sizes[] = {1, 2};
  auto parts = SplitOutputs({out}, sizes);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 2u);
  const Tensor& first = (*parts)[0][0];
  const Tensor& second = (*parts)[1][0];
  EXPECT_EQ(first.shape(), (Shape{1, 2}));
  EXPECT_EQ(second.shape(), (Shape{2, 2}));
  EXPECT_EQ(Values(second), (std::vector<float>{3, 4, 5, 6}));
  // Zero-copy: same owner, data pointer advanced.
  EXPECT_EQ(first.data(), out.data());
  EXPECT_EQ(second.data(), out.data() + 2 * sizeof(float));
  EXPECT_EQ(second.owner(), out.owner());
  EXPECT_EQ(second.name(), "y");
}

TEST(SplitOutputsTest, SplitsBytesAtElementBoundaries) {
  Tensor out = Strings({"a", "bb", "ccc", "dddd"}, {2, 2});
  const int64_t sizes[] = {1, 1};
  auto parts = SplitOutputs({out}, sizes);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(SplitBytesElements((*parts)[0][0].bytes()), (std::vector<std::string_view>{"a", "bb"}));
  EXPECT_EQ(SplitBytesElements((*parts)[1][0].bytes()), (std::vector<std::string_view>{"ccc", "dddd"}));
  EXPECT_EQ((*parts)[1][0].shape(), (Shape{1, 2}));
}

TEST(SplitOutputsTest, ABatchDimensionThatDoesNotMatchIsInternal) {
  const int64_t sizes[] = {1, 2};
  EXPECT_EQ(SplitOutputs({Floats({1, 2}, {2, 1})}, sizes).status().code(), StatusCode::kInternal);
  std::vector<std::byte> short_bytes(4);
  Tensor broken = Tensor::FromBytes("y", DataType::kFp32, {3, 2}, short_bytes);
  EXPECT_EQ(SplitOutputs({broken}, sizes).status().code(), StatusCode::kInternal);
  Tensor bad_strings = Tensor::FromBytes("s", DataType::kBytes, {3}, short_bytes);
  EXPECT_EQ(SplitOutputs({bad_strings}, sizes).status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace weft
