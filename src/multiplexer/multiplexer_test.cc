#include "multiplexer/multiplexer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "device/cpu/cpu_device.h"
#include "multiplexer/testing/lane_harness.h"

namespace weft {
namespace {

using std::chrono::milliseconds;

ModelConfig Config(std::string builtin, ModelPriority priority, std::map<std::string, std::string> parameters = {}) {
  ModelConfig c;
  c.name = builtin + "_" + std::to_string(static_cast<int>(priority));
  c.backend = "weft_builtin";
  c.max_batch_size = 8;
  c.inputs = {{"INPUT0", DataType::kFp32, {1}, std::nullopt}};
  c.outputs = {{"OUTPUT0", builtin == "counter" ? DataType::kInt64 : DataType::kFp32, {1}, std::nullopt}};
  c.parameters = std::move(parameters);
  c.parameters["builtin"] = builtin;
  c.priority = priority;
  return c;
}

std::vector<Tensor> Batch(int items) {
  std::vector<std::byte> bytes(items * sizeof(float));
  return {Tensor::FromBytes("INPUT0", DataType::kFp32, {items, 1}, std::move(bytes))};
}

class MultiplexerTest : public testing::LaneHarness {
 protected:
  void Start(int workers, MultiplexerOptions options = {}) {
    auto device = CreateCpuDevice({.workers = workers});
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    StartOn(std::move(device).value(), options);
  }
  void Submit(Lane* lane, int id, int items = 1, bool may_run_here = false, bool background = false) {
    SubmitInputs(lane, id, Batch(items), may_run_here, background);
  }
  // Keeps `lanes` submitting one-item batches, a thread each, for `duration`: all of them busy to the end, so
  // that none sees the others' streams go idle.
  void SubmitFromThreads(const std::vector<Lane*>& lanes, milliseconds duration) {
    const auto end = std::chrono::steady_clock::now() + duration;
    std::vector<std::jthread> threads;
    for (size_t l = 0; l < lanes.size(); ++l) {
      threads.emplace_back([this, lane = lanes[l], l, end] {
        for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
          if (lane->AcquireSlot(std::stop_token())) lane->Submit(Batch(1), results_.Callback(int(l) * 100'000 + i));
        }
      });
    }
  }
};

TEST(PriorityClassTest, FollowsTheConfigPriority) {
  EXPECT_EQ(ClassOf(ModelPriority::kMax), PriorityClass::kHigh);
  EXPECT_EQ(ClassOf(ModelPriority::kDefault), PriorityClass::kNormal);
  EXPECT_EQ(ClassOf(ModelPriority::kMin), PriorityClass::kBestEffort);
}

TEST_F(MultiplexerTest, InstancesOfAClassSpreadOverItsStreams) {
  Start(2, {.streams_per_class = 2});
  Lane* a = Add(Config("sleep", ModelPriority::kDefault));
  Lane* b = Add(Config("sleep", ModelPriority::kDefault));
  Lane* c = Add(Config("sleep", ModelPriority::kMax));
  Lane* d = Add(Config("sleep", ModelPriority::kMin));
  EXPECT_NE(a->stream_name(), b->stream_name());
  EXPECT_EQ(a->stream_name().rfind("normal/", 0), 0u);
  EXPECT_EQ(c->stream_name().rfind("high/", 0), 0u);
  EXPECT_EQ(d->stream_name().rfind("best_effort/", 0), 0u);
  EXPECT_EQ(a->max_inflight(), 1);  // the CPU device's defaults
  EXPECT_EQ(c->max_inflight(), 2);
  EXPECT_EQ(d->max_inflight(), 1);
  EXPECT_EQ(mux_->Stats().size(), 7u);  // and the background stream
}

// The contract of a move: the first batch on the new stream waits for the last one on the old stream. The counter
// model's output is the number of items its instance executed before, so any reordering shows.
TEST_F(MultiplexerTest, OrderPerInstanceIsKeptAcrossAMove) {
  Start(4, {.streams_per_class = 2, .max_inflight = 8, .load_balance = false});
  Lane* lane = Add(Config("counter", ModelPriority::kDefault, {{"batch_delay_us", "30000"}}));
  Submit(lane, 0, 2);  // slow, on the first stream
  lane->MoveTo(lane->stream_name() == "normal/0" ? 1 : 0);
  Submit(lane, 1, 3);  // would run at once on a free worker of the idle stream if it did not wait
  ASSERT_TRUE(results_.WaitFor(2));
  EXPECT_EQ(results_.order(), (std::vector<int>{0, 1}));
  EXPECT_EQ(results_.counts(0), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(results_.counts(1), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_GE(results_.timing(1).start, results_.timing(0).end);
  EXPECT_EQ(lane->migrations(), 1u);
}

// With the parameter, the submitting thread runs a batch itself whenever its stream is idle; the others queue
// behind the batches in flight or behind the Wait of a move or a switch to or from the background stream.
class ManyMovesTest : public MultiplexerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(ManyMovesTest, KeepOrder) {
  Start(4, {.streams_per_class = 3, .max_inflight = 4, .load_balance = false});
  Lane* lane = Add(Config("counter", ModelPriority::kDefault, {{"batch_delay_us", "200"}}));
  std::mt19937 rng(7);
  constexpr int kBatches = 120;
  for (int i = 0; i < kBatches; ++i) {
    if (rng() % 3 == 0) lane->MoveTo(rng() % 3);
    // Every fourth batch or so goes to the background stream and back.
    Submit(lane, i, 1, /*may_run_here=*/GetParam(), /*background=*/rng() % 4 == 0);
  }
  ASSERT_TRUE(results_.WaitFor(kBatches));
  for (int i = 0; i < kBatches; ++i) EXPECT_EQ(results_.counts(i), (std::vector<int64_t>{i})) << i;
  EXPECT_GT(lane->migrations(), 10u);
}

INSTANTIATE_TEST_SUITE_P(OnWorkersOrTheSubmitter, ManyMovesTest, ::testing::Bool());

// On an idle device a batch that may run here runs inside Submit; its callback still comes from the completion
// thread, after Submit has returned, and the slot is held until then.
TEST_F(MultiplexerTest, ABatchMayRunOnTheSubmittingThread) {
  Start(2);
  Lane* lane = Add(Config("sleep", ModelPriority::kDefault, {{"batch_delay_us", "20000"}}));
  const auto start = std::chrono::steady_clock::now();
  Submit(lane, 0, 1, /*may_run_here=*/true);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(20));
  ASSERT_TRUE(results_.WaitFor(1));
  EXPECT_TRUE(results_.ok());
  EXPECT_GE(results_.timing(0).start, start);
  // A batch behind one in flight on its stream waits for it, wherever it runs.
  Lane* queued = Add(Config("sleep", ModelPriority::kDefault, {{"batch_delay_us", "20000"}}));
  queued->MoveTo(lane->stream_name() == "normal/0" ? 0 : 1);
  ASSERT_EQ(queued->stream_name(), lane->stream_name());
  Submit(lane, 1);
  Submit(queued, 2, 1, /*may_run_here=*/true);
  ASSERT_TRUE(results_.WaitFor(3));
  EXPECT_EQ(results_.order(), (std::vector<int>{0, 1, 2}));
  EXPECT_GE(results_.timing(2).start, results_.timing(1).end);
}

// With kRunAndComplete the submitting thread runs the completion too: the callback has run, on this thread, and
// the slot is free again when Submit returns.
TEST_F(MultiplexerTest, ABatchAndItsCompletionMayRunOnTheSubmittingThread) {
  Start(2);
  Lane* lane = Add(Config("sleep", ModelPriority::kDefault, {{"batch_delay_us", "1000"}}));
  std::thread::id done_on;
  ASSERT_TRUE(lane->AcquireSlot(std::stop_token()));
  lane->Submit(
      Batch(1),
      [&](Result<std::vector<Tensor>> outputs, const BatchTiming&) {
        EXPECT_TRUE(outputs.ok());
        done_on = std::this_thread::get_id();
      },
      OnSubmitter::kRunAndComplete);
  EXPECT_EQ(done_on, std::this_thread::get_id());
  EXPECT_EQ(lane->inflight(), 0);
  // Only run here: the callback comes from the completion thread.
  ASSERT_TRUE(lane->AcquireSlot(std::stop_token()));
  std::promise<std::thread::id> second;
  lane->Submit(
      Batch(1), [&](Result<std::vector<Tensor>>, const BatchTiming&) { second.set_value(std::this_thread::get_id()); },
      OnSubmitter::kRun);
  EXPECT_NE(second.get_future().get(), std::this_thread::get_id());
}

TEST_F(MultiplexerTest, BestEffortBatchesInFlightAreBoundedPerInstance) {
  Start(2, {.best_effort_max_inflight = 1});
  Lane* lane = Add(Config("sleep", ModelPriority::kMin, {{"batch_delay_us", "50000"}}));
  Submit(lane, 0);
  EXPECT_EQ(lane->inflight(), 1);
  EXPECT_FALSE(lane->TryAcquireSlot());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(lane->AcquireSlot(std::stop_token()));  // gated on the completion
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(30));
  lane->ReleaseSlot();
  ASSERT_TRUE(results_.WaitFor(1));
}

TEST_F(MultiplexerTest, TheBoundComesFromTheModelParameter) {
  Start(2);
  Lane* three = Add(Config("sleep", ModelPriority::kMin, {{"weft.max_inflight_batches", "3"}}));
  Lane* unbounded = Add(Config("sleep", ModelPriority::kMin, {{"weft.max_inflight_batches", "0"}}));
  EXPECT_EQ(three->max_inflight(), 3);
  EXPECT_GT(unbounded->max_inflight(), 1000);
  auto bad = mux_->AddInstance(Config("sleep", ModelPriority::kMin, {{"weft.max_inflight_batches", "x"}}), 1,
                               instances_[0].get());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(MultiplexerTest, TheBestEffortBudgetIsSharedByTheDevice) {
  Start(4, {.best_effort_max_inflight = 4, .best_effort_budget = 1});
  Lane* a = Add(Config("sleep", ModelPriority::kMin, {{"batch_delay_us", "30000"}}));
  Lane* b = Add(Config("sleep", ModelPriority::kMin));
  Lane* urgent = Add(Config("sleep", ModelPriority::kMax));
  Submit(a, 0);
  EXPECT_EQ(mux_->best_effort_inflight(), 1);
  EXPECT_FALSE(b->TryAcquireSlot());
  EXPECT_TRUE(urgent->TryAcquireSlot());  // other classes are not bounded by it
  urgent->ReleaseSlot();
  std::stop_source stop;
  std::jthread stopper([&] {
    std::this_thread::sleep_for(milliseconds(5));
    stop.request_stop();
  });
  EXPECT_FALSE(b->AcquireSlot(stop.get_token()));  // a stop ends the wait
  ASSERT_TRUE(b->AcquireSlot(std::stop_token()));  // and a completion frees the budget
  b->ReleaseSlot();
  ASSERT_TRUE(results_.WaitFor(1));
  EXPECT_EQ(mux_->best_effort_inflight(), 0);
}

// One worker: a high-priority batch submitted after best-effort batches are queued runs before them.
TEST_F(MultiplexerTest, UrgentWorkOvertakesQueuedBestEffortWork) {
  Start(1, {.streams_per_class = 1, .best_effort_max_inflight = 0});
  Lane* be = Add(Config("sleep", ModelPriority::kMin, {{"batch_delay_us", "20000"}}));
  Lane* urgent = Add(Config("sleep", ModelPriority::kMax, {{"batch_delay_us", "1000"}}));
  for (int i = 0; i < 4; ++i) Submit(be, i);
  std::this_thread::sleep_for(milliseconds(5));  // the first best-effort batch is running, usually
  Submit(urgent, 100);
  ASSERT_TRUE(results_.WaitFor(5));
  // On a loaded machine the worker may not have started batch 0 within the 5 ms; then the urgent batch goes
  // first. Either way it overtakes every best-effort batch that was still queued.
  const std::vector<int> order = results_.order();
  EXPECT_TRUE(order == (std::vector<int>{0, 100, 1, 2, 3}) || order == (std::vector<int>{100, 0, 1, 2, 3}))
      << ::testing::PrintToString(order);
}

// One worker, busy: when it frees up, a best-effort stream that became ready first is served first without
// priorities, and after the high-priority stream with them.
class StreamPrioritiesTest : public MultiplexerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(StreamPrioritiesTest, DecideWhichReadyStreamAFreeWorkerServes) {
  Start(1, {.streams_per_class = 2, .stream_priorities = GetParam(), .best_effort_max_inflight = 0});
  Lane* running = Add(Config("sleep", ModelPriority::kMin, {{"batch_delay_us", "30000"}}));
  Lane* waiting = Add(Config("sleep", ModelPriority::kMin, {{"batch_delay_us", "1000"}}));
  Lane* urgent = Add(Config("sleep", ModelPriority::kMax, {{"batch_delay_us", "1000"}}));
  ASSERT_NE(running->stream_name(), waiting->stream_name());
  Submit(running, 0);
  std::this_thread::sleep_for(milliseconds(5));
  Submit(waiting, 1);
  std::this_thread::sleep_for(milliseconds(5));
  Submit(urgent, 100);
  ASSERT_TRUE(results_.WaitFor(3));
  EXPECT_EQ(results_.order(), (GetParam() ? std::vector<int>{0, 100, 1} : std::vector<int>{0, 1, 100}));
}

INSTANTIATE_TEST_SUITE_P(OnAndOff, StreamPrioritiesTest, ::testing::Bool());

TEST_F(MultiplexerTest, BusyTimeIsMeasuredPerStreamModelAndDevice) {
  Start(2, {.streams_per_class = 1, .max_inflight = 8});
  Lane* lane = Add(Config("sleep", ModelPriority::kDefault, {{"batch_delay_us", "20000"}}));
  const SteadyTime start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) Submit(lane, i);
  ASSERT_TRUE(results_.WaitFor(5));
  const SteadyTime end = std::chrono::steady_clock::now();
  const double busy = mux_->BusyFraction(start, end);
  EXPECT_GT(busy, 0.6);
  EXPECT_LE(busy, 1.0);
  EXPECT_NEAR(mux_->ModelBusyFraction(Config("sleep", ModelPriority::kDefault).name, 1, start, end), busy, 1e-9);
  EXPECT_EQ(mux_->ModelBusyFraction("unknown", 1, start, end), 0);
  const std::string text = metrics_.Exposition();
  for (const char* name : {"weft_stream_busy_fraction", "weft_stream_busy_seconds_total", "weft_stream_queue_depth",
                           "weft_device_busy_fraction", "weft_model_device_ms_per_second", "weft_best_effort_inflight",
                           "weft_instance_migrations_total"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name;
  }
  for (const auto& s : mux_->Stats()) {
    if (s.name == "normal/0") {
      EXPECT_GT(s.load, 0.05);  // 100 ms busy under a 1 s time constant
    }
  }
}

// A background batch runs on the background stream, outside the instance's class: neither on the submitting thread
// nor on a worker while the only worker is taken, and it does not count in its instance's load.
TEST_F(MultiplexerTest, BackgroundBatchesRunOnTheBackgroundStream) {
  Start(1, {.streams_per_class = 1, .max_inflight = 8, .load_balance = false});
  Lane* blocker = Add(Config("sleep", ModelPriority::kMax, {{"batch_delay_us", "200000"}}));
  Lane* lane = Add(Config("sleep", ModelPriority::kDefault, {{"batch_delay_us", "20000"}}));
  Submit(blocker, 0);  // holds the only worker for 200 ms
  std::this_thread::sleep_for(milliseconds(20));
  Submit(lane, 1, 1, /*may_run_here=*/true, /*background=*/true);
  ASSERT_TRUE(results_.WaitFor(1));
  EXPECT_EQ(results_.order(), (std::vector<int>{1}));  // done while the worker was still taken
  ASSERT_TRUE(results_.WaitFor(2));
  bool found = false;
  for (const auto& s : mux_->Stats()) {
    if (s.name != "background") continue;
    found = true;
    EXPECT_GT(s.busy_fraction, 0.0);
    EXPECT_EQ(s.instances, 0);
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(lane->stream_name(), "normal/0");
  EXPECT_NE(metrics_.Exposition().find("weft_stream_busy_seconds_total{device=\"cpu\",stream=\"background\"}"),
            std::string::npos);
}

MultiplexerOptions FastBalancer() {
  return {.streams_per_class = 2,
          .max_inflight = 1,
          .balance_interval = milliseconds(20),
          .balance_threshold = 0.2,
          .load_time_constant = milliseconds(100)};
}

// Two busy instances crowded on one stream: one of them moves, and then they stay apart.
TEST_F(MultiplexerTest, TheBalancerSplitsBusyInstancesCrowdedOnOneStream) {
  Start(4, FastBalancer());
  Lane* a = Add(Config("sleep", ModelPriority::kDefault, {{"batch_delay_us", "5000"}}));
  Lane* b = Add(Config("sleep", ModelPriority::kDefault, {{"batch_delay_us", "5000"}}));
  b->MoveTo(a->stream_name() == "normal/0" ? 0 : 1);
  ASSERT_EQ(a->stream_name(), b->stream_name());
  const uint64_t before = a->migrations() + b->migrations();
  SubmitFromThreads({a, b}, milliseconds(500));
  EXPECT_NE(a->stream_name(), b->stream_name());
  EXPECT_EQ(a->migrations() + b->migrations() - before, 1u);
}

// An instance alone on its stream would only carry its load to the other one: it stays where it is.
TEST_F(MultiplexerTest, ABusyInstanceAloneDoesNotMove) {
  Start(4, FastBalancer());
  Lane* a = Add(Config("sleep", ModelPriority::kDefault, {{"batch_delay_us", "5000"}}));
  SubmitFromThreads({a}, milliseconds(500));
  EXPECT_EQ(a->migrations(), 0u);
}

// Four busy instances on one stream of two: they end two and two, with about as many moves as that takes, not
// all following the same reading back and forth.
TEST_F(MultiplexerTest, CrowdedInstancesSpreadWithoutHerding) {
  Start(4, FastBalancer());
  std::vector<Lane*> lanes;
  for (int i = 0; i < 4; ++i) {
    lanes.push_back(Add(Config("sleep", ModelPriority::kDefault, {{"batch_delay_us", "5000"}})));
    lanes.back()->MoveTo(0);
  }
  uint64_t before = 0;
  for (Lane* lane : lanes) before += lane->migrations();
  SubmitFromThreads(lanes, milliseconds(800));
  int on_first = 0;
  uint64_t moves = 0;
  for (Lane* lane : lanes) {
    on_first += lane->stream_name() == "normal/0" ? 1 : 0;
    moves += lane->migrations();
  }
  EXPECT_EQ(on_first, 2) << "moves " << moves - before;
  EXPECT_LE(moves - before, 4u);
}

TEST_F(MultiplexerTest, InputsLiveUntilTheCompletion) {
  Start(2);
  Lane* lane = Add(Config("sleep", ModelPriority::kDefault, {{"batch_delay_us", "20000"}}));
  std::atomic<bool> released{false};
  std::atomic<bool> released_early{false};
  {
    auto owner = std::shared_ptr<std::byte>(new std::byte[4], [&](std::byte* p) {
      delete[] p;
      released = true;
    });
    Tensor t("INPUT0", DataType::kFp32, {1, 1}, owner, owner.get(), 4);
    ASSERT_TRUE(lane->AcquireSlot(std::stop_token()));
    lane->Submit({t}, [&](Result<std::vector<Tensor>> outputs, const BatchTiming&) {
      released_early = released.load();
      EXPECT_TRUE(outputs.ok());
    });
  }
  lanes_.clear();  // waits for the batch's callback
  mux_.reset();    // and for the streams to release what they held
  EXPECT_FALSE(released_early.load());
  EXPECT_TRUE(released.load());
}

TEST_F(MultiplexerTest, OneSharedStreamServesEveryClass) {
  Start(2, {.single_stream = true});
  Lane* a = Add(Config("sleep", ModelPriority::kMax));
  Lane* b = Add(Config("sleep", ModelPriority::kMin));
  EXPECT_EQ(a->stream_name(), "shared/0");
  EXPECT_EQ(b->stream_name(), "shared/0");
  EXPECT_EQ(mux_->Stats().size(), 1u);
}

}  // namespace
}  // namespace weft
