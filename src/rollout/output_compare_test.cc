#include "rollout/output_compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace weft {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

template <typename T>
Tensor Make(std::string name, DataType type, Shape shape, const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return Tensor::FromBytes(std::move(name), type, std::move(shape), std::move(bytes));
}

Tensor Fp32(std::string name, Shape shape, const std::vector<float>& values) {
  return Make<float>(std::move(name), DataType::kFp32, std::move(shape), values);
}

Tensor Fp32(const std::vector<float>& values) { return Fp32("out", {static_cast<int64_t>(values.size())}, values); }

// The same element of `primary` and `candidate`, compared alone.
Comparison CompareOne(float primary, float candidate) {
  const std::vector<Tensor> p = {Fp32({primary})};
  const std::vector<Tensor> c = {Fp32({candidate})};
  return CompareOutputs(p, c);
}

Tensor OnGpu(const Tensor& t) {
  return Tensor(t.name(), t.type(), t.shape(), t.owner(), t.data(), t.byte_size(),
                MemoryPlace{.kind = MemoryKind::kGpu, .device_id = 0});
}

TEST(OutputCompareTest, IdenticalOutputs) {
  const std::vector<Tensor> p = {Fp32("a", {2}, {1, 2}), Make<int32_t>("b", DataType::kInt32, {3}, {1, 2, 3})};
  const Comparison c = CompareOutputs(p, p);
  EXPECT_TRUE(c.compared);
  EXPECT_FALSE(c.mismatch);
  EXPECT_EQ(c.max_abs, 0);
  EXPECT_EQ(c.max_rel, 0);
  EXPECT_EQ(c.top1_rows, 1u);  // "a": one row of two floats
  EXPECT_EQ(c.top1_agree, 1u);
}

TEST(OutputCompareTest, LargestAbsoluteAndRelativeDifferences) {
  const std::vector<Tensor> p = {Fp32("a", {3}, {1, 100, -4})};
  const std::vector<Tensor> c = {Fp32("a", {3}, {1.5f, 101, -4})};
  const Comparison r = CompareOutputs(p, c);
  EXPECT_TRUE(r.compared);
  EXPECT_FALSE(r.mismatch);
  EXPECT_DOUBLE_EQ(r.max_abs, 1);    // 100 -> 101
  EXPECT_DOUBLE_EQ(r.max_rel, 0.5);  // 1 -> 1.5
  EXPECT_DOUBLE_EQ(CompareOne(-4, -5).max_rel, 0.25);
}

TEST(OutputCompareTest, OutputsAreMatchedByNameNotOrder) {
  const std::vector<Tensor> p = {Fp32("a", {1}, {1}), Fp32("b", {1}, {2})};
  const std::vector<Tensor> c = {Fp32("b", {1}, {2}), Fp32("a", {1}, {1})};
  const Comparison r = CompareOutputs(p, c);
  EXPECT_FALSE(r.mismatch);
  EXPECT_EQ(r.max_abs, 0);
}

TEST(OutputCompareTest, ZeroPrimary) {
  const Comparison zero_both = CompareOne(0, 0);
  EXPECT_EQ(zero_both.max_rel, 0);
  const Comparison zero_primary = CompareOne(0, 1e-6f);
  EXPECT_EQ(zero_primary.max_rel, kInf);
  EXPECT_NEAR(zero_primary.max_abs, 1e-6, 1e-12);
  EXPECT_EQ(CompareOne(0.0f, -0.0f).max_abs, 0);
}

TEST(OutputCompareTest, NanAndInfinities) {
  EXPECT_EQ(CompareOne(kNan, kNan).max_abs, 0);
  EXPECT_EQ(CompareOne(kNan, kNan).max_rel, 0);
  EXPECT_EQ(CompareOne(kNan, 1).max_abs, kInf);
  EXPECT_EQ(CompareOne(kNan, 1).max_rel, kInf);
  EXPECT_EQ(CompareOne(1, kNan).max_abs, kInf);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(CompareOne(inf, inf).max_abs, 0);
  EXPECT_EQ(CompareOne(-inf, -inf).max_rel, 0);
  EXPECT_EQ(CompareOne(inf, -inf).max_abs, kInf);
  EXPECT_EQ(CompareOne(inf, 1).max_abs, kInf);
  EXPECT_EQ(CompareOne(inf, 1).max_rel, kInf);
  EXPECT_FALSE(std::isnan(CompareOne(1, inf).max_rel));
}

TEST(OutputCompareTest, MissingOutputIsAMismatch) {
  const std::vector<Tensor> both = {Fp32("a", {1}, {1}), Fp32("b", {1}, {1})};
  const std::vector<Tensor> only_a = {Fp32("a", {1}, {1})};
  EXPECT_TRUE(CompareOutputs(both, only_a).mismatch);
  EXPECT_TRUE(CompareOutputs(only_a, both).mismatch);
  // What could be compared still is.
  EXPECT_TRUE(CompareOutputs(only_a, both).compared);
  const std::vector<Tensor> renamed = {Fp32("z", {1}, {1})};
  EXPECT_TRUE(CompareOutputs(only_a, renamed).mismatch);
}

TEST(OutputCompareTest, TypeOrShapeDifferenceIsAMismatch) {
  const std::vector<Tensor> p = {Fp32("a", {2, 2}, {1, 2, 3, 4})};
  const std::vector<Tensor> reshaped = {Fp32("a", {4}, {1, 2, 3, 4})};
  EXPECT_TRUE(CompareOutputs(p, reshaped).mismatch);
  const std::vector<Tensor> retyped = {Make<int32_t>("a", DataType::kInt32, {2, 2}, {1, 2, 3, 4})};
  EXPECT_TRUE(CompareOutputs(p, retyped).mismatch);
}

TEST(OutputCompareTest, BufferOfTheWrongSizeIsAMismatch) {
  const std::vector<Tensor> p = {Fp32("a", {3}, {1, 2, 3})};
  const std::vector<Tensor> short_buffer = {Fp32("a", {3}, {1, 2})};
  const Comparison r = CompareOutputs(p, short_buffer);
  EXPECT_TRUE(r.mismatch);
}

TEST(OutputCompareTest, NothingToCompare) {
  const Comparison r = CompareOutputs({}, {});
  EXPECT_FALSE(r.compared);
  EXPECT_FALSE(r.mismatch);
}

TEST(OutputCompareTest, GpuOutputsAreLeftOut) {
  const Tensor a = Fp32("a", {2}, {1, 2});
  const Tensor a_other = Fp32("a", {2}, {5, 6});
  const std::vector<Tensor> p = {OnGpu(a)};
  const std::vector<Tensor> c = {OnGpu(a_other)};
  const Comparison gpu = CompareOutputs(p, c);
  EXPECT_FALSE(gpu.compared);
  EXPECT_FALSE(gpu.mismatch);
  EXPECT_EQ(gpu.max_abs, 0);

  // One side on the GPU is enough to leave the output out.
  const std::vector<Tensor> host = {a_other};
  EXPECT_FALSE(CompareOutputs(p, host).compared);

  // A host output beside it is compared.
  const std::vector<Tensor> p2 = {OnGpu(a), Fp32("b", {1}, {1})};
  const std::vector<Tensor> c2 = {OnGpu(a_other), Fp32("b", {1}, {3})};
  const Comparison mixed = CompareOutputs(p2, c2);
  EXPECT_TRUE(mixed.compared);
  EXPECT_DOUBLE_EQ(mixed.max_abs, 2);

  // Shapes are known without the bytes.
  const std::vector<Tensor> reshaped = {OnGpu(Fp32("a", {1, 2}, {1, 2}))};
  EXPECT_TRUE(CompareOutputs(p, reshaped).mismatch);
}

TEST(OutputCompareTest, PinnedHostMemoryIsCompared) {
  const Tensor a = Fp32("a", {1}, {1});
  const Tensor pinned(a.name(), a.type(), a.shape(), a.owner(), a.data(), a.byte_size(),
                      MemoryPlace{.kind = MemoryKind::kCpuPinned});
  const std::vector<Tensor> p = {pinned};
  const std::vector<Tensor> c = {Fp32("a", {1}, {2})};
  const Comparison r = CompareOutputs(p, c);
  EXPECT_TRUE(r.compared);
  EXPECT_DOUBLE_EQ(r.max_abs, 1);
}

TEST(OutputCompareTest, Top1PerRow) {
  // Three rows of three: the last row's arg max differs.
  const std::vector<Tensor> p = {Fp32("logits", {3, 3}, {0.1f, 0.9f, 0, 5, 1, 2, 0, 0, 1})};
  const std::vector<Tensor> c = {Fp32("logits", {3, 3}, {0.2f, 0.8f, 0, 4, 1, 2, 0, 2, 1})};
  const Comparison r = CompareOutputs(p, c);
  EXPECT_EQ(r.top1_rows, 3u);
  EXPECT_EQ(r.top1_agree, 2u);
}

TEST(OutputCompareTest, Top1RowsOfHigherRank) {
  // 2 x 2 rows of 2.
  const std::vector<Tensor> p = {Fp32("x", {2, 2, 2}, {1, 0, 1, 0, 0, 1, 0, 1})};
  const std::vector<Tensor> c = {Fp32("x", {2, 2, 2}, {1, 0, 0, 1, 0, 1, 0, 1})};
  const Comparison r = CompareOutputs(p, c);
  EXPECT_EQ(r.top1_rows, 4u);
  EXPECT_EQ(r.top1_agree, 3u);
}

TEST(OutputCompareTest, Top1FirstMaximumWins) {
  // The primary ties at 0 and 1: its arg max is 0. The candidate's is 1.
  EXPECT_EQ(CompareOutputs(std::vector<Tensor>{Fp32("x", {1, 3}, {2, 2, 0})},
                           std::vector<Tensor>{Fp32("x", {1, 3}, {1.9f, 2, 0})})
                .top1_agree,
            0u);
  EXPECT_EQ(CompareOutputs(std::vector<Tensor>{Fp32("x", {1, 3}, {2, 2, 0})},
                           std::vector<Tensor>{Fp32("x", {1, 3}, {2, 2, 1})})
                .top1_agree,
            1u);
}

TEST(OutputCompareTest, Top1NanRanksHighest) {
  const std::vector<Tensor> p = {Fp32("x", {2, 3}, {1, kNan, 3, kNan, 1, 0})};
  const std::vector<Tensor> c = {Fp32("x", {2, 3}, {1, kNan, 5, 0, 1, 0})};
  const Comparison r = CompareOutputs(p, c);
  EXPECT_EQ(r.top1_rows, 2u);
  EXPECT_EQ(r.top1_agree, 1u);  // row 0: both at the NaN; row 1: 0 against 1
}

TEST(OutputCompareTest, Top1OnlyForRowsOfTwoOrMoreFloats) {
  const auto rows = [](const Tensor& p, const Tensor& c) {
    return CompareOutputs(std::vector<Tensor>{p}, std::vector<Tensor>{c}).top1_rows;
  };
  EXPECT_EQ(rows(Fp32("x", {}, {1}), Fp32("x", {}, {2})), 0u);                      // rank 0
  EXPECT_EQ(rows(Fp32("x", {3, 1}, {1, 2, 3}), Fp32("x", {3, 1}, {1, 2, 3})), 0u);  // rows of one
  EXPECT_EQ(rows(Fp32("x", {0, 4}, {}), Fp32("x", {0, 4}, {})), 0u);                // no rows
  EXPECT_EQ(
      rows(Make<int32_t>("x", DataType::kInt32, {1, 2}, {1, 2}), Make<int32_t>("x", DataType::kInt32, {1, 2}, {2, 1})),
      0u);
  EXPECT_EQ(
      rows(Make<double>("x", DataType::kFp64, {1, 2}, {1, 2}), Make<double>("x", DataType::kFp64, {1, 2}, {2, 1})), 1u);
}

TEST(OutputCompareTest, IntegersAreComparedExactly) {
  const int64_t big = (int64_t{1} << 60) + 1;
  const Comparison i64 = CompareOutputs(std::vector<Tensor>{Make<int64_t>("x", DataType::kInt64, {1}, {big})},
                                        std::vector<Tensor>{Make<int64_t>("x", DataType::kInt64, {1}, {big + 1})});
  EXPECT_EQ(i64.max_abs, 1);  // as doubles both would round to 2^60
  const Comparison extremes =
      CompareOutputs(std::vector<Tensor>{Make<int64_t>("x", DataType::kInt64, {1}, {INT64_MIN})},
                     std::vector<Tensor>{Make<int64_t>("x", DataType::kInt64, {1}, {INT64_MAX})});
  EXPECT_DOUBLE_EQ(extremes.max_abs, 18446744073709551615.0);
  const Comparison u8 = CompareOutputs(std::vector<Tensor>{Make<uint8_t>("x", DataType::kUint8, {2}, {250, 0})},
                                       std::vector<Tensor>{Make<uint8_t>("x", DataType::kUint8, {2}, {5, 3})});
  EXPECT_EQ(u8.max_abs, 245);
  EXPECT_EQ(u8.max_rel, kInf);  // 0 -> 3
  const Comparison i8 = CompareOutputs(std::vector<Tensor>{Make<int8_t>("x", DataType::kInt8, {1}, {-128})},
                                       std::vector<Tensor>{Make<int8_t>("x", DataType::kInt8, {1}, {127})});
  EXPECT_EQ(i8.max_abs, 255);
  const Comparison u64 =
      CompareOutputs(std::vector<Tensor>{Make<uint64_t>("x", DataType::kUint64, {1}, {UINT64_MAX})},
                     std::vector<Tensor>{Make<uint64_t>("x", DataType::kUint64, {1}, {UINT64_MAX - 2})});
  EXPECT_EQ(u64.max_abs, 2);
  for (DataType type : {DataType::kUint16, DataType::kInt16}) {
    const Comparison r = CompareOutputs(std::vector<Tensor>{Make<uint16_t>("x", type, {1}, {10})},
                                        std::vector<Tensor>{Make<uint16_t>("x", type, {1}, {12})});
    EXPECT_EQ(r.max_abs, 2);
    EXPECT_DOUBLE_EQ(r.max_rel, 0.2);
  }
  for (DataType type : {DataType::kUint32, DataType::kInt32}) {
    const Comparison r = CompareOutputs(std::vector<Tensor>{Make<uint32_t>("x", type, {1}, {7})},
                                        std::vector<Tensor>{Make<uint32_t>("x", type, {1}, {7})});
    EXPECT_TRUE(r.compared);
    EXPECT_EQ(r.max_abs, 0);
  }
}

TEST(OutputCompareTest, BoolsCompareAsTruth) {
  const Comparison r = CompareOutputs(std::vector<Tensor>{Make<uint8_t>("x", DataType::kBool, {3}, {0, 1, 1})},
                                      std::vector<Tensor>{Make<uint8_t>("x", DataType::kBool, {3}, {1, 1, 2})});
  EXPECT_EQ(r.max_abs, 1);  // 0 -> 1; 1 -> 2 is true against true
  EXPECT_EQ(r.max_rel, kInf);
}

TEST(OutputCompareTest, HalfPrecisionTypesAreComparedAsNumbers) {
  // FP16: 1.0 is 0x3c00, the next one up 1 + 2^-10; 0x7c00 is infinity, 0x7e00 NaN, 0x0001 the smallest subnormal.
  const auto fp16 = [](std::vector<uint16_t> p, std::vector<uint16_t> c) {
    const auto n = static_cast<int64_t>(p.size());
    return CompareOutputs(std::vector<Tensor>{Make<uint16_t>("x", DataType::kFp16, {n}, p)},
                          std::vector<Tensor>{Make<uint16_t>("x", DataType::kFp16, {n}, c)});
  };
  EXPECT_DOUBLE_EQ(fp16({0x3c00}, {0x3c01}).max_abs, std::ldexp(1.0, -10));
  EXPECT_DOUBLE_EQ(fp16({0x3c00}, {0xbc00}).max_abs, 2);  // 1 against -1
  EXPECT_DOUBLE_EQ(fp16({0x0000}, {0x0001}).max_abs, std::ldexp(1.0, -24));
  EXPECT_DOUBLE_EQ(fp16({0x7bff}, {0x7bfe}).max_abs, 32);  // 65504 against 65472
  EXPECT_EQ(fp16({0x7c00, 0x7e00}, {0x7c00, 0x7e01}).max_abs, 0);
  EXPECT_EQ(fp16({0x7c00}, {0x7bff}).max_abs, kInf);
  // Top-1 on FP16 rows: 1.0 against 2.0 (0x4000).
  EXPECT_EQ(CompareOutputs(std::vector<Tensor>{Make<uint16_t>("x", DataType::kFp16, {1, 2}, {0x3c00, 0x4000})},
                           std::vector<Tensor>{Make<uint16_t>("x", DataType::kFp16, {1, 2}, {0x4000, 0x3c00})})
                .top1_agree,
            0u);

  // BF16: 1.0 is 0x3f80, the next one up 1 + 2^-7.
  const Comparison bf16 =
      CompareOutputs(std::vector<Tensor>{Make<uint16_t>("x", DataType::kBf16, {1, 2}, {0x3f80, 0})},
                     std::vector<Tensor>{Make<uint16_t>("x", DataType::kBf16, {1, 2}, {0x3f81, 0})});
  EXPECT_DOUBLE_EQ(bf16.max_abs, std::ldexp(1.0, -7));
  EXPECT_EQ(bf16.top1_rows, 1u);
  EXPECT_EQ(bf16.top1_agree, 1u);
}

TEST(OutputCompareTest, Fp64) {
  const Comparison r = CompareOutputs(std::vector<Tensor>{Make<double>("x", DataType::kFp64, {2}, {1e300, 2})},
                                      std::vector<Tensor>{Make<double>("x", DataType::kFp64, {2}, {1e300, 2.5})});
  EXPECT_DOUBLE_EQ(r.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(r.max_rel, 0.25);
}

TEST(OutputCompareTest, BytesAreEqualOrAMismatch) {
  const std::vector<std::string> words = {"cat", "dog"};
  const std::vector<std::string> other = {"cat", "dot"};
  const auto bytes = [](const std::vector<std::string>& w) {
    return Tensor::FromBytes("labels", DataType::kBytes, {2}, JoinBytesElements(w));
  };
  const std::vector<Tensor> p = {bytes(words)};
  const std::vector<Tensor> same = {bytes(words)};
  const std::vector<Tensor> differs = {bytes(other)};
  const Comparison equal = CompareOutputs(p, same);
  EXPECT_TRUE(equal.compared);
  EXPECT_FALSE(equal.mismatch);
  EXPECT_EQ(equal.max_abs, 0);
  EXPECT_TRUE(CompareOutputs(p, differs).mismatch);
}

TEST(OutputCompareTest, UnalignedBuffers) {
  // A view one byte into a buffer, as a tensor inside a request body may be.
  auto storage = std::make_shared<std::vector<std::byte>>(1 + 2 * sizeof(double));
  const double values[2] = {1, 2};
  std::memcpy(storage->data() + 1, values, sizeof(values));
  const Tensor unaligned("x", DataType::kFp64, {1, 2}, storage, storage->data() + 1, sizeof(values));
  const Comparison r = CompareOutputs(std::vector<Tensor>{unaligned},
                                      std::vector<Tensor>{Make<double>("x", DataType::kFp64, {1, 2}, {1, 3})});
  EXPECT_TRUE(r.compared);
  EXPECT_DOUBLE_EQ(r.max_abs, 1);
  EXPECT_EQ(r.top1_agree, 1u);
}

}  // namespace
}  // namespace weft
