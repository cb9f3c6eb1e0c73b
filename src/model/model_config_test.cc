#include "model/model_config.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>

#include "model/backend.h"

namespace weft {
namespace {

ModelConfig Mlp() {
  ModelConfig c;
  c.name = "mlp";
  c.platform = "pytorch_libtorch";
  c.max_batch_size = 8;
  c.inputs = {{"INPUT0", DataType::kFp32, {64}, std::nullopt}};
  c.outputs = {{"OUTPUT0", DataType::kFp32, {10}, std::nullopt}};
  return c;
}

TEST(ModelConfigTest, AcceptsValidConfig) {
  EXPECT_TRUE(ValidateModelConfig(Mlp()).ok());
  EXPECT_EQ(FullShape(Mlp(), Mlp().inputs[0]), (Shape{-1, 64}));
}

TEST(ModelConfigTest, RejectsDuplicatesBadDimsAndReshape) {
  auto c = Mlp();
  c.inputs.push_back(c.inputs[0]);
  EXPECT_NE(ValidateModelConfig(c).message().find("duplicate"), std::string::npos);
  c = Mlp();
  c.outputs[0].dims = {0};
  EXPECT_FALSE(ValidateModelConfig(c).ok());
  c = Mlp();
  c.inputs[0].reshape = Shape{8, 9};
  EXPECT_NE(ValidateModelConfig(c).message().find("reshape"), std::string::npos);
  c = Mlp();
  c.dynamic_batching = DynamicBatchingConfig{};
  c.dynamic_batching->preferred_batch_size = {16};
  EXPECT_NE(ValidateModelConfig(c).message().find("preferred_batch_size"), std::string::npos);
}

class NullBackend : public Backend {
 public:
  Status Validate(const ModelConfig&) const override { return Status::Ok(); }
  Result<std::unique_ptr<ModelInstance>> CreateInstance(const ModelConfig&, const std::filesystem::path&,
                                                        int) const override {
    return Unimplemented("null");
  }
  std::string DefaultModelFilename() const override { return ""; }
};

// Triton's rule: a group's count is per listed GPU, and the instances go `count` to each GPU in the listed order.
// A config may come from a client (the repository API's load override): its model file must stay in the version
// directory.
TEST(ModelConfigTest, TheDefaultModelFileStaysInTheVersionDirectory) {
  ModelConfig c = Mlp();
  for (const char* ok : {"model.pt", "sub/model.onnx", "..model.pt"}) {
    c.default_model_filename = ok;
    EXPECT_TRUE(ValidateModelConfig(c).ok()) << ok;
  }
  for (const char* bad : {"/etc/passwd", "../other/1/model.pt", "sub/../../x", ".."}) {
    c.default_model_filename = bad;
    Status s = ValidateModelConfig(c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("default_model_filename"), std::string::npos) << s.message();
  }
}

TEST(ModelConfigTest, InstanceGroupCountIsPerListedGpu) {
  auto c = Mlp();
  EXPECT_EQ(c.InstanceCount(), 1);
  c.instance_groups = {{.name = "gpus", .count = 2, .kind = InstanceKind::kGpu, .gpus = {3, 1}},
                       {.name = "cpu", .count = 3, .kind = InstanceKind::kCpu, .gpus = {}}};
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  EXPECT_EQ(c.instance_groups[0].Instances(), 4);
  EXPECT_EQ(c.InstanceCount(), 7);
  std::vector<int> placed;
  for (int i = 0; i < c.instance_groups[0].Instances(); ++i) placed.push_back(c.instance_groups[0].GpuOf(i));
  EXPECT_EQ(placed, (std::vector<int>{3, 3, 1, 1}));
  EXPECT_EQ(c.instance_groups[1].GpuOf(0), -1);
}

TEST(ModelConfigTest, RejectsGpusOnCpuGroupsAndNegativeGpus) {
  auto c = Mlp();
  c.instance_groups = {{.name = "cpu", .count = 1, .kind = InstanceKind::kCpu, .gpus = {0}}};
  EXPECT_NE(ValidateModelConfig(c).message().find("KIND_CPU"), std::string::npos);
  c.instance_groups = {{.name = "gpu", .count = 1, .kind = InstanceKind::kGpu, .gpus = {-1}}};
  EXPECT_NE(ValidateModelConfig(c).message().find("negative"), std::string::npos);
  // libtorch keeps a device index in 8 bits: gpu 256 once ran on GPU 0.
  for (int gpu : {128, 256}) {
    c.instance_groups = {{.name = "gpu", .count = 1, .kind = InstanceKind::kGpu, .gpus = {gpu}}};
    EXPECT_NE(ValidateModelConfig(c).message().find("past the largest index, 127"), std::string::npos) << gpu;
  }
  c.instance_groups = {{.name = "gpu", .count = 1, .kind = InstanceKind::kGpu, .gpus = {127}}};
  EXPECT_TRUE(ValidateModelConfig(c).ok());
}

// A model with a variable-length FP32 input "x" [-1, 4] and a BYTES input "s" [2], and one valid warm-up sample.
// BatchTuningEnabled's answer for a config it accepts.
bool Tuned(const ModelConfig& c) {
  Result<bool> tuned = BatchTuningEnabled(c);
  EXPECT_TRUE(tuned.ok()) << tuned.status().ToString();
  return tuned.ok() && *tuned;
}

TEST(ModelConfigTest, BatchTuningIsOnByDefaultForADynamicBatcherWithoutPreferredSizes) {
  ModelConfig c = Mlp();
  EXPECT_FALSE(Tuned(c));  // no dynamic_batching
  c.dynamic_batching = DynamicBatchingConfig{};
  EXPECT_TRUE(Tuned(c));
  c.dynamic_batching->preferred_batch_size = {4};
  EXPECT_FALSE(Tuned(c));  // the config chose its sizes
  c.parameters["weft.batch_tuning"] = " on ";
  EXPECT_TRUE(Tuned(c));
  c.parameters["weft.batch_tuning"] = "off";
  c.dynamic_batching->preferred_batch_size.clear();
  EXPECT_FALSE(Tuned(c));
  c.max_batch_size = 1;
  c.parameters.erase("weft.batch_tuning");
  EXPECT_FALSE(Tuned(c));  // nothing to tune
}

TEST(ModelConfigTest, RunOnCallerIsOnUnlessTheConfigSaysOff) {
  ModelConfig c = Mlp();
  EXPECT_TRUE(RunOnCallerEnabled(c).value());
  c.parameters["weft.run_on_caller"] = " off ";
  EXPECT_FALSE(RunOnCallerEnabled(c).value());
  c.parameters["weft.run_on_caller"] = "on";
  EXPECT_TRUE(RunOnCallerEnabled(c).value());
  c.parameters["weft.run_on_caller"] = "sometimes";
  EXPECT_NE(RunOnCallerEnabled(c).status().message().find("weft.run_on_caller"), std::string::npos);
  EXPECT_EQ(ValidateModelConfig(c).code(), StatusCode::kInvalidArgument);
}

TEST(ModelConfigTest, BatchTuningRefusesOtherValuesAndOnWhereNothingBatches) {
  ModelConfig c = Mlp();
  c.dynamic_batching = DynamicBatchingConfig{};
  c.parameters["weft.batch_tuning"] = "yes";
  Status bad = ValidateModelConfig(c);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("weft.batch_tuning"), std::string::npos) << bad.message();
  c.parameters["weft.batch_tuning"] = "on";
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  c.dynamic_batching.reset();
  bad = ValidateModelConfig(c);
  EXPECT_NE(bad.message().find("needs dynamic_batching"), std::string::npos) << bad.message();
}

ModelConfig WithWarmup(int max_batch_size = 8) {
  ModelConfig c;
  c.name = "m";
  c.max_batch_size = max_batch_size;
  c.inputs = {{"x", DataType::kFp32, {-1, 4}, std::nullopt}, {"s", DataType::kBytes, {2}, std::nullopt}};
  c.outputs = {{"y", DataType::kFp32, {4}, std::nullopt}};
  c.warmup = {
      {.name = "w",
       .batch_size = 1,
       .inputs = {{"x", {.data_type = DataType::kFp32, .dims = {3, 4}}},
                  {"s", {.data_type = DataType::kBytes, .dims = {2}, .source = WarmupInputConfig::Source::kRandom}}},
       .count = 2}};
  return c;
}

TEST(WarmupValidationTest, AcceptsSamplesThatFitTheInputs) {
  EXPECT_TRUE(ValidateModelConfig(WithWarmup()).ok()) << ValidateModelConfig(WithWarmup()).ToString();
  auto c = WithWarmup();
  c.warmup[0].batch_size = 8;  // max_batch_size
  c.warmup[0].count = ConfigLimits::kMaxWarmupCount;
  c.warmup[0].inputs["x"].source = WarmupInputConfig::Source::kFile;
  c.warmup[0].inputs["x"].file = "sub/./x.bin";
  EXPECT_TRUE(ValidateModelConfig(c).ok()) << ValidateModelConfig(c).ToString();
  c.warmup[0].batch_size = 0;  // skipped at run time, as in Triton
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  c.warmup.resize(ConfigLimits::kMaxWarmupSamples, c.warmup[0]);
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  // A model that does not batch takes 1 (and 0, skipped).
  c = WithWarmup(/*max_batch_size=*/0);
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  c.warmup[0].batch_size = 0;
  EXPECT_TRUE(ValidateModelConfig(c).ok());
}

TEST(WarmupValidationTest, ErrorsNameTheSampleTheInputAndTheProblem) {
  struct Case {
    std::function<void(ModelConfig&)> change;
    std::string message;
  };
  using Source = WarmupInputConfig::Source;
  const std::vector<Case> cases = {
      {[](ModelConfig& c) { c.warmup[0].inputs.erase("s"); },
       "model_warmup[0] 'w': input 's' is missing: a sample gives every input of the model"},
      {[](ModelConfig& c) { c.warmup[0].inputs["t"] = c.warmup[0].inputs["s"]; },
       "model_warmup[0] 'w': input 't': the model has no such input"},
      {[](ModelConfig& c) { c.warmup[0].inputs["x"].data_type = DataType::kFp16; },
       "model_warmup[0] 'w': input 'x': data_type TYPE_FP16 does not match the input's TYPE_FP32"},
      {[](ModelConfig& c) { c.warmup[0].inputs["x"].data_type = DataType::kInvalid; },
       "model_warmup[0] 'w': input 'x': data_type TYPE_INVALID does not match the input's TYPE_FP32"},
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].dims = {-1, 4};
       },
       "model_warmup[0] 'w': input 'x': dims [-1,4] do not fit the input's dims [-1,4] (every dimension given, -1 "
       "of the input by a positive one)"},
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].dims = {0, 4};
       },
       "input 'x': dims [0,4] do not fit"},
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].dims = {3, 5};
       },
       "input 'x': dims [3,5] do not fit"},
      {[](ModelConfig& c) { c.warmup[0].inputs["x"].dims = {3}; }, "input 'x': dims [3] do not fit"},
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].dims = {1, 3, 4};
       },
       "input 'x': dims [1,3,4] do not fit"},
      {[](ModelConfig& c) { c.warmup[0].batch_size = 9; },
       "model_warmup[0] 'w': batch_size 9 is over max_batch_size 8"},
      {[](ModelConfig& c) {
         c.max_batch_size = 0;
         c.warmup[0].batch_size = 2;
       },
       "model_warmup[0] 'w': batch_size 2 must be 1 for a model that does not batch (max_batch_size 0)"},
      {[](ModelConfig& c) { c.warmup[0].count = 1001; }, "model_warmup[0] 'w': count 1001 is over the limit of 1000"},
      {[](ModelConfig& c) { c.warmup.resize(65, c.warmup[0]); }, "model_warmup: 65 samples, at most 64 are allowed"},
      // 2^26 x 4 floats are exactly 1 GiB, and the BYTES input adds 8 bytes; so do 8 items of 2^23 x 4.
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].dims = {int64_t{1} << 26, 4};
       },
       "model_warmup[0] 'w': input 's': the sample's inputs take more than 1024 MiB, the limit"},
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].dims = {int64_t{1} << 23, 4};
         c.warmup[0].batch_size = 8;
       },
       "input 's': the sample's inputs take more than 1024 MiB"},
      // Products that overflow int64 and uint64 are errors, not small numbers.
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].dims = {int64_t{1} << 62, 4};
       },
       "input 'x': the sample's inputs take more than 1024 MiB"},
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].dims = {INT64_MAX, 4};
       },
       "input 'x': the sample's inputs take more than 1024 MiB"},
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].source = Source::kFile;
         c.warmup[0].inputs["x"].file = "";
       },
       "model_warmup[0] 'w': input 'x': input_data_file is empty"},
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].source = Source::kFile;
         c.warmup[0].inputs["x"].file = "/etc/passwd";
       },
       "model_warmup[0] 'w': input 'x': input_data_file '/etc/passwd' must be relative to warmup/"},
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].source = Source::kFile;
         c.warmup[0].inputs["x"].file = "../config.pbtxt";
       },
       "input 'x': input_data_file '../config.pbtxt' must not leave warmup/ (\"..\")"},
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].source = Source::kFile;
         c.warmup[0].inputs["x"].file = "a/../../b";
       },
       "input_data_file 'a/../../b' must not leave warmup/"},
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].source = Source::kFile;
         c.warmup[0].inputs["x"].file = "a/..";
       },
       "input_data_file 'a/..' must not leave warmup/"},
      {[](ModelConfig& c) {
         c.warmup[0].inputs["x"].source = Source::kFile;
         c.warmup[0].inputs["x"].file = std::string("x\0y", 3);
       },
       "input 'x': input_data_file contains a NUL byte"},
  };
  for (const Case& k : cases) {
    ModelConfig c = WithWarmup();
    k.change(c);
    Status status = ValidateModelConfig(c);
    ASSERT_FALSE(status.ok()) << k.message;
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(k.message), std::string::npos) << status.message();
  }
  // Names with dots that are not "..", and a second sample that is wrong: the index says which.
  ModelConfig c = WithWarmup();
  c.warmup[0].inputs["x"].source = Source::kFile;
  c.warmup[0].inputs["x"].file = "..x/x..";
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  c.warmup.push_back(c.warmup[0]);
  c.warmup[1].name = "second";
  c.warmup[1].count = 5000;
  EXPECT_EQ(ValidateModelConfig(c).message(), "model_warmup[1] 'second': count 5000 is over the limit of 1000");
}

TEST(BackendRegistryTest, ResolvesPlatformAndBackend) {
  BackendRegistry registry;
  auto backend = std::make_shared<NullBackend>();
  registry.Register("pytorch", {"pytorch_libtorch"}, backend);
  auto c = Mlp();
  EXPECT_EQ(registry.Find(c).value().get(), backend.get());
  c.platform = "";
  c.backend = "pytorch";
  EXPECT_TRUE(registry.Find(c).ok());
  c.backend = "tensorrt";
  EXPECT_NE(registry.Find(c).status().message().find("not available"), std::string::npos);
  c.backend = "";
  c.platform = "tensorrt_plan";
  EXPECT_NE(registry.Find(c).status().message().find("not supported"), std::string::npos);
}

}  // namespace
}  // namespace weft
