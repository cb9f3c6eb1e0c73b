#include "tensor/tensor.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

TEST(DataTypeTest, NamesRoundTrip) {
  for (auto name : {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32",
                    "FP64", "BYTES", "BF16"}) {
    auto t = DataTypeFromName(name);
    ASSERT_TRUE(t.has_value()) << name;
    EXPECT_EQ(DataTypeName(*t), name);
    EXPECT_EQ(DataTypeFromConfigName(DataTypeConfigName(*t)), t);
  }
  EXPECT_FALSE(DataTypeFromName("fp32").has_value());
  EXPECT_EQ(DataTypeFromConfigName("TYPE_STRING"), DataType::kBytes);
  EXPECT_EQ(DataTypeSize(DataType::kBf16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kBytes), 0u);
}

TEST(TensorTest, ElementCountRejectsNegativeAndOverflow) {
  EXPECT_EQ(ElementCount({2, 3}), 6);
  EXPECT_EQ(ElementCount({}), 1);
  EXPECT_EQ(ElementCount({2, -1}), -1);
  EXPECT_EQ(ElementCount({1LL << 40, 1LL << 40}), -1);
}

TEST(TensorTest, ViewSharesOwnership) {
  auto body = std::make_shared<std::string>(16, 'x');
  std::weak_ptr<std::string> weak = body;
  Tensor t("in", DataType::kFp32, {4}, body, reinterpret_cast<const std::byte*>(body->data()), 16);
  body.reset();
  EXPECT_FALSE(weak.expired());
  Tensor copy = t;
  t = Tensor();
  EXPECT_FALSE(weak.expired());
  copy = Tensor();
  EXPECT_TRUE(weak.expired());
}

TEST(TensorTest, ValidatesFixedSize) {
  std::vector<std::byte> bytes(12);
  EXPECT_TRUE(ValidateTensorBytes(DataType::kFp32, {3}, bytes).ok());
  EXPECT_EQ(ValidateTensorBytes(DataType::kFp32, {4}, bytes).code(), StatusCode::kInvalidArgument);
}

TEST(TensorTest, BytesElementsRoundTripAndValidate) {
  std::vector<std::string> in = {"hello", "", "weft"};
  auto joined = JoinBytesElements(in);
  EXPECT_TRUE(ValidateTensorBytes(DataType::kBytes, {3}, joined).ok());
  EXPECT_FALSE(ValidateTensorBytes(DataType::kBytes, {2}, joined).ok());
  auto split = SplitBytesElements(joined);
  ASSERT_EQ(split.size(), 3u);
  EXPECT_EQ(split[0], "hello");
  EXPECT_EQ(split[1], "");
  EXPECT_EQ(split[2], "weft");
  joined.pop_back();
  EXPECT_FALSE(ValidateTensorBytes(DataType::kBytes, {3}, joined).ok());
}

}  // namespace
}  // namespace weft
