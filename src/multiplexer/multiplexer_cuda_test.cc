// The multiplexer on the CUDA device, with the gpu_spin builtin standing in for models: what the CPU tests show
// (order across moves, bounds, busy time), seen through CUDA streams, events and timing events. Every test skips
// where there is no GPU (or no CUDA in the build); ctest label `gpu`.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "device/cuda/cuda_device.h"
#include "multiplexer/testing/lane_harness.h"

namespace weft {
namespace {

using std::chrono::milliseconds;

ModelConfig Spin(std::string name, ModelPriority priority, int spin_us, int blocks = 1) {
  ModelConfig c;
  c.name = std::move(name);
  c.backend = "weft_builtin";
  c.max_batch_size = 8;
  c.inputs = {{"INPUT0", DataType::kFp32, {4}, std::nullopt}};
  c.outputs = {{"OUTPUT0", DataType::kFp32, {4}, std::nullopt}};
  c.parameters = {{"builtin", "gpu_spin"}, {"spin_us", std::to_string(spin_us)}, {"blocks", std::to_string(blocks)}};
  c.priority = priority;
  return c;
}

std::vector<Tensor> Batch(float value) {
  std::vector<std::byte> bytes(4 * sizeof(float));
  for (int i = 0; i < 4; ++i) std::memcpy(bytes.data() + i * sizeof(float), &value, sizeof(float));
  return {Tensor::FromBytes("INPUT0", DataType::kFp32, {1, 4}, std::move(bytes))};
}

class MultiplexerCudaTest : public testing::LaneHarness {
 protected:
  void SetUp() override {
    if (std::string why = CudaUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
  }
  void Start(MultiplexerOptions options = {}) {
    auto device = CreateCudaDevice({});
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    StartOn(std::move(device).value(), options);
  }
  void Submit(Lane* lane, int id) { SubmitInputs(lane, id, Batch(static_cast<float>(id))); }
};

TEST_F(MultiplexerCudaTest, CudaLanesDefaultToTwoBatchesInFlight) {
  Start();
  Lane* normal = Add(Spin("normal", ModelPriority::kDefault, 100));
  Lane* be = Add(Spin("be", ModelPriority::kMin, 100));
  ASSERT_TRUE(normal && be);
  EXPECT_EQ(normal->max_inflight(), 2);
  EXPECT_EQ(be->max_inflight(), 1);
}

// A move between streams: the first batch on the new stream starts on the GPU after the last one on the old stream
// has ended there (the timing events say so), although the new stream was idle.
TEST_F(MultiplexerCudaTest, OrderIsKeptAcrossAMoveOnTheGpu) {
  Start({.streams_per_class = 2, .max_inflight = 8, .load_balance = false});
  Lane* slow = Add(Spin("slow", ModelPriority::kDefault, 30'000));
  ASSERT_NE(slow, nullptr);
  Submit(slow, 0);
  slow->MoveTo(slow->stream_name() == "normal/0" ? 1 : 0);
  Submit(slow, 1);
  ASSERT_TRUE(results_.WaitFor(2));
  EXPECT_EQ(results_.error(), "");
  EXPECT_EQ(results_.order(), (std::vector<int>{0, 1}));
  EXPECT_GE(results_.timing(1).start, results_.timing(0).end - milliseconds(1));  // clocks converted from events
  EXPECT_EQ(results_.first(1), 1.0f);  // the outputs are the batch's own inputs
  EXPECT_EQ(slow->migrations(), 1u);
}

// Best-effort batches in flight are gated on completions that arrive through the host function and the eventfd.
TEST_F(MultiplexerCudaTest, BestEffortSlotsAreGatedOnCompletions) {
  Start({.best_effort_max_inflight = 1});
  Lane* be = Add(Spin("be", ModelPriority::kMin, 50'000));
  ASSERT_NE(be, nullptr);
  Submit(be, 0);
  EXPECT_FALSE(be->TryAcquireSlot());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(be->AcquireSlot(std::stop_token()));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(30));
  be->ReleaseSlot();
  ASSERT_TRUE(results_.WaitFor(1));
}

// A one-block urgent kernel runs beside a long one-block best-effort kernel on another stream: it is answered in
// about its own time, not after the best-effort batch.
TEST_F(MultiplexerCudaTest, UrgentWorkOverlapsRunningBestEffortWork) {
  Start();
  Lane* be = Add(Spin("be", ModelPriority::kMin, 200'000));
  Lane* urgent = Add(Spin("urgent", ModelPriority::kMax, 2'000));
  ASSERT_TRUE(be && urgent);
  Submit(be, 0);
  std::this_thread::sleep_for(milliseconds(20));
  const auto sent = std::chrono::steady_clock::now();
  Submit(urgent, 1);
  ASSERT_TRUE(results_.WaitFor(2));
  EXPECT_EQ(results_.order(), (std::vector<int>{1, 0}));
  EXPECT_LT(results_.seen(1) - sent, milliseconds(100));
}

// Busy time comes from the timing events: five back-to-back 20 ms kernels keep the device busy most of the window,
// and all of it belongs to the one model.
TEST_F(MultiplexerCudaTest, BusyTimeComesFromTimingEvents) {
  Start({.streams_per_class = 1, .max_inflight = 8});
  Lane* lane = Add(Spin("busy", ModelPriority::kDefault, 20'000));
  ASSERT_NE(lane, nullptr);
  const SteadyTime start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) Submit(lane, i);
  ASSERT_TRUE(results_.WaitFor(5));
  const SteadyTime end = std::chrono::steady_clock::now();
  const double busy = mux_->BusyFraction(start, end);
  EXPECT_GT(busy, 0.6);
  EXPECT_LE(busy, 1.0);
  EXPECT_NEAR(mux_->ModelBusyFraction("busy", 1, start, end), busy, 1e-9);
  for (int i = 0; i < 5; ++i) {
    const auto device_ms = std::chrono::duration<double, std::milli>(results_.timing(i).end - results_.timing(i).start);
    EXPECT_GT(device_ms.count(), 15) << i;
    EXPECT_LT(device_ms.count(), 40) << i;
  }
}

// One shared FIFO stream (the benchmarks' baseline): the urgent batch waits for the best-effort one before it.
TEST_F(MultiplexerCudaTest, ASharedStreamSerializesEveryClass) {
  Start({.single_stream = true, .best_effort_max_inflight = 0});
  Lane* be = Add(Spin("be", ModelPriority::kMin, 50'000));
  Lane* urgent = Add(Spin("urgent", ModelPriority::kMax, 1'000));
  ASSERT_TRUE(be && urgent);
  Submit(be, 0);
  Submit(urgent, 1);
  ASSERT_TRUE(results_.WaitFor(2));
  EXPECT_EQ(results_.order(), (std::vector<int>{0, 1}));
  EXPECT_GE(results_.timing(1).start, results_.timing(0).end - milliseconds(1));
}

}  // namespace
}  // namespace weft
