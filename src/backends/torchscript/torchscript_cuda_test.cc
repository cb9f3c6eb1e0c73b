// The TorchScript backend on a GPU, through the multiplexer's CUDA streams: the results equal the CPU's, and
// outputs that the stream fills asynchronously are complete when the completion fires. Skips where libtorch has no
// CUDA or there is no GPU; ctest label `gpu`.
#include <ftw.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <torch/script.h>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>

#include "backends/torchscript/torch_stream.h"
#include "backends/torchscript/torchscript_backend.h"
#include "device/cuda/cuda_device.h"
#include "multiplexer/multiplexer.h"

namespace weft {
namespace {

constexpr int64_t kWidth = 1024;

ModelConfig DeepConfig(InstanceKind kind) {
  ModelConfig config;
  config.name = kind == InstanceKind::kGpu ? "deep_gpu" : "deep_cpu";
  config.backend = "pytorch";
  config.max_batch_size = 64;
  config.inputs = {{"INPUT0", DataType::kFp32, {kWidth}, std::nullopt}};
  config.outputs = {{"OUTPUT0", DataType::kFp32, {kWidth}, std::nullopt}};
  config.instance_groups = {{.name = "g", .count = 1, .kind = kind, .gpus = {0}}};
  return config;
}

std::vector<float> Random(size_t n, std::mt19937* rng) {
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(*rng);
  return v;
}

Tensor Input(int64_t batch, std::mt19937* rng) {
  std::vector<float> values = Random(batch * kWidth, rng);
  std::vector<std::byte> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return Tensor::FromBytes("INPUT0", DataType::kFp32, {batch, kWidth}, std::move(bytes));
}

// ||a - b|| / ||b||
double RelativeError(const Tensor& a, const Tensor& b) {
  auto x = a.as<float>();
  auto y = b.as<float>();
  if (x.size() != y.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff += (x[i] - y[i]) * double(x[i] - y[i]);
    norm += y[i] * double(y[i]);
  }
  return std::sqrt(diff / norm);
}

// Not std::filesystem::remove_all: libtorch's pip wheels since 2.5 export their own static copy of libstdc++'s
// std::filesystem (pytorch/pytorch#133437), and on the GPU machine (torch 2.11, Ubuntu 24.04) remove_all called
// through a null pointer in every test's TearDown. directory_iterator, which the repository uses, worked there.
void RemoveTree(const std::filesystem::path& dir) {
  nftw(
      dir.c_str(), [](const char* path, const struct stat*, int, struct FTW*) { return remove(path); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

class TorchScriptCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = CudaUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
    if (!TorchCudaAvailable()) GTEST_SKIP() << "libtorch without CUDA";
    std::string pattern = (std::filesystem::temp_directory_path() / "weft_torch_cuda_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    // Forty layers of a 1024-wide matmul: long enough that the GPU is still working when Execute returns.
    torch::manual_seed(3);
    torch::jit::Module module("Deep");
    module.register_buffer("w", torch::randn({kWidth, kWidth}) / std::sqrt(double(kWidth)));
    module.define(R"(
      def forward(self, x):
          y = x
          for _ in range(40):
              y = torch.tanh(y @ self.w)
          return y
    )");
    module.save((dir_ / "model.pt").string());
    auto device = CreateCudaDevice({});
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    device_ = std::move(device).value();
  }
  void TearDown() override {
    if (!dir_.empty()) RemoveTree(dir_);
  }

  std::unique_ptr<ModelInstance> Load(InstanceKind kind) {
    auto instance = backend_->CreateInstance(DeepConfig(kind), dir_, 0);
    EXPECT_TRUE(instance.ok()) << instance.status().ToString();
    return instance.ok() ? std::move(instance).value() : nullptr;
  }

  std::shared_ptr<const Backend> backend_ = MakeTorchScriptBackend();
  std::filesystem::path dir_;
  std::unique_ptr<Device> device_;
};

TEST_F(TorchScriptCudaTest, WithoutAStreamTheGpuResultIsCompleteOnReturn) {
  auto gpu = Load(InstanceKind::kGpu);
  auto cpu = Load(InstanceKind::kCpu);
  ASSERT_TRUE(gpu && cpu);
  std::mt19937 rng(1);
  Tensor input = Input(8, &rng);
  auto on_gpu = gpu->Execute({&input, 1});
  auto on_cpu = cpu->Execute({&input, 1});
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().ToString();
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status().ToString();
  EXPECT_LT(RelativeError((*on_gpu)[0], (*on_cpu)[0]), 1e-3);
}

// Many batches of fresh random inputs through a lane with two batches in flight: each result, read in its completion,
// equals the CPU's for the same input. A stream handed to torch in the wrong place, an output read before the stream
// filled it, or an input freed too early shows as a wrong result.
TEST_F(TorchScriptCudaTest, BatchesOnTheLanesStreamMatchTheCpu) {
  auto gpu = Load(InstanceKind::kGpu);
  auto cpu = Load(InstanceKind::kCpu);
  ASSERT_TRUE(gpu && cpu);
  MetricsRegistry metrics;
  auto mux = Multiplexer::Create(device_.get(), {.max_inflight = 2}, &metrics);
  ASSERT_TRUE(mux.ok()) << mux.status().ToString();
  auto lane = (*mux)->AddInstance(DeepConfig(InstanceKind::kGpu), 1, gpu.get());
  ASSERT_TRUE(lane.ok()) << lane.status().ToString();

  constexpr int kBatches = 24;
  std::mt19937 rng(2);
  std::vector<Tensor> inputs;
  std::vector<Tensor> expected;
  for (int i = 0; i < kBatches; ++i) {
    inputs.push_back(Input(1 + i % 16, &rng));
    auto want = cpu->Execute({&inputs.back(), 1});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    expected.push_back((*want)[0]);
  }
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<double> errors(kBatches, INFINITY);
  std::vector<std::string> failures;
  for (int i = 0; i < kBatches; ++i) {
    ASSERT_TRUE((*lane)->AcquireSlot(std::stop_token()));
    (*lane)->Submit({std::move(inputs[i])}, [&, i](Result<std::vector<Tensor>> outputs, const BatchTiming&) {
      std::lock_guard lock(mu);
      if (outputs.ok()) {
        errors[i] = RelativeError((*outputs)[0], expected[i]);
      } else {
        failures.push_back(outputs.status().ToString());
      }
      ++done;
      cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == kBatches; }));
  EXPECT_TRUE(failures.empty()) << failures.front();
  for (int i = 0; i < kBatches; ++i) EXPECT_LT(errors[i], 1e-3) << "batch " << i;
  lock.unlock();
  lane->reset();
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

// A CUDA allocation the GPU cannot hold fails the execution with OUT_OF_MEMORY (not a client error, not a crash),
// the device's pools give back what they cache, and the same instance runs the next batch: one oversized batch
// costs only itself (issue 12).
TEST_F(TorchScriptCudaTest, ACudaOutOfMemoryIsReportedAndTheInstanceRecovers) {
  torch::jit::Module module("Greedy");
  module.define(R"(
    def forward(self, x):
        if x.sum() > 1000000.0:
            return x.new_empty([1 << 42, 1024])
        return x * 2.0
  )");
  module.save((dir_ / "model.pt").string());
  auto gpu = Load(InstanceKind::kGpu);
  ASSERT_TRUE(gpu);
  std::vector<float> huge(kWidth, 1e6f), small(kWidth, 1.0f);
  auto tensor = [](const std::vector<float>& values) {
    std::vector<std::byte> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return Tensor::FromBytes("INPUT0", DataType::kFp32, {1, kWidth}, std::move(bytes));
  };
  Tensor too_much = tensor(huge);
  auto failed = gpu->Execute({&too_much, 1});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kOutOfMemory) << failed.status().ToString();
  device_->ReleaseCachedMemory();
  Tensor fine = tensor(small);
  auto ok = gpu->Execute({&fine, 1});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].as<float>()[0], 2.0f);
}

}  // namespace
}  // namespace weft
