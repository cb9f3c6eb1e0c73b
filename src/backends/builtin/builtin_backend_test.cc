#include "backends/builtin/builtin_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

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

ModelConfig AffineConfig(int max_batch_size, Shape dims) {
  return Builtin("affine", max_batch_size, {Spec("INPUT0", DataType::kFp32, dims)},
                 {Spec("OUTPUT0", DataType::kFp32, dims)});
}

// A version directory of its own per test, removed afterwards.
class AffineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "weft_affine_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary | std::ios::trunc) << text;
  }
  Result<std::unique_ptr<ModelInstance>> Load(const ModelConfig& config) {
    return MakeBuiltinBackend()->CreateInstance(config, dir_, 0);
  }
  // The error for model.txt holding `text`.
  Status Refusal(const std::string& text) {
    Write("model.txt", text);
    auto instance = Load(AffineConfig(8, {2}));
    return instance.ok() ? Status::Ok() : instance.status();
  }

  std::filesystem::path dir_;
};

TEST_F(AffineTest, ScalesAndOffsetsABatch) {
  Write("model.txt", "  2.5\n-1e0 \n");
  auto instance = Load(AffineConfig(8, {2}));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  Tensor in = Make<float>("INPUT0", DataType::kFp32, {3, 2}, {0, 1, 2, -4, 0.5f, 100});
  auto out = (*instance)->Execute({&in, 1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name(), "OUTPUT0");
  EXPECT_EQ((*out)[0].type(), DataType::kFp32);
  EXPECT_EQ((*out)[0].shape(), Shape({3, 2}));
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{-1, 1.5f, 4, -11, 0.25f, 249}));
}

TEST_F(AffineTest, WithoutBatchingAndFromUnalignedInput) {
  Write("weights", "-2 3");
  auto config = AffineConfig(0, {-1});
  config.default_model_filename = "weights";
  auto instance = Load(config);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  // Three floats one byte into a buffer, as they may sit in a request body.
  auto owner = std::make_shared<std::vector<std::byte>>(1 + 3 * sizeof(float));
  const float values[] = {1, 0, -1.5f};
  std::memcpy(owner->data() + 1, values, sizeof(values));
  Tensor in("INPUT0", DataType::kFp32, {3}, owner, owner->data() + 1, sizeof(values));
  auto out = (*instance)->Execute({&in, 1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{1, 3, 6}));
}

TEST_F(AffineTest, VersionsWithDifferentFilesGiveDifferentOutputs) {
  Write("model.txt", "1 0");
  auto first = Load(AffineConfig(0, {1}));
  Write("model.txt", "1 7");  // replaced in place: a new instance reads the new numbers, the old keeps its own
  auto second = Load(AffineConfig(0, {1}));
  ASSERT_TRUE(first.ok() && second.ok());
  Tensor in = Make<float>("INPUT0", DataType::kFp32, {1}, {1});
  EXPECT_EQ(Values<float>((*(*first)->Execute({&in, 1}))[0]), std::vector<float>{1});
  EXPECT_EQ(Values<float>((*(*second)->Execute({&in, 1}))[0]), std::vector<float>{8});
}

TEST_F(AffineTest, RefusesAnythingButTwoNumbers) {
  const std::string file = (dir_ / "model.txt").string();
  const std::string expected = file + ": expected two numbers 'scale offset'";
  struct Case {
    std::string text;
    std::string detail;
  };
  const Case cases[] = {
      {"garbage", "'garbage'"},
      {"2 garbage", "'garbage'"},
      {"2", "found 1"},
      {"2 3 4", "more than two"},
      {"", "empty"},
      {" \n\t ", "found 0"},
      {"2,3", "'2,3'"},
      {"0x10 1", "'0x10'"},
      {"+2 1", "'+2'"},
      {"nan 1", "'nan'"},
      {"1 inf", "'inf'"},
      {"1e39 0", "FP32's range"},
      {"1e999 0", "'1e999'"},
      {std::string("1\0 2", 4), "'1?'"},
  };
  for (const Case& c : cases) {
    Status status = Refusal(c.text);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << "'" << c.text << "'";
    EXPECT_THAT(status.message(), HasSubstr(expected)) << "'" << c.text << "'";
    EXPECT_THAT(status.message(), HasSubstr(c.detail)) << "'" << c.text << "'";
  }
}

TEST_F(AffineTest, ReadsAtMostFourKibibytes) {
  // Two valid numbers, but past the bound: refused without reading the rest.
  Status status = Refusal("2 3" + std::string(1 << 20, ' '));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("at most 4096 bytes"));
  // Exactly 4096 bytes is still a model file.
  EXPECT_TRUE(Refusal("2 3" + std::string(4093, '\n')).ok());
}

TEST_F(AffineTest, MissingFileIsNotFound) {
  auto instance = Load(AffineConfig(8, {2}));
  EXPECT_EQ(instance.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(instance.status().message(), HasSubstr((dir_ / "model.txt").string() + ": model file not found"));
  auto config = AffineConfig(8, {2});
  config.default_model_filename = "custom.txt";
  EXPECT_THAT(Load(config).status().message(), HasSubstr("custom.txt"));
}

TEST_F(AffineTest, RefusesADirectoryInPlaceOfTheFile) {
  std::filesystem::create_directory(dir_ / "model.txt");
  auto instance = Load(AffineConfig(8, {2}));
  EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(instance.status().message(), HasSubstr("not a regular file"));
}

TEST(BuiltinBackendTest, AffineValidateRefusesOtherShapesOfConfig) {
  auto backend = MakeBuiltinBackend();
  EXPECT_TRUE(backend->Validate(AffineConfig(8, {4})).ok());

  auto fp64 = AffineConfig(8, {4});
  fp64.inputs[0].data_type = fp64.outputs[0].data_type = DataType::kFp64;
  EXPECT_EQ(backend->Validate(fp64).code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(backend->Validate(fp64).message(),
              HasSubstr("'INPUT0' data_type: supports TYPE_FP32 only, not TYPE_FP64"));
  auto int_output = AffineConfig(8, {4});
  int_output.outputs[0].data_type = DataType::kInt32;
  EXPECT_THAT(backend->Validate(int_output).message(), HasSubstr("'OUTPUT0' data_type"));

  auto two_inputs = AffineConfig(8, {4});
  two_inputs.inputs.push_back(Spec("INPUT1", DataType::kFp32, {4}));
  EXPECT_THAT(backend->Validate(two_inputs).message(), HasSubstr("one input and one output"));

  auto other_dims = AffineConfig(8, {4});
  other_dims.outputs[0].dims = {2, 2};
  EXPECT_THAT(backend->Validate(other_dims).message(), HasSubstr("output 'OUTPUT0' dims"));

  // CreateInstance validates before it reads any file.
  EXPECT_EQ(backend->CreateInstance(fp64, "/nonexistent", 0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace weft
