#include "backends/torchscript/torchscript_backend.h"

#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <torch/script.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <thread>

#include "backends/testing/reference_data.h"
#include "backends/torchscript/torch_stream.h"
#include "base/large_buffer.h"
#include "base/testing/process_maps.h"

namespace weft {
namespace {

using ::testing::HasSubstr;

TensorConfig Spec(std::string name, DataType type, Shape dims) { return {std::move(name), type, std::move(dims), {}}; }

ModelConfig MlpConfig() {
  ModelConfig config;
  config.name = "mlp";
  config.platform = "pytorch_libtorch";
  config.max_batch_size = 64;
  config.inputs = {Spec("INPUT0", DataType::kFp32, {64})};
  config.outputs = {Spec("OUTPUT0", DataType::kFp32, {10})};
  return config;
}

ModelConfig PairConfig() {
  ModelConfig config;
  config.name = "pair";
  config.platform = "pytorch_libtorch";
  config.max_batch_size = 32;
  config.inputs = {Spec("INPUT0", DataType::kFp32, {16}), Spec("INPUT1", DataType::kFp32, {16})};
  config.outputs = {Spec("SUM", DataType::kFp32, {16}), Spec("PROD", DataType::kFp32, {16})};
  return config;
}

// One model: `forward` is the TorchScript body, the inputs and outputs have `type`, no batching.
ModelConfig ScriptedConfig(DataType type, size_t outputs = 1) {
  ModelConfig config;
  config.name = "scripted";
  config.backend = "pytorch";
  config.inputs = {Spec("x", type, {-1, -1})};
  for (size_t i = 0; i < outputs; ++i) config.outputs.push_back(Spec("y" + std::to_string(i), type, {-1, -1}));
  return config;
}

class TorchScriptBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "weft_torchscript_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Compiles `source` (a TorchScript class body) into dir_/<file>, the way a user's model.pt looks.
  void SaveScript(const std::string& source, const std::string& file = "model.pt") {
    torch::jit::Module module("Model");
    module.define(source);
    module.save((dir_ / file).string());
  }

  Result<std::unique_ptr<ModelInstance>> Load(const ModelConfig& config, const std::filesystem::path& dir) {
    WEFT_RETURN_IF_ERROR(backend_->Validate(config));
    return backend_->CreateInstance(config, dir, 0);
  }

  std::shared_ptr<const Backend> backend_ = MakeTorchScriptBackend();
  std::filesystem::path dir_;
};

TEST_F(TorchScriptBackendTest, MlpMatchesReference) {
  auto instance = Load(MlpConfig(), examples::VersionDir("mlp"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  auto input = examples::ReadReference("mlp", "input", "INPUT0", DataType::kFp32, {2, 64});
  auto expected = examples::ReadReference("mlp", "output", "OUTPUT0", DataType::kFp32, {2, 10});
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  auto out = (*instance)->Execute({&*input, 1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name(), "OUTPUT0");
  EXPECT_EQ((*out)[0].shape(), Shape({2, 10}));
  EXPECT_LE(examples::MaxAbsDiff((*out)[0], *expected), 1e-4f);
}

TEST_F(TorchScriptBackendTest, MisalignedInputIsCopiedNotMisread) {
  auto instance = Load(MlpConfig(), examples::VersionDir("mlp"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  auto input = examples::ReadReference("mlp", "input", "INPUT0", DataType::kFp32, {2, 64});
  auto expected = examples::ReadReference("mlp", "output", "OUTPUT0", DataType::kFp32, {2, 10});
  ASSERT_TRUE(input.ok() && expected.ok());
  // The tensor at offset 1 of a request body, as a binary-extension request can place it.
  auto body = std::make_shared<std::vector<std::byte>>(input->byte_size() + 1);
  std::memcpy(body->data() + 1, input->data(), input->byte_size());
  Tensor misaligned("INPUT0", DataType::kFp32, {2, 64}, body, body->data() + 1, input->byte_size());
  auto out = (*instance)->Execute({&misaligned, 1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_LE(examples::MaxAbsDiff((*out)[0], *expected), 1e-4f);
}

TEST_F(TorchScriptBackendTest, PairMatchesReferenceWithTupleOutput) {
  auto instance = Load(PairConfig(), examples::VersionDir("pair"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  std::vector<Tensor> inputs;
  for (const char* name : {"INPUT0", "INPUT1"}) {
    auto t = examples::ReadReference("pair", "input", name, DataType::kFp32, {3, 16});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    inputs.push_back(*t);
  }
  auto out = (*instance)->Execute(inputs);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const std::string name = i == 0 ? "SUM" : "PROD";
    auto expected = examples::ReadReference("pair", "output", name, DataType::kFp32, {3, 16});
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    EXPECT_EQ((*out)[i].name(), name);
    EXPECT_LE(examples::MaxAbsDiff((*out)[i], *expected), 1e-4f) << name;
  }
}

TEST_F(TorchScriptBackendTest, WrongShapeIsAnErrorNotACrash) {
  auto instance = Load(MlpConfig(), examples::VersionDir("mlp"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  std::byte* data;
  Tensor narrow = Tensor::Allocate("INPUT0", DataType::kFp32, {2, 32}, &data);
  auto out = (*instance)->Execute({&narrow, 1});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("INPUT0"));

  // With a config that leaves the dimension open, the model itself rejects it: still an error.
  auto open = MlpConfig();
  open.inputs[0].dims = {-1};
  auto relaxed = Load(open, examples::VersionDir("mlp"));
  ASSERT_TRUE(relaxed.ok()) << relaxed.status().ToString();
  out = (*relaxed)->Execute({&narrow, 1});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("rejected its inputs"));
  EXPECT_THAT(out.status().message(), HasSubstr("mat1 and mat2 shapes cannot be multiplied"));
  // Neither the C++ backtrace nor the TorchScript traceback (with the exporting machine's paths).
  EXPECT_THAT(out.status().message(), ::testing::Not(HasSubstr("frame #")));
  EXPECT_THAT(out.status().message(), ::testing::Not(HasSubstr("make_models.py")));
}

TEST_F(TorchScriptBackendTest, MissingAndCorruptFilesAreClearErrors) {
  auto missing = Load(MlpConfig(), dir_);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr((dir_ / "model.pt").string()));

  std::ofstream(dir_ / "model.pt") << "this is not a zip archive";
  auto corrupt = Load(MlpConfig(), dir_);
  EXPECT_EQ(corrupt.status().code(), StatusCode::kInternal);
  EXPECT_THAT(corrupt.status().message(), HasSubstr("cannot load TorchScript file"));
  EXPECT_THAT(corrupt.status().message(), HasSubstr((dir_ / "model.pt").string()));
}

TEST_F(TorchScriptBackendTest, ValidateRejectsUnsupportedConfigs) {
  EXPECT_TRUE(backend_->Validate(MlpConfig()).ok());
  EXPECT_EQ(backend_->DefaultModelFilename(), "model.pt");
  auto bytes = MlpConfig();
  bytes.inputs[0].data_type = DataType::kBytes;
  EXPECT_THAT(backend_->Validate(bytes).message(), HasSubstr("does not support BYTES"));
  auto uint32 = MlpConfig();
  uint32.outputs[0].data_type = DataType::kUint32;
  EXPECT_THAT(backend_->Validate(uint32).message(), HasSubstr("'OUTPUT0'"));
  for (const char* threads : {"0", "-1", "two", "100000"}) {
    auto config = MlpConfig();
    config.parameters["intra_op_threads"] = threads;
    EXPECT_THAT(backend_->Validate(config).message(), HasSubstr("intra_op_threads")) << threads;
  }
  for (const char* value : {"", "yes", "true", "ON"}) {
    auto config = MlpConfig();
    config.parameters["weft.optimize_for_inference"] = value;
    EXPECT_THAT(backend_->Validate(config).message(), HasSubstr("weft.optimize_for_inference")) << value;
  }
}

// The default (on) and both settings give the reference answer, at several batch sizes in a row: the optimized graph
// must not keep the first call's shapes.
TEST_F(TorchScriptBackendTest, OptimizedForInferenceOrNotTheAnswersAreTheReference) {
  auto reference_input = examples::ReadReference("mlp", "input", "INPUT0", DataType::kFp32, {2, 64});
  auto reference_output = examples::ReadReference("mlp", "output", "OUTPUT0", DataType::kFp32, {2, 10});
  ASSERT_TRUE(reference_input.ok() && reference_output.ok());
  for (const char* setting : {"default", " on ", "off"}) {
    auto config = MlpConfig();
    if (std::string(setting) != "default") config.parameters["weft.optimize_for_inference"] = setting;
    auto instance = Load(config, examples::VersionDir("mlp"));
    ASSERT_TRUE(instance.ok()) << setting << ": " << instance.status().ToString();
    for (int64_t rows : {2, 1, 8, 2}) {
      // `rows` copies of the reference's first row, then its second when there is room for it.
      std::byte* data;
      Tensor input = Tensor::Allocate("INPUT0", DataType::kFp32, {rows, 64}, &data);
      const size_t row_bytes = 64 * sizeof(float);
      for (int64_t r = 0; r < rows; ++r) std::memcpy(data + r * row_bytes, reference_input->data(), row_bytes);
      if (rows > 1) std::memcpy(data + (rows - 1) * row_bytes, reference_input->data() + row_bytes, row_bytes);
      auto out = (*instance)->Execute({&input, 1});
      ASSERT_TRUE(out.ok()) << setting << ": " << out.status().ToString();
      ASSERT_EQ((*out)[0].shape(), Shape({rows, 10}));
      const auto* got = reinterpret_cast<const float*>((*out)[0].data());
      const auto* want = reinterpret_cast<const float*>(reference_output->data());
      for (int64_t r = 0; r < rows; ++r) {
        const float* want_row = want + ((rows > 1 && r == rows - 1) ? 10 : 0);
        for (int i = 0; i < 10; ++i) {
          EXPECT_NEAR(got[r * 10 + i], want_row[i], 1e-4f) << setting << ", rows " << rows << ", row " << r;
        }
      }
    }
  }
}

TEST_F(TorchScriptBackendTest, AConfigWithoutInstanceGroupsGetsTwoCpuInstancesOfOneCoreEach) {
  if (TorchCudaAvailable()) {  // Triton's default there: one instance, on the GPU
    EXPECT_TRUE(backend_->DefaultInstanceGroups(MlpConfig()).empty());
    return;
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<InstanceGroupConfig> groups = backend_->DefaultInstanceGroups(MlpConfig());
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].kind, InstanceKind::kCpu);
  EXPECT_EQ(groups[0].count, std::min(2, cores));
  // An instance that runs on every core leaves no room for a second.
  auto wide = MlpConfig();
  wide.parameters["intra_op_threads"] = std::to_string(cores);
  groups = backend_->DefaultInstanceGroups(wide);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].count, 1);
}

size_t ThreadsOfThisProcess() {
  return static_cast<size_t>(
      std::distance(std::filesystem::directory_iterator("/proc/self/task"), std::filesystem::directory_iterator()));
}

// A thread that executes (not the one that loaded the instance) must use intra_op_threads too: oneDNN's kernels open
// OpenMP teams of their own, of every core unless the executing thread has set the count.
TEST_F(TorchScriptBackendTest, ExecutingThreadsKeepToIntraOpThreads) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: a team of every core is one thread";
  // A convolution: what optimize_for_inference moves onto oneDNN.
  torch::jit::Module module("Model");
  module.register_parameter("w", torch::ones({8, 3, 3, 3}), /*is_buffer=*/false);
  module.define("def forward(self, x):\n  return torch.conv2d(x, self.w)\n");
  module.save((dir_ / "model.pt").string());
  ModelConfig config;
  config.name = "conv";
  config.backend = "pytorch";
  config.inputs = {Spec("x", DataType::kFp32, {4, 3, 64, 64})};
  config.outputs = {Spec("y", DataType::kFp32, {4, 8, 62, 62})};
  config.parameters["intra_op_threads"] = "1";
  auto instance = Load(config, dir_);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  std::byte* data;
  Tensor input = Tensor::Allocate("x", DataType::kFp32, {4, 3, 64, 64}, &data);
  std::memset(data, 0, input.byte_size());
  size_t before = 0, during = 0;
  std::thread([&] {
    before = ThreadsOfThisProcess();
    for (int i = 0; i < 3; ++i) {
      auto out = (*instance)->Execute({&input, 1});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
    }
    during = ThreadsOfThisProcess();
  }).join();
  EXPECT_EQ(during, before);
}

TEST_F(TorchScriptBackendTest, AppliesIntraOpThreads) {
  auto config = MlpConfig();
  config.parameters["intra_op_threads"] = "2";
  ASSERT_TRUE(Load(config, examples::VersionDir("mlp")).ok());
  EXPECT_EQ(at::get_num_threads(), 2);
  ASSERT_TRUE(Load(MlpConfig(), examples::VersionDir("mlp")).ok());
  EXPECT_EQ(at::get_num_threads(), 1);
}

TEST_F(TorchScriptBackendTest, ConfigThatDisagreesWithTheModel) {
  auto fp64 = MlpConfig();
  fp64.outputs[0].data_type = DataType::kFp64;
  auto instance = Load(fp64, examples::VersionDir("mlp"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  std::byte* data;
  Tensor input = Tensor::Allocate("INPUT0", DataType::kFp32, {1, 64}, &data);
  auto out = (*instance)->Execute({&input, 1});
  EXPECT_EQ(out.status().code(), StatusCode::kInternal);
  EXPECT_THAT(out.status().message(), HasSubstr("output 'OUTPUT0': the model produced FP32"));

  auto wide = MlpConfig();
  wide.outputs[0].dims = {11};
  instance = Load(wide, examples::VersionDir("mlp"));
  ASSERT_TRUE(instance.ok());
  EXPECT_THAT((*instance)->Execute({&input, 1}).status().message(), HasSubstr("shape [1,10]"));

  auto two = MlpConfig();
  two.outputs.push_back(Spec("OUTPUT1", DataType::kFp32, {10}));
  instance = Load(two, examples::VersionDir("mlp"));
  ASSERT_TRUE(instance.ok());
  EXPECT_THAT((*instance)->Execute({&input, 1}).status().message(), HasSubstr("returned 1 tensors"));

  auto one_input = PairConfig();
  one_input.inputs.pop_back();
  auto arity = Load(one_input, examples::VersionDir("pair"));
  EXPECT_EQ(arity.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(arity.status().message(), HasSubstr("forward() takes 2 inputs, the config declares 1"));
}

TEST_F(TorchScriptBackendTest, EveryDatatypeRoundTrips) {
  SaveScript("def forward(self, x):\n    return x.clone()\n");
  for (DataType type : {DataType::kBool, DataType::kUint8, DataType::kInt8, DataType::kInt16, DataType::kInt32,
                        DataType::kInt64, DataType::kFp16, DataType::kBf16, DataType::kFp32, DataType::kFp64}) {
    auto instance = Load(ScriptedConfig(type), dir_);
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    std::byte* data;
    Tensor input = Tensor::Allocate("x", type, {2, 3}, &data);
    for (size_t i = 0; i < input.byte_size(); ++i) data[i] = std::byte(type == DataType::kBool ? i % 2 : i * 7);
    auto out = (*instance)->Execute({&input, 1});
    ASSERT_TRUE(out.ok()) << DataTypeName(type) << ": " << out.status().ToString();
    const Tensor& y = (*out)[0];
    EXPECT_EQ(y.type(), type);
    EXPECT_EQ(y.shape(), Shape({2, 3}));
    ASSERT_EQ(y.byte_size(), input.byte_size());
    EXPECT_EQ(std::memcmp(y.data(), input.data(), y.byte_size()), 0) << DataTypeName(type);
  }
}

TEST_F(TorchScriptBackendTest, OutputsOutliveInstanceAndInputs) {
  // `return x` hands back the input's own storage: the output must keep the request's bytes alive.
  SaveScript("def forward(self, x):\n    return x, x.t(), x * 2\n");
  auto config = ScriptedConfig(DataType::kFp32, 3);
  auto instance = Load(config, dir_);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  auto body = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
  std::weak_ptr<std::vector<float>> weak = body;
  Tensor input("x", DataType::kFp32, {2, 3}, body, reinterpret_cast<const std::byte*>(body->data()),
               body->size() * sizeof(float));
  auto out = (*instance)->Execute({&input, 1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].data(), input.data());  // zero-copy both ways
  body.reset();
  input = Tensor();
  instance->reset();
  EXPECT_FALSE(weak.expired());

  auto values = [](const Tensor& t) {
    std::vector<float> v(t.byte_size() / sizeof(float));
    std::memcpy(v.data(), t.data(), t.byte_size());
    return v;
  };
  EXPECT_EQ(values((*out)[0]), std::vector<float>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ((*out)[1].shape(), Shape({3, 2}));
  EXPECT_EQ(values((*out)[1]), std::vector<float>({1, 4, 2, 5, 3, 6}));  // made contiguous
  EXPECT_EQ(values((*out)[2]), std::vector<float>({2, 4, 6, 8, 10, 12}));
  out->clear();
  EXPECT_TRUE(weak.expired());
}

TEST_F(TorchScriptBackendTest, ListOutputsAndCustomFilename) {
  SaveScript("def forward(self, x):\n    return [x + 1, x - 1]\n", "custom.pt");
  auto config = ScriptedConfig(DataType::kInt64, 2);
  config.default_model_filename = "custom.pt";
  auto instance = Load(config, dir_);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  std::byte* data;
  Tensor input = Tensor::Allocate("x", DataType::kInt64, {1, 1}, &data);
  int64_t ten = 10;
  std::memcpy(data, &ten, sizeof(ten));
  auto out = (*instance)->Execute({&input, 1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].name(), "y0");
  EXPECT_EQ((*out)[0].as<int64_t>()[0], 11);
  EXPECT_EQ((*out)[1].name(), "y1");
  EXPECT_EQ((*out)[1].as<int64_t>()[0], 9);
}

TEST_F(TorchScriptBackendTest, NonTensorResultIsAnError) {
  SaveScript("def forward(self, x):\n    return x.size(0)\n");
  auto instance = Load(ScriptedConfig(DataType::kFp32), dir_);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  std::byte* data;
  Tensor input = Tensor::Allocate("x", DataType::kFp32, {1, 1}, &data);
  auto out = (*instance)->Execute({&input, 1});
  EXPECT_EQ(out.status().code(), StatusCode::kInternal);
  EXPECT_THAT(out.status().message(), HasSubstr("returned a Int"));
}

TEST_F(TorchScriptBackendTest, ExceptionInsideTheModelIsAStatus) {
  SaveScript("def forward(self, x):\n    assert bool(x.sum() < 100), 'too big'\n    return x\n");
  auto instance = Load(ScriptedConfig(DataType::kFp32), dir_);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  std::byte* data;
  Tensor input = Tensor::Allocate("x", DataType::kFp32, {1, 1}, &data);
  float big = 1000;
  std::memcpy(data, &big, sizeof(big));
  auto out = (*instance)->Execute({&input, 1});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("too big"));
}

// A failed allocation inside forward() is out of memory, not the model rejecting its inputs (the scheduler retries
// it in smaller batches). 2^60 bytes exceed any address space, so the allocation fails at once, touching nothing.
TEST_F(TorchScriptBackendTest, FailedAllocationInsideTheModelIsOutOfMemory) {
  SaveScript("def forward(self, x):\n    return x.new_empty([1 << 58])\n");
  auto instance = Load(ScriptedConfig(DataType::kFp32), dir_);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  std::byte* data;
  Tensor input = Tensor::Allocate("x", DataType::kFp32, {1, 1}, &data);
  auto out = (*instance)->Execute({&input, 1});
  EXPECT_EQ(out.status().code(), StatusCode::kOutOfMemory);
  EXPECT_THAT(out.status().message(), HasSubstr("model 'scripted' ran out of memory: "));
  EXPECT_THAT(out.status().message(), HasSubstr("1152921504606846976 bytes"));
}

// Making the backend routes torch's large CPU allocations through MapLargeBuffer (given back in slices on free);
// small ones stay with torch's default allocator, and the raw allocation API works for both.
TEST(TorchLargeBufferAllocatorTest, LargeTensorsAreMappedOnTheirOwnAndGivenBack) {
  MakeTorchScriptBackend();
  c10::Allocator* allocator = c10::GetCPUAllocator();
  EXPECT_NE(allocator, c10::GetDefaultCPUAllocator());
  const void* data = nullptr;
  {
    torch::Tensor large = torch::ones({static_cast<int64_t>(kLargeBufferBytes / sizeof(float)) + 1});
    data = large.data_ptr();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 4096, 0u);
    EXPECT_EQ(large.storage().data_ptr().get_deleter(), allocator->raw_deleter());
    EXPECT_EQ(large[0].item<float>(), 1.0f);
    EXPECT_EQ(large[large.numel() - 1].item<float>(), 1.0f);
    EXPECT_TRUE(MappedInThisProcess(data));
  }
  EXPECT_FALSE(MappedInThisProcess(data));

  torch::Tensor small = torch::ones({16});
  EXPECT_NE(small.storage().data_ptr().get_deleter(), allocator->raw_deleter());
  for (size_t size : {size_t{64}, kLargeBufferBytes}) {
    void* raw = allocator->raw_allocate(size);
    ASSERT_NE(raw, nullptr);
    std::memset(raw, 1, size);
    allocator->raw_deallocate(raw);
  }
}

}  // namespace
}  // namespace weft
