// The semantics every device implementation shares. Instantiated by cpu/cpu_device_test.cc and
// cuda/cuda_device_test.cc (which skips without a GPU).
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "device/completion_loop.h"
#include "device/testing/conformance.h"

namespace weft::testing {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// Records completions in the order they fire, with the thread they fire on. Thread-safe.
class Recorder {
 public:
  CompletionCallback Callback(int id, CompletionLoop* loop) {
    return [this, id, loop](const Completion& c) {
      std::lock_guard lock(mu_);
      order_.push_back(id);
      statuses_.push_back(c.status);
      completions_.push_back(c);
      if (!loop->InLoopThread()) off_loop_ = true;
      cv_.notify_all();
    };
  }
  bool WaitFor(size_t n, milliseconds timeout = milliseconds(10'000)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return order_.size() >= n; });
  }
  std::vector<int> order() {
    std::lock_guard lock(mu_);
    return order_;
  }
  Completion completion(size_t i) {
    std::lock_guard lock(mu_);
    return completions_.at(i);
  }
  Status status(size_t i) {
    std::lock_guard lock(mu_);
    return statuses_.at(i);
  }
  bool off_loop() {
    std::lock_guard lock(mu_);
    return off_loop_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> order_;               // guarded by mu_
  std::vector<Status> statuses_;         // guarded by mu_
  std::vector<Completion> completions_;  // guarded by mu_
  bool off_loop_ = false;                // guarded by mu_
};

TEST_P(DeviceConformanceTest, WorkOnOneStreamRunsAndCompletesInOrder) {
  auto stream = NewStream("s");
  Recorder recorder;
  std::mutex mu;
  std::vector<int> ran;
  for (int i = 0; i < 50; ++i) {
    Work work;
    work.run = [&, i](const NativeStream&) {
      std::lock_guard lock(mu);
      ran.push_back(i);
      return Status::Ok();
    };
    work.on_done = recorder.Callback(i, &device_->completion_loop());
    stream->Enqueue(std::move(work));
  }
  stream->Synchronize();
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i) expected[i] = i;
  EXPECT_EQ(ran, expected);
  EXPECT_EQ(recorder.order(), expected);
  EXPECT_FALSE(recorder.off_loop()) << "every completion fires on the completion loop's thread";
  EXPECT_EQ(stream->pending(), 0u);
}

TEST_P(DeviceConformanceTest, CompletionTimesFollowTheWork) {
  auto stream = NewStream("s");
  Recorder recorder;
  const SteadyTime before = std::chrono::steady_clock::now();
  stream->Enqueue({.run = Busy(microseconds(20'000)), .on_done = recorder.Callback(0, &device_->completion_loop())});
  stream->Enqueue({.run = Busy(microseconds(20'000)), .on_done = recorder.Callback(1, &device_->completion_loop())});
  ASSERT_TRUE(recorder.WaitFor(2));
  const Completion a = recorder.completion(0);
  const Completion b = recorder.completion(1);
  EXPECT_GE(a.end - a.start, milliseconds(15));
  EXPECT_GE(b.end - b.start, milliseconds(15));
  EXPECT_GE(b.start, a.end - microseconds(100)) << "one stream runs one piece of work at a time";
  EXPECT_GE(a.start, before - milliseconds(1));
  EXPECT_LE(b.end, std::chrono::steady_clock::now() + milliseconds(1));
}

TEST_P(DeviceConformanceTest, HostCallbackFiresAfterEarlierWork) {
  auto stream = NewStream("s");
  Recorder recorder;
  stream->Enqueue({.run = Busy(microseconds(20'000)), .on_done = recorder.Callback(0, &device_->completion_loop())});
  stream->Enqueue({.on_done = recorder.Callback(1, &device_->completion_loop())});
  ASSERT_TRUE(recorder.WaitFor(2));
  EXPECT_EQ(recorder.order(), (std::vector<int>{0, 1}));
  EXPECT_GE(recorder.completion(1).start, recorder.completion(0).end - microseconds(100));
}

TEST_P(DeviceConformanceTest, AWaitHoldsTheStreamUntilTheEventIsPassed) {
  auto slow = NewStream("slow");
  auto fast = NewStream("fast");
  auto event = device_->CreateEvent();
  ASSERT_TRUE(event.ok());
  Recorder recorder;
  slow->Enqueue({.run = Busy(microseconds(50'000)), .on_done = recorder.Callback(0, &device_->completion_loop())});
  slow->Record(**event);
  EXPECT_FALSE((*event)->Query());
  fast->Wait(**event);
  fast->Enqueue({.run = Busy(microseconds(1'000)), .on_done = recorder.Callback(1, &device_->completion_loop())});
  ASSERT_TRUE(recorder.WaitFor(2));
  EXPECT_EQ(recorder.order(), (std::vector<int>{0, 1}));
  EXPECT_GE(recorder.completion(1).start, recorder.completion(0).end - microseconds(100));
  (*event)->Synchronize();
  EXPECT_TRUE((*event)->Query());
}

TEST_P(DeviceConformanceTest, WithoutAWaitStreamsDoNotWaitForEachOther) {
  auto slow = NewStream("slow");
  auto fast = NewStream("fast");
  Recorder recorder;
  slow->Enqueue({.run = Busy(microseconds(200'000)), .on_done = recorder.Callback(0, &device_->completion_loop())});
  fast->Enqueue({.run = Busy(microseconds(1'000)), .on_done = recorder.Callback(1, &device_->completion_loop())});
  ASSERT_TRUE(recorder.WaitFor(2));
  EXPECT_EQ(recorder.order(), (std::vector<int>{1, 0}));
}

TEST_P(DeviceConformanceTest, ANeverRecordedEventIsPassed) {
  auto stream = NewStream("s");
  auto event = device_->CreateEvent();
  ASSERT_TRUE(event.ok());
  EXPECT_TRUE((*event)->Query());
  stream->Wait(**event);
  Recorder recorder;
  stream->Enqueue({.on_done = recorder.Callback(0, &device_->completion_loop())});
  ASSERT_TRUE(recorder.WaitFor(1));
}

TEST_P(DeviceConformanceTest, ErrorsArriveInTheCompletionAndLaterWorkStillRuns) {
  auto stream = NewStream("s");
  Recorder recorder;
  stream->Enqueue({.run = [](const NativeStream&) { return InvalidArgument("no"); },
                   .on_done = recorder.Callback(0, &device_->completion_loop())});
  stream->Enqueue({.run = Busy(microseconds(100)), .on_done = recorder.Callback(1, &device_->completion_loop())});
  ASSERT_TRUE(recorder.WaitFor(2));
  EXPECT_EQ(recorder.status(0).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(recorder.status(1).ok());
}

// The buffer lifetime contract: what a stream was handed lives until its completion has fired, whoever dropped it.
TEST_P(DeviceConformanceTest, KeptBuffersAreReleasedOnlyAfterTheCompletion) {
  auto stream = NewStream("s");
  std::atomic<bool> released{false};
  std::atomic<bool> released_before_callback{false};
  {
    auto buffer = std::shared_ptr<int>(new int(7), [&](int* p) {
      delete p;
      released = true;
    });
    Work work;
    work.run = Busy(microseconds(30'000));
    work.on_done = [&](const Completion&) { released_before_callback = released.load(); };
    work.keep_alive = {buffer};
    stream->Enqueue(std::move(work));
  }  // the caller's reference is gone
  EXPECT_FALSE(released.load());
  stream->Synchronize();
  EXPECT_FALSE(released_before_callback.load());
  EXPECT_TRUE(released.load());
}

// A round trip host -> device -> host through Copy, with the caller dropping every buffer at once: the last
// completion reads the result while the stream still holds it. Under AddressSanitizer a buffer freed before its
// copy ran, or before its completion, is a use after free.
TEST_P(DeviceConformanceTest, CopiesHoldTheirBuffersUntilTheirCompletions) {
  auto stream = NewStream("s");
  constexpr size_t kBytes = 1 << 20;
  std::vector<std::byte> expected(kBytes);
  for (size_t i = 0; i < kBytes; ++i) expected[i] = std::byte(i * 7 + 3);
  std::atomic<bool> matched{false};
  Recorder recorder;
  {
    auto src = device_->AllocateHost(kBytes);
    auto on_device = device_->AllocateDevice(kBytes, *stream);
    auto back = device_->AllocateHost(kBytes);
    ASSERT_TRUE(src.ok() && on_device.ok() && back.ok());
    std::memcpy(src->data, expected.data(), kBytes);
    std::memset(back->data, 0, kBytes);
    stream->Enqueue({.run = Busy(microseconds(20'000))});  // the copies queue behind this
    stream->Copy(*on_device, *src, kBytes, recorder.Callback(0, &device_->completion_loop()));
    CompletionCallback record = recorder.Callback(1, &device_->completion_loop());
    stream->Copy(*back, *on_device, kBytes, [&, data = back->data, record](const Completion& c) {
      matched = std::memcmp(data, expected.data(), kBytes) == 0;
      record(c);
    });
  }  // every buffer handle of the caller is gone
  ASSERT_TRUE(recorder.WaitFor(2));
  EXPECT_TRUE(recorder.status(0).ok()) << recorder.status(0).ToString();
  EXPECT_TRUE(recorder.status(1).ok()) << recorder.status(1).ToString();
  EXPECT_TRUE(matched.load());
  stream->Synchronize();
}

TEST_P(DeviceConformanceTest, CopyResultIsVisibleAfterItsCompletion) {
  auto stream = NewStream("s");
  constexpr size_t kBytes = 4096;
  auto src = device_->AllocateHost(kBytes);
  auto dst = device_->AllocateHost(kBytes);
  auto on_device = device_->AllocateDevice(kBytes, *stream);
  ASSERT_TRUE(src.ok() && dst.ok() && on_device.ok());
  for (size_t i = 0; i < kBytes; ++i) src->data[i] = std::byte(i % 251);
  std::memset(dst->data, 0, kBytes);
  Recorder recorder;
  stream->Copy(*on_device, *src, kBytes, nullptr);
  stream->Copy(*dst, *on_device, kBytes, recorder.Callback(0, &device_->completion_loop()));
  ASSERT_TRUE(recorder.WaitFor(1));
  EXPECT_EQ(std::memcmp(dst->data, src->data, kBytes), 0);
}

TEST_P(DeviceConformanceTest, PendingCountsWorkUntilItsCompletionReturns) {
  auto stream = NewStream("s");
  auto event = device_->CreateEvent();
  ASSERT_TRUE(event.ok());
  stream->Enqueue({.run = Busy(microseconds(30'000))});
  stream->Record(**event);
  stream->Enqueue({});
  EXPECT_EQ(stream->pending(), 2u);
  stream->Synchronize();
  EXPECT_EQ(stream->pending(), 0u);
  EXPECT_TRUE((*event)->Query());
}

TEST_P(DeviceConformanceTest, AnIdleCompletionLoopDoesNotWake) {
  auto stream = NewStream("s");
  stream->Enqueue({.run = Busy(microseconds(100))});
  stream->Synchronize();
  const uint64_t before = device_->completion_loop().wakeups();
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(device_->completion_loop().wakeups(), before) << "the completion loop must block, not poll";
  stream->Enqueue({.run = Busy(microseconds(100))});
  stream->Synchronize();
  EXPECT_GT(device_->completion_loop().wakeups(), before);
}

TEST_P(DeviceConformanceTest, StreamsReportTheirNameAndPriority) {
  auto high = NewStream("urgent", StreamPriority::kHigh);
  auto low = NewStream("later", StreamPriority::kLow);
  EXPECT_EQ(high->name(), "urgent");
  EXPECT_EQ(high->priority(), StreamPriority::kHigh);
  EXPECT_EQ(low->priority(), StreamPriority::kLow);
  EXPECT_EQ(high->native().kind, device_->kind());
  EXPECT_FALSE(device_->Describe().empty());
}

}  // namespace
}  // namespace weft::testing
