#include "backends/builtin/builtin_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

namespace weft {
namespace {

using ::testing::HasSubstr;

TensorConfig Spec(std::string name, DataType type, Shape dims) { return {std::move(name), type, std::move(dims), {}}; }

ModelConfig Builtin(std::string model, int max_batch_size, std::vector<TensorConfig> inputs,
                    std::vector<TensorConfig> outputs) {
  ModelConfig config;
  config.name = model;
  config.backend = "weft_builtin";
  config.max_batch_size = max_batch_size;
  config.inputs = std::move(inputs);
  config.outputs = std::move(outputs);
  config.parameters["builtin"] = model;
  return config;
}

ModelConfig AddSubConfig(DataType type) {
  return Builtin("add_sub", 8, {Spec("INPUT0", type, {16}), Spec("INPUT1", type, {16})},
                 {Spec("OUTPUT0", type, {16}), Spec("OUTPUT1", type, {16})});
}

template <typename T>
Tensor Make(std::string name, DataType type, Shape shape, std::vector<T> values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return Tensor::FromBytes(std::move(name), type, std::move(shape), std::move(bytes));
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> out(t.byte_size() / sizeof(T));
  std::memcpy(out.data(), t.data(), t.byte_size());
  return out;
}

std::unique_ptr<ModelInstance> Create(const ModelConfig& config) {
  auto backend = MakeBuiltinBackend();
  EXPECT_TRUE(backend->Validate(config).ok()) << backend->Validate(config).ToString();
  auto instance = backend->CreateInstance(config, "/nonexistent", 0);
  EXPECT_TRUE(instance.ok()) << instance.status().ToString();
  return instance.ok() ? std::move(instance).value() : nullptr;
}

TEST(BuiltinBackendTest, NeedsNoModelFile) { EXPECT_EQ(MakeBuiltinBackend()->DefaultModelFilename(), ""); }

TEST(BuiltinBackendTest, IdentityIsZeroCopyAndRenames) {
  auto config =
      Builtin("identity", 0, {Spec("INPUT0", DataType::kFp32, {-1})}, {Spec("OUTPUT0", DataType::kFp32, {-1})});
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  Tensor in = Make<float>("INPUT0", DataType::kFp32, {3}, {1.5f, -2.f, 3.f});
  auto out = instance->Execute({&in, 1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  const Tensor& o = (*out)[0];
  EXPECT_EQ(o.name(), "OUTPUT0");
  EXPECT_EQ(o.type(), DataType::kFp32);
  EXPECT_EQ(o.shape(), Shape({3}));
  EXPECT_EQ(o.data(), in.data());
  EXPECT_EQ(o.owner(), in.owner());
}

TEST(BuiltinBackendTest, IdentityPassesBytes) {
  auto config =
      Builtin("identity", 0, {Spec("INPUT0", DataType::kBytes, {-1})}, {Spec("OUTPUT0", DataType::kBytes, {-1})});
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  std::vector<std::string> strings = {"weft", "", "bytes"};
  Tensor in = Tensor::FromBytes("INPUT0", DataType::kBytes, {3}, JoinBytesElements(strings));
  auto out = instance->Execute({&in, 1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto elements = SplitBytesElements((*out)[0].bytes());
  ASSERT_EQ(elements.size(), 3u);
  EXPECT_EQ(elements[2], "bytes");
  EXPECT_EQ((*out)[0].data(), in.data());
}

TEST(BuiltinBackendTest, IdentityManyInputs) {
  auto config = Builtin("identity", 4, {Spec("A", DataType::kInt64, {2}), Spec("B", DataType::kUint8, {-1})},
                        {Spec("X", DataType::kInt64, {2}), Spec("Y", DataType::kUint8, {-1})});
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  std::vector<Tensor> in = {Make<int64_t>("A", DataType::kInt64, {1, 2}, {7, 8}),
                            Make<uint8_t>("B", DataType::kUint8, {1, 3}, {1, 2, 3})};
  auto out = instance->Execute(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].name(), "X");
  EXPECT_EQ((*out)[1].name(), "Y");
  EXPECT_EQ(Values<int64_t>((*out)[0]), std::vector<int64_t>({7, 8}));
  EXPECT_EQ(Values<uint8_t>((*out)[1]), std::vector<uint8_t>({1, 2, 3}));
}

TEST(BuiltinBackendTest, ValidateRejectsBadConfigs) {
  auto backend = MakeBuiltinBackend();
  auto identity = Builtin("identity", 0, {Spec("INPUT0", DataType::kFp32, {-1})}, {});
  EXPECT_THAT(backend->Validate(identity).message(), HasSubstr("as many outputs as inputs"));
  identity.outputs = {Spec("OUTPUT0", DataType::kInt32, {-1})};
  EXPECT_THAT(backend->Validate(identity).message(), HasSubstr("must have the type of input"));

  auto unknown = identity;
  unknown.parameters["builtin"] = "matmul";
  EXPECT_EQ(backend->Validate(unknown).code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(backend->Validate(unknown).message(), HasSubstr("'matmul'"));
  unknown.parameters.erase("builtin");
  EXPECT_THAT(backend->Validate(unknown).message(), HasSubstr("'builtin': missing"));
  EXPECT_FALSE(backend->CreateInstance(unknown, "", 0).ok());

  EXPECT_THAT(backend->Validate(AddSubConfig(DataType::kFp16)).message(), HasSubstr("not FP16"));
  EXPECT_THAT(backend->Validate(AddSubConfig(DataType::kBytes)).message(), HasSubstr("not BYTES"));
  auto renamed = AddSubConfig(DataType::kFp32);
  renamed.inputs[1].name = "B";
  EXPECT_THAT(backend->Validate(renamed).message(), HasSubstr("'INPUT1'"));
  auto mixed = AddSubConfig(DataType::kFp32);
  mixed.outputs[1].data_type = DataType::kFp64;
  EXPECT_THAT(backend->Validate(mixed).message(), HasSubstr("'OUTPUT1'"));

  auto sleep = Builtin("sleep", 8, {Spec("INPUT0", DataType::kFp32, {1})}, {Spec("OUTPUT0", DataType::kFp32, {1})});
  EXPECT_TRUE(backend->Validate(sleep).ok());
  sleep.parameters["batch_delay_us"] = "-5";
  EXPECT_THAT(backend->Validate(sleep).message(), HasSubstr("batch_delay_us"));
  sleep.parameters["batch_delay_us"] = "10ms";
  EXPECT_THAT(backend->Validate(sleep).message(), HasSubstr("batch_delay_us"));
}

template <typename T>
void CheckAddSub(DataType type) {
  auto instance = Create(AddSubConfig(type));
  ASSERT_NE(instance, nullptr);
  std::vector<T> a(32), b(32);
  for (int i = 0; i < 32; ++i) a[i] = static_cast<T>(i), b[i] = static_cast<T>(2 * i + 1);
  std::vector<Tensor> in = {Make<T>("INPUT0", type, {2, 16}, a), Make<T>("INPUT1", type, {2, 16}, b)};
  auto out = instance->Execute(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].name(), "OUTPUT0");
  EXPECT_EQ((*out)[1].name(), "OUTPUT1");
  EXPECT_EQ((*out)[0].shape(), Shape({2, 16}));
  EXPECT_EQ((*out)[0].type(), type);
  auto sum = Values<T>((*out)[0]);
  auto difference = Values<T>((*out)[1]);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(sum[i], static_cast<T>(3 * i + 1));
    EXPECT_EQ(difference[i], static_cast<T>(-i - 1));
  }
}

TEST(BuiltinBackendTest, AddSubAllTypes) {
  CheckAddSub<float>(DataType::kFp32);
  CheckAddSub<double>(DataType::kFp64);
  CheckAddSub<int32_t>(DataType::kInt32);
  CheckAddSub<int64_t>(DataType::kInt64);
}

TEST(BuiltinBackendTest, AddSubFollowsConfigOrder) {
  auto config = AddSubConfig(DataType::kInt32);
  std::swap(config.inputs[0], config.inputs[1]);
  std::swap(config.outputs[0], config.outputs[1]);
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  std::vector<int32_t> ones(16, 1), tens(16, 10);
  // Config order is INPUT1, INPUT0.
  std::vector<Tensor> in = {Make<int32_t>("INPUT1", DataType::kInt32, {1, 16}, ones),
                            Make<int32_t>("INPUT0", DataType::kInt32, {1, 16}, tens)};
  auto out = instance->Execute(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].name(), "OUTPUT1");
  EXPECT_EQ(Values<int32_t>((*out)[0])[0], 9);
  EXPECT_EQ((*out)[1].name(), "OUTPUT0");
  EXPECT_EQ(Values<int32_t>((*out)[1])[0], 11);
}

TEST(BuiltinBackendTest, AddSubIntegersWrapAround) {
  auto instance = Create(AddSubConfig(DataType::kInt32));
  ASSERT_NE(instance, nullptr);
  std::vector<int32_t> max(16, INT32_MAX), one(16, 1);
  std::vector<Tensor> in = {Make<int32_t>("INPUT0", DataType::kInt32, {1, 16}, max),
                            Make<int32_t>("INPUT1", DataType::kInt32, {1, 16}, one)};
  auto out = instance->Execute(in);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<int32_t>((*out)[0])[0], INT32_MIN);
}

TEST(BuiltinBackendTest, AddSubRejectsBadInputs) {
  auto config = AddSubConfig(DataType::kFp32);
  config.inputs[0].dims = config.inputs[1].dims = {-1};
  config.outputs[0].dims = config.outputs[1].dims = {-1};
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  std::vector<Tensor> mismatched = {Make<float>("INPUT0", DataType::kFp32, {1, 2}, {1, 2}),
                                    Make<float>("INPUT1", DataType::kFp32, {1, 3}, {1, 2, 3})};
  auto out = instance->Execute(mismatched);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("same shape"));

  std::vector<Tensor> one = {mismatched[0]};
  EXPECT_EQ(instance->Execute(one).status().code(), StatusCode::kInvalidArgument);

  std::vector<Tensor> wrong_type = {Make<double>("INPUT0", DataType::kFp64, {1, 1}, {1}),
                                    Make<double>("INPUT1", DataType::kFp64, {1, 1}, {1})};
  EXPECT_THAT(instance->Execute(wrong_type).status().message(), HasSubstr("must be FP32"));

  // Too few bytes for the shape: an error, not a read past the end.
  std::vector<Tensor> short_bytes = {Make<float>("INPUT0", DataType::kFp32, {1, 4}, {1}),
                                     Make<float>("INPUT1", DataType::kFp32, {1, 4}, {1})};
  EXPECT_EQ(instance->Execute(short_bytes).status().code(), StatusCode::kInvalidArgument);

  std::vector<Tensor> no_batch = {Make<float>("INPUT0", DataType::kFp32, {2}, {1, 2}),
                                  Make<float>("INPUT1", DataType::kFp32, {2}, {1, 2})};
  EXPECT_THAT(instance->Execute(no_batch).status().message(), HasSubstr("the model expects [-1,-1]"));
}

TEST(BuiltinBackendTest, SleepTakesBatchAndItemDelay) {
  auto config = Builtin("sleep", 64, {Spec("INPUT0", DataType::kFp32, {1})}, {Spec("OUTPUT0", DataType::kFp32, {1})});
  config.parameters["batch_delay_us"] = "20000";
  config.parameters["item_delay_us"] = "5000";
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  Tensor in = Make<float>("INPUT0", DataType::kFp32, {4, 1}, {1, 2, 3, 4});
  auto start = std::chrono::steady_clock::now();
  auto out = instance->Execute({&in, 1});
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_GE(elapsed, std::chrono::microseconds(20000 + 4 * 5000));
  EXPECT_EQ((*out)[0].name(), "OUTPUT0");
  EXPECT_EQ((*out)[0].data(), in.data());
}

TEST(BuiltinBackendTest, SleepWithoutBatchingCountsOneItem) {
  auto config = Builtin("sleep", 0, {Spec("INPUT0", DataType::kFp32, {-1})}, {Spec("OUTPUT0", DataType::kFp32, {-1})});
  config.parameters["item_delay_us"] = "20000";
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  Tensor in = Make<float>("INPUT0", DataType::kFp32, {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(instance->Execute({&in, 1}).ok());
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, std::chrono::microseconds(20000));
  EXPECT_LT(elapsed, std::chrono::microseconds(150000));  // not 8 items' worth
}

TEST(BuiltinBackendTest, CounterCountsItemsInExecutionOrder) {
  auto config = Builtin("counter", 8, {Spec("INPUT0", DataType::kFp32, {1})}, {Spec("OUTPUT0", DataType::kInt64, {1})});
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  std::vector<Tensor> batch{Make<float>("INPUT0", DataType::kFp32, {3, 1}, {0, 0, 0})};
  auto first = instance->Execute(batch);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)[0].shape(), (Shape{3, 1}));
  EXPECT_EQ(Values<int64_t>((*first)[0]), (std::vector<int64_t>{0, 1, 2}));
  std::vector<Tensor> one{Make<float>("INPUT0", DataType::kFp32, {1, 1}, {0})};
  EXPECT_EQ(Values<int64_t>((*instance->Execute(one))[0]), (std::vector<int64_t>{3}));
  // A second instance counts on its own.
  auto other = Create(config);
  EXPECT_EQ(Values<int64_t>((*other->Execute(one))[0]), (std::vector<int64_t>{0}));
}

TEST(BuiltinBackendTest, CounterNeedsAnInt64OutputOfOne) {
  auto config = Builtin("counter", 8, {Spec("INPUT0", DataType::kFp32, {1})}, {Spec("OUTPUT0", DataType::kFp32, {1})});
  EXPECT_THAT(MakeBuiltinBackend()->Validate(config).message(), HasSubstr("TYPE_INT64"));
}

TEST(BuiltinBackendTest, GpuSpinValidatesEverywhereAndLoadsOnlyWithAGpu) {
  auto config = Builtin("gpu_spin", 8, {Spec("INPUT0", DataType::kFp32, {4})}, {Spec("OUTPUT0", DataType::kFp32, {4})});
  config.parameters["spin_us"] = "500";
  config.parameters["blocks"] = "8";
  auto backend = MakeBuiltinBackend();
  EXPECT_TRUE(backend->Validate(config).ok()) << backend->Validate(config).ToString();
  auto instance = backend->CreateInstance(config, "/nonexistent", 0);
  if (!instance.ok()) {
    // A build without CUDA, or a machine without a GPU: the reason says which.
    EXPECT_EQ(instance.status().code(), StatusCode::kUnavailable);
    EXPECT_THAT(instance.status().message(), HasSubstr("gpu_spin needs a GPU"));
    return;
  }
  // With a GPU, but no CUDA stream handed over: the CPU device cannot run it.
  std::vector<Tensor> batch{Make<float>("INPUT0", DataType::kFp32, {1, 4}, {1, 2, 3, 4})};
  EXPECT_EQ((*instance)->Execute(batch).status().code(), StatusCode::kUnavailable);
}

TEST(BuiltinBackendTest, GpuSpinRejectsBadParameters) {
  auto config = Builtin("gpu_spin", 8, {Spec("INPUT0", DataType::kFp32, {4})}, {Spec("OUTPUT0", DataType::kFp32, {4})});
  config.parameters["blocks"] = "0";
  EXPECT_THAT(MakeBuiltinBackend()->Validate(config).message(), HasSubstr("blocks"));
}

}  // namespace
}  // namespace weft
