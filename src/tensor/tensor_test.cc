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

// Hardening issue, item 1: 4 * (2^62 + 2) wraps to 8 in 64 bits, so a shape of [2^62 + 2] FP32 over 8 bytes passed
// the size check and an encoder then read 2^62 elements.
TEST(TensorTest, ByteSizesThatOverflowAreErrorsNotSmallNumbers) {
  const Shape huge = {4611686018427387906};
  std::vector<std::byte> eight(8);
  Status s = ValidateTensorBytes(DataType::kFp32, huge, eight);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("larger than 2^64 bytes"), std::string::npos) << s.message();
  EXPECT_FALSE(TensorByteSize(DataType::kFp32, huge).ok());
  EXPECT_FALSE(TensorByteSize(DataType::kFp64, {1LL << 61}).ok());
  EXPECT_FALSE(TensorByteSize(DataType::kFp32, {-1}).ok());
  EXPECT_FALSE(TensorByteSize(DataType::kBytes, {1}).ok());
  EXPECT_EQ(*TensorByteSize(DataType::kFp64, {1LL << 60}), size_t{1} << 63);
  EXPECT_EQ(*TensorByteSize(DataType::kInt16, {3, 0, 5}), 0u);
  EXPECT_EQ(*TensorByteSize(DataType::kUint8, {}), 1u);
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
