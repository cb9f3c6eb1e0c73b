#include "device/cpu/cpu_device.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <latch>
#include <mutex>
#include <random>
#include <thread>

#include "device/completion_loop.h"
#include "device/testing/conformance.h"

namespace weft {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

testing::DeviceUnderTest CpuUnderTest(int workers) {
  return {
      .name = "cpu" + std::to_string(workers),
      .create = [workers] { return CreateCpuDevice({.workers = workers}); },
      .busy =
          [](microseconds d) {
            return [d](const NativeStream&) {
              std::this_thread::sleep_for(d);
              return Status::Ok();
            };
          },
      .unavailable = [] { return std::string(); },
  };
}

using testing::DeviceConformanceTest;

INSTANTIATE_TEST_SUITE_P(Cpu, DeviceConformanceTest, ::testing::Values(CpuUnderTest(2), CpuUnderTest(4)),
                         testing::DeviceName);

// Holds work until opened. Thread-safe.
class Gate {
 public:
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  std::function<Status(const NativeStream&)> Work() {
    return [this](const NativeStream&) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return open_; });
      return Status::Ok();
    };
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Appends ids as work runs. Thread-safe.
class RunLog {
 public:
  std::function<Status(const NativeStream&)> Work(std::string id) {
    return [this, id](const NativeStream&) {
      std::lock_guard lock(mu_);
      log_.push_back(id);
      return Status::Ok();
    };
  }
  std::vector<std::string> log() {
    std::lock_guard lock(mu_);
    return log_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> log_;
};

TEST(CpuDeviceTest, AFreeWorkerTakesTheReadyStreamOfHighestPriority) {
  auto device = CreateCpuDevice({.workers = 1});
  ASSERT_TRUE(device.ok());
  auto blocker = (*device)->CreateStream({.name = "blocker"});
  auto low = (*device)->CreateStream({.name = "low", .priority = StreamPriority::kLow});
  auto normal = (*device)->CreateStream({.name = "normal", .priority = StreamPriority::kNormal});
  auto high = (*device)->CreateStream({.name = "high", .priority = StreamPriority::kHigh});
  Gate gate;
  RunLog log;
  (*blocker)->Enqueue({.run = gate.Work()});  // occupies the only worker
  std::this_thread::sleep_for(milliseconds(20));
  (*low)->Enqueue({.run = log.Work("low1")});
  (*low)->Enqueue({.run = log.Work("low2")});
  (*normal)->Enqueue({.run = log.Work("normal")});
  (*high)->Enqueue({.run = log.Work("high1")});
  (*high)->Enqueue({.run = log.Work("high2")});
  gate.Open();
  for (auto* s : {&*low, &*normal, &*high, &*blocker}) (*s)->Synchronize();
  EXPECT_EQ(log.log(), (std::vector<std::string>{"high1", "high2", "normal", "low1", "low2"}));
}

TEST(CpuDeviceTest, EqualPrioritiesAreServedInTheOrderTheyBecameReady) {
  auto device = CreateCpuDevice({.workers = 1});
  ASSERT_TRUE(device.ok());
  auto blocker = (*device)->CreateStream({.name = "blocker"});
  auto a = (*device)->CreateStream({.name = "a"});
  auto b = (*device)->CreateStream({.name = "b"});
  Gate gate;
  RunLog log;
  (*blocker)->Enqueue({.run = gate.Work()});
  std::this_thread::sleep_for(milliseconds(20));
  (*b)->Enqueue({.run = log.Work("b1")});
  (*a)->Enqueue({.run = log.Work("a1")});
  (*b)->Enqueue({.run = log.Work("b2")});
  gate.Open();
  for (auto* s : {&*a, &*b, &*blocker}) (*s)->Synchronize();
  // b became ready first; after b1, b is ready again behind a.
  EXPECT_EQ(log.log(), (std::vector<std::string>{"b1", "a1", "b2"}));
}

TEST(CpuDeviceTest, WorkersRunDifferentStreamsAtOnce) {
  auto device = CreateCpuDevice({.workers = 2});
  ASSERT_TRUE(device.ok());
  auto a = (*device)->CreateStream({.name = "a"});
  auto b = (*device)->CreateStream({.name = "b"});
  std::latch both(2);
  auto meet = [&](const NativeStream&) {
    both.arrive_and_wait();  // returns only when the other stream's work runs at the same time
    return Status::Ok();
  };
  (*a)->Enqueue({.run = meet});
  (*b)->Enqueue({.run = meet});
  (*a)->Synchronize();
  (*b)->Synchronize();
}

TEST(CpuDeviceTest, AStreamNeverRunsTwoItemsAtOnce) {
  auto device = CreateCpuDevice({.workers = 4});
  ASSERT_TRUE(device.ok());
  auto stream = (*device)->CreateStream({.name = "s"});
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  for (int i = 0; i < 200; ++i) {
    (*stream)->Enqueue({.run = [&](const NativeStream&) {
      if (running.fetch_add(1) != 0) overlapped = true;
      std::this_thread::sleep_for(microseconds(50));
      running.fetch_sub(1);
      return Status::Ok();
    }});
  }
  (*stream)->Synchronize();
  EXPECT_FALSE(overlapped.load());
}

TEST(CpuDeviceTest, WorkCountMustBePositive) {
  EXPECT_EQ(CreateCpuDevice({.workers = 0}).status().code(), StatusCode::kInvalidArgument);
}

TEST(CpuDeviceTest, ExceptionsBecomeErrors) {
  auto device = CreateCpuDevice({.workers = 1});
  ASSERT_TRUE(device.ok());
  auto stream = (*device)->CreateStream({.name = "s"});
  Status seen;
  (*stream)->Enqueue({.run = [](const NativeStream&) -> Status { throw std::runtime_error("boom"); },
                      .on_done = [&](const Completion& c) { seen = c.status; }});
  (*stream)->Synchronize();
  EXPECT_EQ(seen.code(), StatusCode::kInternal);
}

// Idle streams have a worker of their own: their work runs while every worker is taken, never on the caller, and in
// the kernel's idle class (or at nice 19 where the kernel refuses it).
TEST(CpuDeviceTest, IdleStreamsRunOnTheIdleWorkerOutsideTheWorkerCount) {
  auto device = CreateCpuDevice({.workers = 1});
  ASSERT_TRUE(device.ok());
  auto blocker = (*device)->CreateStream({.name = "blocker"});
  auto idle = (*device)->CreateStream({.name = "idle", .priority = StreamPriority::kLow, .idle = true});
  Gate gate;
  (*blocker)->Enqueue({.run = gate.Work()});  // occupies the only worker until the idle work has run
  std::thread::id ran_on;
  int policy = -1;
  int nice = 0;
  (*idle)->Enqueue({.run =
                        [&](const NativeStream&) {
                          ran_on = std::this_thread::get_id();
                          policy = sched_getscheduler(0);
                          nice = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
                          return Status::Ok();
                        },
                    .may_run_on_caller = true});
  (*idle)->Synchronize();
  gate.Open();
  (*blocker)->Synchronize();
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_TRUE(policy == SCHED_IDLE || nice == 19) << "policy " << policy << ", nice " << nice;
}

// The idle worker takes idle streams in the order they became ready, one item at a time, and keeps each stream's
// order.
TEST(CpuDeviceTest, IdleStreamsKeepTheirOrder) {
  auto device = CreateCpuDevice({.workers = 1});
  ASSERT_TRUE(device.ok());
  auto a = (*device)->CreateStream({.name = "a", .idle = true});
  auto b = (*device)->CreateStream({.name = "b", .idle = true});
  auto first = (*device)->CreateStream({.name = "first", .idle = true});
  Gate gate;
  RunLog log;
  (*first)->Enqueue({.run = gate.Work()});  // occupies the idle worker
  std::this_thread::sleep_for(milliseconds(20));
  (*b)->Enqueue({.run = log.Work("b1")});
  (*a)->Enqueue({.run = log.Work("a1")});
  (*b)->Enqueue({.run = log.Work("b2")});
  gate.Open();
  for (auto* s : {&*a, &*b, &*first}) (*s)->Synchronize();
  EXPECT_EQ(log.log(), (std::vector<std::string>{"b1", "a1", "b2"}));
}

// A Wait on an idle stream holds it for an event of an ordinary one, and the other way round.
TEST(CpuDeviceTest, EventsOrderIdleAndOrdinaryStreams) {
  auto device = CreateCpuDevice({.workers = 2});
  ASSERT_TRUE(device.ok());
  auto ordinary = (*device)->CreateStream({.name = "ordinary"});
  auto idle = (*device)->CreateStream({.name = "idle", .idle = true});
  auto there = (*device)->CreateEvent();
  auto back = (*device)->CreateEvent();
  ASSERT_TRUE(there.ok() && back.ok());
  Gate gate;
  RunLog log;
  (*ordinary)->Enqueue({.run = gate.Work()});
  (*ordinary)->Enqueue({.run = log.Work("ordinary1")});
  (*ordinary)->Record(**there);
  (*idle)->Wait(**there);
  (*idle)->Enqueue({.run = log.Work("idle")});
  (*idle)->Record(**back);
  (*ordinary)->Wait(**back);
  (*ordinary)->Enqueue({.run = log.Work("ordinary2")});
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_TRUE(log.log().empty());
  gate.Open();
  (*ordinary)->Synchronize();
  (*idle)->Synchronize();
  EXPECT_EQ(log.log(), (std::vector<std::string>{"ordinary1", "idle", "ordinary2"}));
}

// An idle device runs caller-runnable work inside Enqueue, on the enqueueing thread; the completion still comes
// from the completion loop, woken through the stream's eventfd.
// Work that notes the thread it runs on.
std::function<Status(const NativeStream&)> RunsOn(std::thread::id* thread) {
  return [thread](const NativeStream&) {
    *thread = std::this_thread::get_id();
    return Status::Ok();
  };
}

TEST(CpuDeviceTest, WorkRunsOnTheCallerWhenAWorkerWouldStartItAtOnce) {
  auto device = CreateCpuDevice({.workers = 1});
  ASSERT_TRUE(device.ok());
  auto stream = (*device)->CreateStream({.name = "s"});
  CompletionLoop& loop = (*device)->completion_loop();
  uint64_t wakeups = loop.wakeups();
  std::thread::id ran_on;
  std::atomic<bool> done_on_loop{false};
  std::atomic<bool> done{false};
  (*stream)->Enqueue({.run = RunsOn(&ran_on),
                      .on_done =
                          [&](const Completion&) {
                            done_on_loop = loop.InLoopThread();
                            done = true;
                          },
                      .may_run_on_caller = true});
  EXPECT_EQ(ran_on, std::this_thread::get_id());  // already ran when Enqueue returned
  (*stream)->Synchronize();
  EXPECT_TRUE(done.load());
  EXPECT_TRUE(done_on_loop.load());
  EXPECT_GT(loop.wakeups(), wakeups);

  // With complete_on_caller the completion too has run when Enqueue returns, on this thread, and the loop never
  // woke.
  wakeups = loop.wakeups();
  std::thread::id done_on;
  (*stream)->Enqueue({.run = RunsOn(&ran_on),
                      .on_done = [&](const Completion&) { done_on = std::this_thread::get_id(); },
                      .may_run_on_caller = true,
                      .complete_on_caller = true});
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(done_on, std::this_thread::get_id());
  EXPECT_EQ((*stream)->pending(), 0u);
  (*stream)->Synchronize();
  EXPECT_EQ(loop.wakeups(), wakeups);
}

// A completion callback that, once entered, waits until the test lets it return, and then logs `id`.
// Thread-safe.
class HeldCompletion {
 public:
  HeldCompletion(RunLog* log, std::string id) : log_(log), id_(std::move(id)) {}
  CompletionCallback Callback() {
    return [this](const Completion&) {
      {
        std::unique_lock lock(mu_);
        entered_ = true;
        cv_.notify_all();
        cv_.wait(lock, [this] { return released_; });
      }
      (void)log_->Work(id_)(NativeStream{});
    };
  }
  void WaitUntilEntered() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return entered_; });
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  RunLog* const log_;
  const std::string id_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;   // guarded by mu_
  bool released_ = false;  // guarded by mu_
};

Status Nothing(const NativeStream&) { return Status::Ok(); }

// A completion of the stream still with the loop: the caller runs the work but leaves its completion to the loop,
// after the earlier one.
TEST(CpuDeviceTest, ACallersCompletionWaitsBehindOneStillWithTheLoop) {
  auto device = CreateCpuDevice({.workers = 2});
  ASSERT_TRUE(device.ok());
  auto stream = (*device)->CreateStream({.name = "s"});
  CompletionLoop& loop = (*device)->completion_loop();
  RunLog log;
  HeldCompletion first(&log, "first");
  (*stream)->Enqueue({.run = Nothing, .on_done = first.Callback()});
  first.WaitUntilEntered();
  std::thread::id ran_on;
  std::atomic<bool> second_on_loop{false};
  (*stream)->Enqueue({.run = RunsOn(&ran_on),
                      .on_done =
                          [&](const Completion&) {
                            second_on_loop = loop.InLoopThread();
                            (void)log.Work("second")(NativeStream{});
                          },
                      .may_run_on_caller = true,
                      .complete_on_caller = true});
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_TRUE(log.log().empty());
  first.Release();
  (*stream)->Synchronize();
  EXPECT_EQ(log.log(), (std::vector<std::string>{"first", "second"}));
  EXPECT_TRUE(second_on_loop.load());
}

// While a caller runs its work's completion, work enqueued behind it on the stream waits, so the stream's
// completions keep their order and never overlap.
TEST(CpuDeviceTest, WorkBehindACallersCompletionWaitsForIt) {
  auto device = CreateCpuDevice({.workers = 2});
  ASSERT_TRUE(device.ok());
  auto stream = (*device)->CreateStream({.name = "s"});
  RunLog log;
  HeldCompletion held(&log, "caller done");
  std::jthread caller([&] {
    (*stream)->Enqueue(
        {.run = Nothing, .on_done = held.Callback(), .may_run_on_caller = true, .complete_on_caller = true});
  });
  held.WaitUntilEntered();
  (*stream)->Enqueue({.run = log.Work("behind ran"),
                      .on_done = [&](const Completion&) { (void)log.Work("behind done")(NativeStream{}); }});
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_TRUE(log.log().empty());
  held.Release();
  caller.join();
  (*stream)->Synchronize();
  EXPECT_EQ(log.log(), (std::vector<std::string>{"caller done", "behind ran", "behind done"}));
}

// Work queued before on the same stream, or running: the caller's work waits its turn and runs on a worker.
TEST(CpuDeviceTest, WorkBehindQueuedWorkKeepsStreamOrder) {
  auto device = CreateCpuDevice({.workers = 2});
  ASSERT_TRUE(device.ok());
  auto stream = (*device)->CreateStream({.name = "s"});
  Gate gate;
  RunLog log;
  (*stream)->Enqueue({.run = gate.Work()});
  (*stream)->Enqueue({.run = log.Work("queued")});
  std::thread::id ran_on;
  (*stream)->Enqueue({.run =
                          [&](const NativeStream& native) {
                            ran_on = std::this_thread::get_id();
                            return log.Work("caller")(native);
                          },
                      .may_run_on_caller = true});
  gate.Open();
  (*stream)->Synchronize();
  EXPECT_EQ(log.log(), (std::vector<std::string>{"queued", "caller"}));
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

// A Wait holds caller-runnable work like any other: it runs after the recorded work, on a worker.
TEST(CpuDeviceTest, AWaitHoldsWorkThatCouldRunOnTheCaller) {
  auto device = CreateCpuDevice({.workers = 2});
  ASSERT_TRUE(device.ok());
  auto first = (*device)->CreateStream({.name = "first"});
  auto second = (*device)->CreateStream({.name = "second"});
  auto event = (*device)->CreateEvent();
  Gate gate;
  RunLog log;
  (*first)->Enqueue({.run = [&](const NativeStream& native) {
    if (Status s = gate.Work()(native); !s.ok()) return s;
    return log.Work("recorded")(native);
  }});
  (*first)->Record(**event);
  (*second)->Wait(**event);
  std::thread::id ran_on;
  (*second)->Enqueue({.run =
                          [&](const NativeStream& native) {
                            ran_on = std::this_thread::get_id();
                            return log.Work("waiter")(native);
                          },
                      .may_run_on_caller = true});
  gate.Open();
  (*second)->Synchronize();
  (*first)->Synchronize();
  EXPECT_EQ(log.log(), (std::vector<std::string>{"recorded", "waiter"}));
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

// The workers bound what runs at once, on whichever threads: with the only worker busy the caller's work is
// queued, and while a caller runs work no worker starts another stream's.
TEST(CpuDeviceTest, WorkOnTheCallerCountsAgainstTheWorkers) {
  auto device = CreateCpuDevice({.workers = 1});
  ASSERT_TRUE(device.ok());
  auto a = (*device)->CreateStream({.name = "a"});
  auto b = (*device)->CreateStream({.name = "b"});
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  auto counted = [&](std::function<Status(const NativeStream&)> inner) {
    return [&, inner](const NativeStream& native) {
      const int now = running.fetch_add(1) + 1;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      Status status = inner(native);
      running.fetch_sub(1);
      return status;
    };
  };
  Gate worker_gate;
  std::thread::id ran_on;
  (*a)->Enqueue({.run = counted(worker_gate.Work())});  // takes the only worker
  std::this_thread::sleep_for(milliseconds(20));
  (*b)->Enqueue({.run = counted([&](const NativeStream&) {
                   ran_on = std::this_thread::get_id();
                   return Status::Ok();
                 }),
                 .may_run_on_caller = true});  // no free worker: queued
  EXPECT_NE(ran_on, std::this_thread::get_id());
  worker_gate.Open();
  (*a)->Synchronize();
  (*b)->Synchronize();
  EXPECT_NE(ran_on, std::this_thread::get_id());

  // Now a caller holds the only worker's slot: work enqueued meanwhile on another stream waits for it.
  Gate caller_gate;
  RunLog log;
  std::jthread caller([&] {
    (*a)->Enqueue({.run = counted([&](const NativeStream& native) {
                     if (Status s = caller_gate.Work()(native); !s.ok()) return s;
                     return log.Work("caller")(native);
                   }),
                   .may_run_on_caller = true});
  });
  while (running.load() == 0) std::this_thread::sleep_for(milliseconds(1));
  (*b)->Enqueue({.run = counted(log.Work("worker"))});
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_TRUE(log.log().empty());
  caller_gate.Open();
  caller.join();
  (*b)->Synchronize();
  (*a)->Synchronize();
  EXPECT_EQ(log.log(), (std::vector<std::string>{"caller", "worker"}));
  EXPECT_EQ(most.load(), 1);
}

// Chains of events between many streams from many threads, for ThreadSanitizer: each stream's items must run in
// order, every item after a Wait must run after the recorded item it waits for, and no more items run at once
// than there are workers. With the parameter, work may run on the enqueueing threads (1), and its completions too
// (2).
class EventChainsTest : public ::testing::TestWithParam<int> {};

TEST_P(EventChainsTest, AcrossStreamsFromManyThreads) {
  constexpr int kWorkers = 3;
  auto device = CreateCpuDevice({.workers = kWorkers});
  ASSERT_TRUE(device.ok());
  constexpr int kStreams = 6;
  constexpr int kSteps = 200;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::unique_ptr<Event>> events;
  for (int i = 0; i < kStreams; ++i) {
    auto priority = static_cast<StreamPriority>(i % 3);
    streams.push_back(
        std::move((*device)->CreateStream({.name = "s" + std::to_string(i), .priority = priority}).value()));
    events.push_back(std::move((*device)->CreateEvent().value()));
  }
  std::atomic<int64_t> clock{0};
  std::atomic<int> running{0};
  std::atomic<bool> too_many{false};
  std::vector<std::vector<int64_t>> stamps(kStreams, std::vector<int64_t>(kSteps, -1));
  std::vector<int> completed(kStreams, -1);  // the last step of each stream whose completion ran
  std::atomic<bool> out_of_order{false};
  // For each step, the (stream, step) whose Record it waited for, if any.
  std::vector<std::vector<std::pair<int, int>>> waited(kStreams, std::vector<std::pair<int, int>>(kSteps, {-1, -1}));
  std::mutex record_mu;                     // makes "the latest Record of a stream" well defined across threads
  std::vector<int> recorded(kStreams, -1);  // guarded by record_mu: the last step each stream recorded
  std::vector<std::jthread> threads;
  for (int t = 0; t < kStreams; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int step = 0; step < kSteps; ++step) {
        int other = static_cast<int>(rng() % kStreams);
        if (other != t && rng() % 4 == 0) {
          std::lock_guard lock(record_mu);
          streams[t]->Wait(*events[other]);
          waited[t][step] = {other, recorded[other]};
        }
        streams[t]->Enqueue({.run =
                                 [&, t, step](const NativeStream&) {
                                   if (running.fetch_add(1) >= kWorkers) too_many = true;
                                   stamps[t][step] = clock.fetch_add(1);
                                   running.fetch_sub(1);
                                   return Status::Ok();
                                 },
                             // Unsynchronized: a stream's completions never overlap (ThreadSanitizer checks).
                             .on_done =
                                 [&, t, step](const Completion&) {
                                   if (completed[t] != step - 1) out_of_order = true;
                                   completed[t] = step;
                                 },
                             .may_run_on_caller = GetParam() >= 1,
                             .complete_on_caller = GetParam() == 2});
        std::lock_guard lock(record_mu);
        streams[t]->Record(*events[t]);
        recorded[t] = step;
      }
    });
  }
  threads.clear();
  for (auto& s : streams) s->Synchronize();
  for (int t = 0; t < kStreams; ++t) {
    for (int step = 1; step < kSteps; ++step) EXPECT_LT(stamps[t][step - 1], stamps[t][step]);
    for (int step = 0; step < kSteps; ++step) {
      auto [other, other_step] = waited[t][step];
      if (other >= 0 && other_step >= 0) {
        EXPECT_LT(stamps[other][other_step], stamps[t][step]);
      }
    }
  }
  EXPECT_FALSE(too_many.load());
  EXPECT_FALSE(out_of_order.load());
  EXPECT_EQ(completed, std::vector<int>(kStreams, kSteps - 1));
}

INSTANTIATE_TEST_SUITE_P(OnWorkersOrCallers, EventChainsTest, ::testing::Values(0, 1, 2));

}  // namespace
}  // namespace weft
