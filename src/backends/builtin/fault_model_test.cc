#include "backends/builtin/fault_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/builtin/builtin_backend.h"

namespace weft {
namespace {

using ::testing::HasSubstr;

TensorConfig Spec(std::string name, DataType type, Shape dims) { return {std::move(name), type, std::move(dims), {}}; }

// A fault model through the builtin backend, as a repository would configure it.
ModelConfig FaultConfig(int max_batch_size, std::vector<TensorConfig> inputs, std::vector<TensorConfig> outputs) {
  ModelConfig config;
  config.name = "fault";
  config.backend = "weft_builtin";
  config.max_batch_size = max_batch_size;
  config.inputs = std::move(inputs);
  config.outputs = std::move(outputs);
  config.parameters["builtin"] = "fault";
  return config;
}

// INPUT0 FP32 [1] -> OUTPUT0, batching up to 8.
ModelConfig Simple() {
  return FaultConfig(8, {Spec("INPUT0", DataType::kFp32, {1})}, {Spec("OUTPUT0", DataType::kFp32, {1})});
}

// FAULT_RATE first, so that the data input is not at the output's position.
ModelConfig WithRateInput() {
  return FaultConfig(8, {Spec("FAULT_RATE", DataType::kFp32, {1}), Spec("INPUT0", DataType::kInt32, {2})},
                     {Spec("OUTPUT0", DataType::kInt32, {2})});
}

template <typename T>
Tensor Make(std::string name, DataType type, Shape shape, std::vector<T> values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return Tensor::FromBytes(std::move(name), type, std::move(shape), std::move(bytes));
}

// A batch of `items` items of Simple()'s input.
std::vector<Tensor> Batch(int64_t items) {
  return {Make<float>("INPUT0", DataType::kFp32, {items, 1}, std::vector<float>(items, 1.f))};
}

std::unique_ptr<ModelInstance> Create(const ModelConfig& config, int index = 0) {
  auto backend = MakeBuiltinBackend();
  EXPECT_TRUE(backend->Validate(config).ok()) << backend->Validate(config).ToString();
  auto instance = backend->CreateInstance(config, "/nonexistent", index);
  EXPECT_TRUE(instance.ok()) << instance.status().ToString();
  return instance.ok() ? std::move(instance).value() : nullptr;
}

Status ValidateWith(const std::string& key, const std::string& value) {
  auto config = Simple();
  config.parameters[key] = value;
  return MakeBuiltinBackend()->Validate(config);
}

TEST(FaultModelTest, DefaultsPassThroughLikeIdentity) {
  auto config = FaultConfig(0, {Spec("A", DataType::kFp32, {-1}), Spec("B", DataType::kBytes, {-1})},
                            {Spec("X", DataType::kFp32, {-1}), Spec("Y", DataType::kBytes, {-1})});
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  std::vector<Tensor> in = {
      Make<float>("A", DataType::kFp32, {3}, {1.5f, -2.f, 3.f}),
      Tensor::FromBytes("B", DataType::kBytes, {2}, JoinBytesElements(std::vector<std::string>{"weft", "fault"}))};
  for (int i = 0; i < 100; ++i) {
    auto out = instance->Execute(in);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->size(), 2u);
    EXPECT_EQ((*out)[0].name(), "X");
    EXPECT_EQ((*out)[1].name(), "Y");
    EXPECT_EQ((*out)[0].shape(), Shape({3}));
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ((*out)[k].data(), in[k].data());
      EXPECT_EQ((*out)[k].owner(), in[k].owner());
      EXPECT_EQ((*out)[k].byte_size(), in[k].byte_size());
    }
  }
}

TEST(FaultModelTest, FailureRateOneFailsEveryExecutionAndZeroNone) {
  auto always = Simple();
  always.parameters["failure_rate"] = "1";
  auto failing = Create(always);
  auto never = Simple();
  never.parameters["failure_rate"] = "0";
  auto passing = Create(never);
  ASSERT_NE(failing, nullptr);
  ASSERT_NE(passing, nullptr);
  for (int i = 0; i < 200; ++i) {
    auto failed = failing->Execute(Batch(2));
    EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
    EXPECT_EQ(failed.status().message(), "fault: injected failure");
    EXPECT_TRUE(passing->Execute(Batch(2)).ok());
  }
}

int Failures(ModelInstance& instance, int executions) {
  int failures = 0;
  for (int i = 0; i < executions; ++i) {
    auto out = instance.Execute(Batch(1));
    if (!out.ok()) {
      EXPECT_EQ(out.status().message(), "fault: injected failure");
      ++failures;
    }
  }
  return failures;
}

TEST(FaultModelTest, SeededHalfRateFailsAboutHalf) {
  auto config = Simple();
  config.parameters["failure_rate"] = "0.5";
  config.parameters["seed"] = "42";
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  const int failures = Failures(*instance, 2000);
  EXPECT_GE(failures, 800);
  EXPECT_LE(failures, 1200);
}

TEST(FaultModelTest, SeedMakesEachInstanceReproducible) {
  auto config = Simple();
  config.parameters["failure_rate"] = "0.5";
  config.parameters["seed"] = "7";
  auto outcomes = [&config](int index) {
    auto instance = Create(config, index);
    std::vector<bool> ok;
    for (int i = 0; i < 64; ++i) ok.push_back(instance->Execute(Batch(1)).ok());
    return ok;
  };
  EXPECT_EQ(outcomes(0), outcomes(0));
  EXPECT_EQ(outcomes(3), outcomes(3));
  // seed + index: another instance of the model draws another sequence (equal by chance with odds 2^-64).
  EXPECT_NE(outcomes(0), outcomes(1));
}

TEST(FaultModelTest, FaultRateOfOneItemFailsTheBatch) {
  auto instance = Create(WithRateInput());
  ASSERT_NE(instance, nullptr);
  auto batch = [](std::vector<float> rates) {
    const int64_t items = static_cast<int64_t>(rates.size());
    return std::vector<Tensor>{
        Make<float>("FAULT_RATE", DataType::kFp32, {items, 1}, rates),
        Make<int32_t>("INPUT0", DataType::kInt32, {items, 2}, std::vector<int32_t>(2 * items, 5))};
  };
  for (int i = 0; i < 50; ++i) {
    auto failed = instance->Execute(batch({0, 0, 1, 0}));
    EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
    EXPECT_THAT(failed.status().message(), HasSubstr("fault: injected failure"));
    EXPECT_THAT(failed.status().message(), HasSubstr("batch item 2"));

    auto in = batch({0, 0, 0, 0});
    auto passed = instance->Execute(in);
    ASSERT_TRUE(passed.ok()) << passed.status().ToString();
    // FAULT_RATE is control only: the one output is INPUT0's tensor.
    ASSERT_EQ(passed->size(), 1u);
    EXPECT_EQ((*passed)[0].name(), "OUTPUT0");
    EXPECT_EQ((*passed)[0].type(), DataType::kInt32);
    EXPECT_EQ((*passed)[0].data(), in[1].data());
  }
}

TEST(FaultModelTest, FaultRateIsClampedAndNanCountsAsZero) {
  auto instance = Create(WithRateInput());
  ASSERT_NE(instance, nullptr);
  auto one = [](float rate) {
    return std::vector<Tensor>{Make<float>("FAULT_RATE", DataType::kFp32, {1, 1}, {rate}),
                               Make<int32_t>("INPUT0", DataType::kInt32, {1, 2}, {1, 2})};
  };
  for (int i = 0; i < 50; ++i) {
    EXPECT_FALSE(instance->Execute(one(7)).ok());
    EXPECT_FALSE(instance->Execute(one(std::numeric_limits<float>::infinity())).ok());
    EXPECT_TRUE(instance->Execute(one(-3)).ok());
    EXPECT_TRUE(instance->Execute(one(std::nanf(""))).ok());
  }
}

TEST(FaultModelTest, OomAboveBatch) {
  auto config = Simple();
  config.parameters["oom_above_batch"] = "4";
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  EXPECT_TRUE(instance->Execute(Batch(4)).ok());
  auto out = instance->Execute(Batch(5));
  EXPECT_EQ(out.status().code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(out.status().message(), "fault: out of memory at batch size 5 (limit 4)");
  // Not a crash: the instance still serves batches it can hold.
  EXPECT_TRUE(instance->Execute(Batch(1)).ok());
}

TEST(FaultModelTest, OomWithoutBatchingCountsOneItem) {
  auto config = FaultConfig(0, {Spec("INPUT0", DataType::kFp32, {-1})}, {Spec("OUTPUT0", DataType::kFp32, {-1})});
  config.parameters["oom_above_batch"] = "1";
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  Tensor in = Make<float>("INPUT0", DataType::kFp32, {6}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(instance->Execute({&in, 1}).ok());
}

TEST(FaultModelTest, CrashedInstanceFailsForeverAndANewOneServes) {
  auto config = Simple();
  config.parameters["crash_rate"] = "1";
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  for (int i = 0; i < 20; ++i) {
    auto out = instance->Execute(Batch(1));
    EXPECT_EQ(out.status().code(), StatusCode::kInternal);
    EXPECT_EQ(out.status().message(), "fault: instance crashed");
  }
  config.parameters["crash_rate"] = "0";
  auto fresh = Create(config);
  ASSERT_NE(fresh, nullptr);
  EXPECT_TRUE(fresh->Execute(Batch(1)).ok());
}

TEST(FaultModelTest, CrashStaysAfterTheDrawThatCausedIt) {
  // With a seeded rate below 1 the crash comes at some execution; from then on, every execution fails with it.
  auto config = Simple();
  config.parameters["crash_rate"] = "0.1";
  config.parameters["seed"] = "1";
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  int first_crash = -1;
  for (int i = 0; i < 500; ++i) {
    auto out = instance->Execute(Batch(1));
    if (first_crash < 0 && !out.ok()) first_crash = i;
    if (first_crash >= 0) {
      EXPECT_EQ(out.status().message(), "fault: instance crashed") << "execution " << i;
    }
  }
  EXPECT_GE(first_crash, 0);
}

TEST(FaultModelTest, HangTakesAtLeastHangMs) {
  auto config = Simple();
  config.parameters["hang_ms"] = "50";
  config.parameters["hang_rate"] = "1";
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  auto start = std::chrono::steady_clock::now();
  auto out = instance->Execute(Batch(1));
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_GE(elapsed, std::chrono::milliseconds(50));
}

TEST(FaultModelTest, HangRateDefaultsToOne) {
  auto config = Simple();
  config.parameters["hang_ms"] = "30";
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(instance->Execute(Batch(1)).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(30));
}

TEST(FaultModelTest, DelayComesBeforeEveryExecutionEvenAFailedOne) {
  auto config = Simple();
  config.parameters["delay_us"] = "20000";
  config.parameters["failure_rate"] = "1";
  auto instance = Create(config);
  ASSERT_NE(instance, nullptr);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(instance->Execute(Batch(1)).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::microseconds(20000));
}

TEST(FaultModelTest, ValidateRefusesBadRates) {
  for (const char* key : {"failure_rate", "hang_rate", "crash_rate"}) {
    for (const char* value : {"abc", "1.5", "-0.1", "2", "nan", "0.5x", " 0.5", ""}) {
      Status status = ValidateWith(key, value);
      EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << key << "=" << value;
      EXPECT_THAT(status.message(), HasSubstr(std::string("parameters '") + key + "': expected a number from 0 to 1"))
          << key << "=" << value;
      EXPECT_THAT(status.message(), HasSubstr(std::string("got '") + value + "'"));
    }
    EXPECT_TRUE(ValidateWith(key, "0").ok());
    EXPECT_TRUE(ValidateWith(key, "1").ok());
    EXPECT_TRUE(ValidateWith(key, "0.25").ok());
  }
}

TEST(FaultModelTest, ValidateRefusesBadIntegers) {
  for (const char* key : {"delay_us", "hang_ms", "oom_above_batch", "seed"}) {
    for (const char* value : {"-1", "abc", "1.5"}) {
      Status status = ValidateWith(key, value);
      EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << key << "=" << value;
      EXPECT_THAT(status.message(), HasSubstr(std::string("parameters '") + key + "'")) << key << "=" << value;
    }
    EXPECT_TRUE(ValidateWith(key, "3").ok());
  }
}

TEST(FaultModelTest, ValidateRefusesMismatchedDataInputsAndOutputs) {
  auto backend = MakeBuiltinBackend();
  auto extra_output = WithRateInput();
  extra_output.outputs.push_back(Spec("OUTPUT1", DataType::kInt32, {2}));
  EXPECT_EQ(backend->Validate(extra_output).code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(backend->Validate(extra_output).message(), HasSubstr("as many outputs as inputs other than FAULT_RATE"));

  auto other_type = Simple();
  other_type.outputs[0].data_type = DataType::kInt32;
  EXPECT_THAT(backend->Validate(other_type).message(), HasSubstr("output 'OUTPUT0' must have the data_type"));

  auto other_dims = Simple();
  other_dims.outputs[0].dims = {2};
  EXPECT_THAT(backend->Validate(other_dims).message(), HasSubstr("output 'OUTPUT0' must have the data_type, dims"));

  auto only_rate = FaultConfig(8, {Spec("FAULT_RATE", DataType::kFp32, {1})}, {Spec("OUTPUT0", DataType::kFp32, {1})});
  EXPECT_EQ(backend->Validate(only_rate).code(), StatusCode::kInvalidArgument);

  // CreateInstance validates too.
  EXPECT_EQ(backend->CreateInstance(extra_output, "", 0).status().code(), StatusCode::kInvalidArgument);
}

TEST(FaultModelTest, ValidateRefusesAFaultRateOfTheWrongTypeOrDims) {
  auto backend = MakeBuiltinBackend();
  auto fp64 = WithRateInput();
  fp64.inputs[0].data_type = DataType::kFp64;
  EXPECT_EQ(backend->Validate(fp64).code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(backend->Validate(fp64).message(), HasSubstr("input 'FAULT_RATE' must be TYPE_FP32 with dims [1]"));

  auto two = WithRateInput();
  two.inputs[0].dims = {2};
  EXPECT_THAT(backend->Validate(two).message(), HasSubstr("'FAULT_RATE' must be TYPE_FP32 with dims [1]"));

  auto reshaped = WithRateInput();
  reshaped.inputs[0].reshape = Shape{1, 1};
  EXPECT_THAT(backend->Validate(reshaped).message(), HasSubstr("'FAULT_RATE'"));
}

}  // namespace
}  // namespace weft
