#include "scheduler/scheduler.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "scheduler/testing/answers.h"
#include "scheduler/testing/fake_instance.h"
#include "scheduler/testing/manual_executor.h"

namespace weft {
namespace {

using std::chrono::milliseconds;
using testing::Answers;
using testing::FakeInstance;
using testing::Gate;
using testing::MakeFloatRequest;
using testing::ManualExecutor;
using Clock = std::chrono::steady_clock;

// A model with one FP32 input of variable length, batched up to `max_batch_size`.
ModelConfig FakeConfig(int max_batch_size = 8, std::optional<DynamicBatchingConfig> batching = std::nullopt) {
  ModelConfig c;
  c.name = "fake";
  c.max_batch_size = max_batch_size;
  c.inputs = {{"INPUT0", DataType::kFp32, {-1}, std::nullopt}};
  c.outputs = {{"OUTPUT0", DataType::kFp32, {-1}, std::nullopt}};
  c.dynamic_batching = std::move(batching);
  return c;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void Start(ModelConfig config, bool gated = false, int instances = 1, Scheduler::Options options = {}) {
    std::vector<ModelInstance*> raw;
    for (int i = 0; i < instances; ++i) {
      instances_.push_back(std::make_unique<FakeInstance>(gated ? &gate_ : nullptr));
      raw.push_back(instances_.back().get());
    }
    options.version = 1;
    scheduler_ = std::make_unique<Scheduler>(std::move(config), std::move(raw), options, &metrics_);
  }

  // Submits a request "id" of `values` (shape {1, n} unless given) and returns its cancel token.
  std::shared_ptr<CancelToken> Submit(const std::string& id, std::vector<float> values, Shape shape = {},
                                      std::function<void(InferenceRequest&)> edit = nullptr) {
    if (shape.empty()) shape = {1, static_cast<int64_t>(values.size())};
    auto r = MakeFloatRequest(std::move(values), std::move(shape), id);
    if (edit) edit(*r);
    auto token = r->cancel;
    auto inputs = r->inputs;
    ids_.push_back(id);
    scheduler_->Submit({.request = std::move(r), .inputs = std::move(inputs), .on_done = answers_.Callback(id)});
    return token;
  }
  // Submits a request "id" that the submitting thread may run itself (Work::caller_may_run); returns whether it was
  // answered by the time Submit returned.
  bool SubmitMayRunHere(const std::string& id, std::vector<float> values) {
    const Shape shape{1, static_cast<int64_t>(values.size())};
    auto r = MakeFloatRequest(std::move(values), shape, id);
    auto inputs = r->inputs;
    ids_.push_back(id);
    // Answered on this thread before Submit returned: an answer from the instance's thread may also come that soon.
    auto answered_here = std::make_shared<std::atomic<bool>>(false);
    scheduler_->Submit({.request = std::move(r),
                        .inputs = std::move(inputs),
                        .on_done =
                            [answered_here, caller = std::this_thread::get_id(),
                             callback = answers_.Callback(id)](Result<InferenceResponse> result) {
                              if (std::this_thread::get_id() == caller) answered_here->store(true);
                              callback(std::move(result));
                            },
                        .caller_may_run = true});
    return answered_here->load();
  }
  // Submits "holder" and waits until it runs, so the (gated) instance is busy.
  void Hold() {
    Submit("holder", {0});
    ASSERT_TRUE(instances_[0]->WaitForStarted(1));
  }

  void TearDown() override {
    gate_.Open();
    scheduler_.reset();
    EXPECT_EQ(answers_.NotOnce(ids_), std::vector<std::string>{}) << "every request is answered exactly once";
    for (const auto& instance : instances_) EXPECT_FALSE(instance->overlapped());
  }

  StatusCode Code(const std::string& id) { return answers_.Wait(id).status().code(); }
  std::vector<float> Output(const std::string& id) {
    auto r = answers_.Wait(id);
    if (!r.ok() || r->outputs.empty()) return {};
    auto v = r->outputs[0].as<float>();
    return {v.begin(), v.end()};
  }
  double Failures(StatusCode code) { return scheduler_->metrics().FailureCounter(code)->value(); }

  Gate gate_;
  std::vector<std::unique_ptr<FakeInstance>> instances_;
  MetricsRegistry metrics_;
  Answers answers_;
  std::vector<std::string> ids_;
  std::unique_ptr<ByteBudget> budget_;
  std::unique_ptr<Scheduler> scheduler_;  // last: stops before what it uses
};

TEST_F(SchedulerTest, PreferredBatchSizeRunsAtOnceAndOutputsSplitBack) {
  Start(FakeConfig(8, DynamicBatchingConfig{.preferred_batch_size = {4}, .max_queue_delay_us = 10'000'000}));
  const auto start = Clock::now();
  for (int i = 0; i < 4; ++i) Submit("r" + std::to_string(i), {float(i), float(10 + i)});
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(Output("r" + std::to_string(i)), (std::vector<float>{2.0f * i, 2.0f * (10 + i)}));
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));  // far sooner than the 10 s delay
  auto log = instances_[0]->log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].shapes[0], (Shape{4, 2}));
  EXPECT_EQ(log[0].values, (std::vector<float>{0, 10, 1, 11, 2, 12, 3, 13}));
  EXPECT_EQ(answers_.Wait("r2")->outputs[0].shape(), (Shape{1, 2}));
  EXPECT_EQ(scheduler_->metrics().batch_size->sum(), 4);
  EXPECT_EQ(scheduler_->metrics().execution_count->value(), 1);
  EXPECT_EQ(scheduler_->metrics().inference_count->value(), 4);
}

// Each item costs more the larger its batch (a convnet whose batch overflows the caches): the tuner takes the cap
// down from 8, and the metric follows.
TEST_F(SchedulerTest, BatchTuningLowersTheCapOfAModelThatBatchingSlows) {
  Scheduler::Options options;
  // Generous bounds: under TSan the decision after an execution can come several milliseconds after it, later than
  // a short probe interval counts as "filling the cap", and the cap then stayed at 8 for the whole test.
  options.batch_tuning = BatchTunerOptions{.min_samples = 1,
                                           .probe_executions = 4,
                                           // Well under an execution of 8 (64 ms): the decision after one always
                                           // finds a probe due.
                                           .probe_interval = milliseconds(30),
                                           // Found by CI (ASan, beside other tests): one probe of 4 slowed by the
                                           // machine kept the cap at 8, and with a minute before its figure went
                                           // stale 4 was never probed again in the test's 20 s. Stale after 2 s, a
                                           // probe spoiled that way is repeated; a probe itself takes ~0.1 s.
                                           .stale_after = std::chrono::seconds(2),
                                           .probe_timeout = std::chrono::seconds(10)};
  Start(FakeConfig(8, DynamicBatchingConfig{}), false, 1, options);
  instances_[0]->set_cost([](int64_t items) { return std::chrono::microseconds(1000 * items * items); });
  EXPECT_EQ(scheduler_->metrics().tuned_batch_cap->value(), 8);
  // Waves of 16 requests keep the queue deeper than the cap, until the cap is down or 20 s have passed.
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  for (int wave = 0; scheduler_->metrics().tuned_batch_cap->value() == 8 && Clock::now() < give_up; ++wave) {
    std::vector<std::string> ids;
    for (int i = 0; i < 16; ++i) {
      ids.push_back("w" + std::to_string(wave) + "r" + std::to_string(i));
      Submit(ids.back(), {float(i)});
    }
    for (int i = 0; i < 16; ++i) ASSERT_EQ(Output(ids[i]), std::vector<float>{2.0f * float(i)}) << ids[i];
  }
  // Lowered, through the scheduler. How far it goes is batch_tuner_test's (manual clock): here, under TSan, a run
  // sometimes stayed at 4 for the rest of the test.
  EXPECT_LT(scheduler_->metrics().tuned_batch_cap->value(), 8);
}

// Found by CI (test_triton_compat, under ASan): the batch statistics were recorded after the last answer, so a client
// that had every answer could read one execution fewer there than in the execution count.
TEST_F(SchedulerTest, AnExecutionIsInTheStatisticsBeforeItsRequestsAreAnswered) {
  Start(FakeConfig(8, DynamicBatchingConfig{}));
  std::mutex mu;
  std::vector<uint64_t> seen;  // guarded by mu: executions in the statistics when each answer came
  for (int i = 0; i < 20; ++i) {
    auto r = MakeFloatRequest({float(i)}, {1, 1}, "r" + std::to_string(i));
    auto inputs = r->inputs;
    scheduler_->Submit(
        {.request = std::move(r), .inputs = std::move(inputs), .on_done = [&](Result<InferenceResponse>) {
           uint64_t executions = 0;
           for (const BatchStatistics& b : scheduler_->ExecutionsByBatchSize()) {
             executions += b.compute_infer.count;
           }
           std::lock_guard lock(mu);
           seen.push_back(executions);
         }});
  }
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    {
      std::lock_guard lock(mu);
      if (seen.size() == 20 || Clock::now() > give_up) break;
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 20u);
  // The n-th execution's answers see at least n executions; the last answer sees them all.
  EXPECT_EQ(seen.back(), static_cast<uint64_t>(scheduler_->metrics().execution_count->value()));
  EXPECT_GE(seen.front(), 1u);
}

TEST_F(SchedulerTest, WithoutBatchTuningTheCapMetricIsZero) {
  Start(FakeConfig(8, DynamicBatchingConfig{}));
  EXPECT_EQ(scheduler_->metrics().tuned_batch_cap->value(), 0);
}

TEST_F(SchedulerTest, MaxQueueDelayIsRespected) {
  Start(FakeConfig(8, DynamicBatchingConfig{.max_queue_delay_us = 200'000}));
  const auto start = Clock::now();
  Submit("a", {1});
  Submit("b", {2});
  EXPECT_EQ(Code("a"), StatusCode::kOk);
  EXPECT_EQ(Code("b"), StatusCode::kOk);
  EXPECT_GE(Clock::now() - start, milliseconds(200));
  auto log = instances_[0]->log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].shapes[0], (Shape{2, 1}));
}

TEST_F(SchedulerTest, DifferentShapesAreNeverJoined) {
  Start(FakeConfig(8, DynamicBatchingConfig{}), /*gated=*/true);
  Hold();
  Submit("a1", {1, 1});
  Submit("a2", {2, 2});
  Submit("b1", {3, 3, 3});
  Submit("b2", {4, 4, 4});
  Submit("a3", {5, 5});
  gate_.Open();
  EXPECT_EQ(Output("a2"), (std::vector<float>{4, 4}));
  EXPECT_EQ(Output("b2"), (std::vector<float>{8, 8, 8}));
  EXPECT_EQ(Output("a3"), (std::vector<float>{10, 10}));
  auto log = instances_[0]->log();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[1].shapes[0], (Shape{2, 2}));
  EXPECT_EQ(log[2].shapes[0], (Shape{2, 3}));
  EXPECT_EQ(log[3].shapes[0], (Shape{1, 2}));
}

TEST_F(SchedulerTest, WithoutDynamicBatchingEachRequestRunsAlone) {
  Start(FakeConfig(8), /*gated=*/true);
  Hold();
  for (int i = 0; i < 3; ++i) Submit("r" + std::to_string(i), {float(i)});
  gate_.Open();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Code("r" + std::to_string(i)), StatusCode::kOk);
  auto log = instances_[0]->log();
  ASSERT_EQ(log.size(), 4u);
  for (const auto& e : log) EXPECT_EQ(e.shapes[0], (Shape{1, 1}));
}

TEST_F(SchedulerTest, HigherPriorityOvertakesLower) {
  Start(FakeConfig(1, DynamicBatchingConfig{.priority_levels = 2, .default_priority_level = 2}), /*gated=*/true);
  Hold();
  Submit("low1", {1});
  Submit("low2", {2});
  Submit("high", {3}, {}, [](InferenceRequest& r) { r.priority = 1; });
  gate_.Open();
  for (const char* id : {"low1", "low2", "high"}) EXPECT_EQ(Code(id), StatusCode::kOk);
  EXPECT_EQ(answers_.Order(), (std::vector<std::string>{"holder", "high", "low1", "low2"}));
}

TEST_F(SchedulerTest, EarliestDeadlineFirstWithinALevel) {
  DynamicBatchingConfig batching;
  batching.default_queue_policy.allow_timeout_override = true;
  Start(FakeConfig(1, batching), /*gated=*/true);
  Hold();
  const auto now = Clock::now();
  Submit("none", {1});
  Submit("late", {2}, {}, [&](InferenceRequest& r) { r.deadline = now + std::chrono::seconds(60); });
  Submit("soon", {3}, {}, [&](InferenceRequest& r) { r.deadline = now + std::chrono::seconds(30); });
  gate_.Open();
  for (const char* id : {"none", "late", "soon"}) EXPECT_EQ(Code(id), StatusCode::kOk);
  EXPECT_EQ(answers_.Order(), (std::vector<std::string>{"holder", "soon", "late", "none"}));
}

TEST_F(SchedulerTest, ExpiredRequestIsAnsweredAtOnceAndNeverExecuted) {
  // Level 2, the default, times requests out after 50 ms; level 1 has no timeout, so the holder never expires
  // however slowly this machine starts it.
  DynamicBatchingConfig batching{.priority_levels = 2, .default_priority_level = 2};
  batching.priority_queue_policy[2].default_timeout_us = 50'000;
  Start(FakeConfig(8, batching), /*gated=*/true);
  Submit("holder", {0}, {}, [](InferenceRequest& r) { r.priority = 1; });
  ASSERT_TRUE(instances_[0]->WaitForStarted(1));
  Submit("late", {1});
  // Answered by the timer while the only instance is still busy: not when a batch forms.
  auto r = answers_.Wait("late");
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("us in the queue"), std::string::npos) << r.status().message();
  EXPECT_EQ(instances_[0]->started(), 1);
  gate_.Open();
  EXPECT_EQ(Code("holder"), StatusCode::kOk);
  scheduler_.reset();
  EXPECT_EQ(instances_[0]->log().size(), 1u);
}

TEST_F(SchedulerTest, RequestDeadlineAppliesWithoutDynamicBatching) {
  Start(FakeConfig(0), /*gated=*/true);
  Hold();
  Submit("late", {1}, {1}, [](InferenceRequest& r) { r.deadline = Clock::now() + milliseconds(30); });
  Submit("expired", {1}, {1}, [](InferenceRequest& r) { r.deadline = Clock::now(); });
  EXPECT_TRUE(answers_.Has("expired"));  // already past: answered inside Submit
  EXPECT_EQ(Code("expired"), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Code("late"), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Failures(StatusCode::kDeadlineExceeded), 2);
  gate_.Open();
  EXPECT_EQ(Code("holder"), StatusCode::kOk);
}

TEST_F(SchedulerTest, DelayActionRunsExpiredRequestsAfterTheOnTimeOnes) {
  DynamicBatchingConfig batching;
  batching.default_queue_policy.allow_timeout_override = true;
  batching.default_queue_policy.timeout_action = QueuePolicyConfig::TimeoutAction::kDelay;
  Start(FakeConfig(1, batching), /*gated=*/true);
  Hold();
  Submit("expires", {1}, {}, [](InferenceRequest& r) { r.deadline = Clock::now() + milliseconds(20); });
  std::this_thread::sleep_for(milliseconds(100));
  Submit("on_time", {2});
  gate_.Open();
  EXPECT_EQ(Code("expires"), StatusCode::kOk);  // delayed, not rejected
  EXPECT_EQ(Code("on_time"), StatusCode::kOk);
  EXPECT_EQ(answers_.Order(), (std::vector<std::string>{"holder", "on_time", "expires"}));
}

TEST_F(SchedulerTest, FullQueueIsRejectedAtOnce) {
  DynamicBatchingConfig batching;
  batching.default_queue_policy.max_queue_size = 1;
  Start(FakeConfig(8, batching), /*gated=*/true);
  Hold();
  Submit("queued", {1});
  Submit("rejected", {2});
  ASSERT_TRUE(answers_.Has("rejected"));  // before Submit returned
  EXPECT_EQ(Code("rejected"), StatusCode::kResourceExhausted);
  EXPECT_FALSE(answers_.Has("queued"));
  EXPECT_EQ(Failures(StatusCode::kResourceExhausted), 1);
  EXPECT_EQ(scheduler_->metrics().queue_depth[0]->value(), 1);
}

TEST_F(SchedulerTest, ByteBudgetRejectsAtOnceAndIsGivenBack) {
  budget_ = std::make_unique<ByteBudget>(16);
  Start(FakeConfig(8), /*gated=*/true, 1, {.byte_budget = budget_.get()});
  Hold();                       // 4 bytes, given back when it started
  Submit("queued", {1, 2, 3});  // 12 bytes
  EXPECT_EQ(budget_->used(), 12u);
  Submit("too_many", {1, 2});  // 8 more do not fit
  ASSERT_TRUE(answers_.Has("too_many"));
  EXPECT_EQ(Code("too_many"), StatusCode::kResourceExhausted);
  gate_.Open();
  EXPECT_EQ(Code("queued"), StatusCode::kOk);
  EXPECT_EQ(budget_->used(), 0u);
}

TEST_F(SchedulerTest, CancelFreesTheQueueSlotAtOnce) {
  DynamicBatchingConfig batching;
  batching.default_queue_policy.max_queue_size = 1;
  Start(FakeConfig(8, batching), /*gated=*/true);
  Hold();
  auto token = Submit("cancelled", {1});
  Submit("rejected", {2});
  EXPECT_EQ(Code("rejected"), StatusCode::kResourceExhausted);
  token->Cancel();
  EXPECT_EQ(Code("cancelled"), StatusCode::kCancelled);  // while the instance is still busy
  Submit("accepted", {3});
  EXPECT_FALSE(answers_.Has("accepted"));
  gate_.Open();
  EXPECT_EQ(Output("accepted"), (std::vector<float>{6}));
  EXPECT_EQ(Failures(StatusCode::kCancelled), 1);
  scheduler_.reset();
  EXPECT_EQ(instances_[0]->log().size(), 2u);  // the holder and "accepted"
}

TEST_F(SchedulerTest, CancelledBeforeSubmitIsAnsweredAtOnce) {
  Start(FakeConfig(8));
  Submit("cancelled", {1}, {}, [](InferenceRequest& r) { r.cancel->Cancel(); });
  ASSERT_TRUE(answers_.Has("cancelled"));
  EXPECT_EQ(Code("cancelled"), StatusCode::kCancelled);
}

TEST_F(SchedulerTest, CancelWhileRunningDropsTheResult) {
  Start(FakeConfig(8), /*gated=*/true);
  auto token = Submit("running", {1});
  ASSERT_TRUE(instances_[0]->WaitForStarted(1));
  token->Cancel();
  gate_.Open();
  EXPECT_EQ(Code("running"), StatusCode::kCancelled);
  scheduler_.reset();
  EXPECT_EQ(instances_[0]->log().size(), 1u);
}

TEST_F(SchedulerTest, LatestFrameWinsPerSource) {
  ModelConfig config = FakeConfig(8);
  config.parameters["weft.latest_frame_wins"] = "true";
  Start(config, /*gated=*/true);
  auto from = [](std::string source) { return [source](InferenceRequest& r) { r.parameters["source"] = source; }; };
  Submit("holder", {0}, {}, from("cam1"));
  ASSERT_TRUE(instances_[0]->WaitForStarted(1));
  Submit("cam1_old", {1}, {}, from("cam1"));
  Submit("cam2", {2}, {}, from("cam2"));
  Submit("cam1_new", {3}, {}, from("cam1"));
  ASSERT_TRUE(answers_.Has("cam1_old"));  // answered inside the newer frame's Submit
  auto old = answers_.Wait("cam1_old");
  EXPECT_EQ(old.status().code(), StatusCode::kAborted);
  EXPECT_EQ(old.status().message(), "superseded by a newer frame");
  gate_.Open();
  EXPECT_EQ(Code("holder"), StatusCode::kOk);  // a running frame is never replaced
  EXPECT_EQ(Output("cam1_new"), (std::vector<float>{6}));
  EXPECT_EQ(Code("cam2"), StatusCode::kOk);
  EXPECT_EQ(Failures(StatusCode::kAborted), 1);
  scheduler_.reset();
  EXPECT_EQ(instances_[0]->log().size(), 3u);
}

TEST_F(SchedulerTest, ShutdownAnswersQueuedRequestsUnavailable) {
  Start(FakeConfig(8), /*gated=*/true);
  Hold();
  for (int i = 0; i < 3; ++i) Submit("q" + std::to_string(i), {float(i)});
  std::jthread stopper([this] { scheduler_.reset(); });
  // The queued ones are answered before the running execution finishes.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Code("q" + std::to_string(i)), StatusCode::kUnavailable);
  EXPECT_FALSE(answers_.Has("holder"));
  gate_.Open();
  stopper.join();
  EXPECT_EQ(Code("holder"), StatusCode::kOk);
  EXPECT_EQ(instances_[0]->log().size(), 1u);
}

TEST_F(SchedulerTest, InstancesRunInParallelButEachRunsOneAtATime) {
  ModelConfig config = FakeConfig(8);
  config.instance_groups = {{.count = 2}};
  Start(config, /*gated=*/true, /*instances=*/2);
  for (int i = 0; i < 6; ++i) Submit("r" + std::to_string(i), {float(i)});
  // Both instances hold an execution at once.
  ASSERT_TRUE(instances_[0]->WaitForStarted(1));
  ASSERT_TRUE(instances_[1]->WaitForStarted(1));
  gate_.Open();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(Code("r" + std::to_string(i)), StatusCode::kOk);
  scheduler_.reset();
  EXPECT_EQ(instances_[0]->log().size() + instances_[1]->log().size(), 6u);
}

// Two instances, the first request held at its instance's gate while the second one's finishes: with
// preserve_ordering the second answer waits for the first; without, it leaves at once.
class PreserveOrderingTest : public SchedulerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(PreserveOrderingTest, AnswersLeaveInAdmissionOrderOnlyWhenAsked) {
  const bool ordered = GetParam();
  ModelConfig config = FakeConfig(8, DynamicBatchingConfig{});
  config.dynamic_batching->preserve_ordering = ordered;
  config.instance_groups = {{.count = 2}};
  Gate other;
  instances_.push_back(std::make_unique<FakeInstance>(&gate_));
  instances_.push_back(std::make_unique<FakeInstance>(&other));
  scheduler_ =
      std::make_unique<Scheduler>(config, std::vector<ModelInstance*>{instances_[0].get(), instances_[1].get()},
                                  Scheduler::Options{.version = 1}, &metrics_);
  Submit("first", {1});
  for (int i = 0; i < 2000 && instances_[0]->started() + instances_[1]->started() == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(instances_[0]->started() + instances_[1]->started(), 1);
  const bool first_on_0 = instances_[0]->started() == 1;
  Submit("second", {2});
  ASSERT_TRUE(instances_[first_on_0 ? 1 : 0]->WaitForStarted(1));
  // The second request's instance finishes; the first's stays at its gate.
  (first_on_0 ? other : gate_).Open();
  if (ordered) {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_FALSE(answers_.Has("second")) << "answered before the request admitted ahead of it";
  } else {
    EXPECT_EQ(Code("second"), StatusCode::kOk);
  }
  (first_on_0 ? gate_ : other).Open();
  EXPECT_EQ(Output("first"), std::vector<float>{2});
  EXPECT_EQ(Output("second"), std::vector<float>{4});
  EXPECT_EQ(answers_.Order(),
            ordered ? (std::vector<std::string>{"first", "second"}) : (std::vector<std::string>{"second", "first"}));
  scheduler_.reset();  // before `other`
}

INSTANTIATE_TEST_SUITE_P(OnAndOff, PreserveOrderingTest, ::testing::Bool());

// With preserve_ordering, every way a request can end (a result, an expiry, a cancel, a shutdown) still answers
// each one exactly once, in admission order.
TEST_F(SchedulerTest, PreserveOrderingKeepsEveryOutcomeInOrder) {
  DynamicBatchingConfig batching;
  batching.preserve_ordering = true;
  batching.default_queue_policy.allow_timeout_override = true;
  ModelConfig config = FakeConfig(2, batching);
  Start(config, /*gated=*/true);
  Hold();  // "holder" runs and waits at the gate
  std::vector<std::string> ids = {"holder"};
  for (int i = 0; i < 6; ++i) {
    const std::string id = "r" + std::to_string(i);
    ids.push_back(id);
    auto token = Submit(id, {float(i)}, {}, [i](InferenceRequest& r) {
      if (i == 2) r.deadline = Clock::now() + milliseconds(20);  // expires in the queue
    });
    if (i == 4) token->Cancel();
  }
  std::this_thread::sleep_for(milliseconds(60));  // r2 expires and r4 leaves the queue, but "holder" runs still
  EXPECT_FALSE(answers_.Has("r2"));
  EXPECT_FALSE(answers_.Has("r4"));
  gate_.Open();
  for (const std::string& id : ids) EXPECT_NE(answers_.Wait(id).status().message(), "no answer for " + id);
  EXPECT_EQ(answers_.Order(), ids);
  EXPECT_EQ(Code("r2"), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Code("r4"), StatusCode::kCancelled);
}

// Many threads submit, cancel and time out requests against three instances; every request must be answered
// exactly once, no instance may run two executions at once, and the counters must add up.
TEST_F(SchedulerTest, StressEveryRequestIsAnsweredOnce) {
  DynamicBatchingConfig batching{.max_queue_delay_us = 200, .priority_levels = 2, .default_priority_level = 2};
  batching.default_queue_policy.allow_timeout_override = true;
  batching.default_queue_policy.max_queue_size = 6;
  ModelConfig config = FakeConfig(4, batching);
  config.parameters["weft.latest_frame_wins"] = "true";
  budget_ = std::make_unique<ByteBudget>(80);  // ten requests
  Start(config, /*gated=*/false, /*instances=*/3, {.byte_budget = budget_.get()});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 150;
  std::vector<std::vector<std::string>> ids(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([this, t, &ids] {
        std::mt19937 rng(t);
        std::vector<std::shared_ptr<CancelToken>> tokens;
        for (int i = 0; i < kPerThread; ++i) {
          std::string id = std::to_string(t) + "/" + std::to_string(i);
          ids[t].push_back(id);
          auto r = MakeFloatRequest({float(i), float(t)}, {1, 2}, id);
          r->priority = rng() % 3;
          if (rng() % 3 == 0) r->deadline = Clock::now() + std::chrono::microseconds(rng() % 2000);
          if (rng() % 4 == 0) r->parameters["source"] = "cam" + std::to_string(rng() % 3);
          tokens.push_back(r->cancel);
          auto inputs = r->inputs;
          scheduler_->Submit({.request = std::move(r), .inputs = std::move(inputs), .on_done = answers_.Callback(id)});
          if (rng() % 5 == 0) tokens[rng() % tokens.size()]->Cancel();
        }
      });
    }
  }
  scheduler_.reset();
  size_t total = 0;
  for (auto& v : ids) {
    EXPECT_EQ(answers_.NotOnce(v), std::vector<std::string>{});
    total += v.size();
  }
  EXPECT_EQ(budget_->used(), 0u);
  // The same series as the scheduler's (the registry hands out one metric per name and labels).
  VersionMetrics m(&metrics_, "fake", 1, 2);
  double answered = m.success->value();
  for (StatusCode c : {StatusCode::kResourceExhausted, StatusCode::kDeadlineExceeded, StatusCode::kCancelled,
                       StatusCode::kAborted, StatusCode::kUnavailable, StatusCode::kInternal}) {
    answered += m.FailureCounter(c)->value();
  }
  EXPECT_EQ(answered, static_cast<double>(total));
  for (const auto& instance : instances_) EXPECT_FALSE(instance->overlapped());
}

// Gated on completions: while the one slot is taken, requests stay queued and join the next batch.
TEST_F(SchedulerTest, RequestsWaitInTheQueueUntilTheExecutorHasASlot) {
  instances_.push_back(std::make_unique<FakeInstance>());
  ManualExecutor executor(instances_[0].get());
  scheduler_ = std::make_unique<Scheduler>(FakeConfig(8, DynamicBatchingConfig{}),
                                           std::vector<ModelInstance*>{instances_[0].get()},
                                           Scheduler::Options{.version = 1, .executors = {&executor}}, &metrics_);
  Submit("first", {1});
  std::this_thread::sleep_for(milliseconds(20));  // dispatched: the slot is taken
  for (int i = 0; i < 4; ++i) Submit("r" + std::to_string(i), {float(i)});
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(answers_.Has("first"));
  ASSERT_TRUE(executor.CompleteOne());  // answers "first" on this thread, frees the slot
  EXPECT_EQ(Output("first"), (std::vector<float>{2}));
  ASSERT_TRUE(executor.CompleteOne());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Output("r" + std::to_string(i)), (std::vector<float>{2.0f * i}));
  auto log = instances_[0]->log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].shapes[0], (Shape{4, 1}));
  // Shutdown with a batch in flight waits for its answer.
  Submit("last", {5});
  ASSERT_TRUE(executor.WaitForSubmitted());
  std::jthread completer([&] { executor.CompleteOne(); });
  scheduler_.reset();
  EXPECT_EQ(Code("last"), StatusCode::kOk);
}

// A batch runs in the background only when no client waits for any of its requests.
TEST_F(SchedulerTest, ABatchRunsInTheBackgroundOnlyWhenEveryRequestInItIsBackground) {
  instances_.push_back(std::make_unique<FakeInstance>());
  ManualExecutor executor(instances_[0].get());
  const DynamicBatchingConfig batching{.preferred_batch_size = {2}, .max_queue_delay_us = 10'000'000};
  scheduler_ = std::make_unique<Scheduler>(FakeConfig(8, batching), std::vector<ModelInstance*>{instances_[0].get()},
                                           Scheduler::Options{.version = 1, .executors = {&executor}}, &metrics_);
  auto background = [](InferenceRequest& r) { r.background = true; };
  Submit("copy1", {1}, {}, background);
  Submit("copy2", {2}, {}, background);
  ASSERT_TRUE(executor.CompleteOne());
  EXPECT_TRUE(executor.last_background());
  Submit("copy3", {3}, {}, background);
  Submit("client", {4});
  ASSERT_TRUE(executor.CompleteOne());
  EXPECT_FALSE(executor.last_background());
  for (const char* id : {"copy1", "copy2", "copy3", "client"}) EXPECT_EQ(Code(id), StatusCode::kOk) << id;
}

// A batch is lone (its submitter may run the completion itself) only when it holds one request, nothing waits
// behind it, and recent batches held about one request each: under load the completion thread answers instead.
TEST_F(SchedulerTest, OnlyALoneRequestUnderLightLoadIsMarkedLone) {
  instances_.push_back(std::make_unique<FakeInstance>());
  ManualExecutor executor(instances_[0].get());
  scheduler_ = std::make_unique<Scheduler>(FakeConfig(8, DynamicBatchingConfig{}),
                                           std::vector<ModelInstance*>{instances_[0].get()},
                                           Scheduler::Options{.version = 1, .executors = {&executor}}, &metrics_);
  Submit("alone", {1});
  ASSERT_TRUE(executor.WaitForSubmitted());
  EXPECT_TRUE(executor.last_hints().lone);
  ASSERT_TRUE(executor.CompleteOne());
  // Batches of four behind a busy slot: the mean batch grows past 1.5.
  for (int round = 0; round < 10; ++round) {
    const std::string hold = "hold" + std::to_string(round);
    Submit(hold, {1});
    ASSERT_TRUE(executor.WaitForSubmitted());
    for (int i = 0; i < 4; ++i) Submit(hold + "_" + std::to_string(i), {2});
    ASSERT_TRUE(executor.CompleteOne());
    ASSERT_TRUE(executor.WaitForSubmitted());
    EXPECT_FALSE(executor.last_hints().lone) << round;
    ASSERT_TRUE(executor.CompleteOne());
  }
  Submit("after_load", {3});
  ASSERT_TRUE(executor.WaitForSubmitted());
  EXPECT_FALSE(executor.last_hints().lone);
  ASSERT_TRUE(executor.CompleteOne());
  EXPECT_EQ(Code("alone"), StatusCode::kOk);
  EXPECT_EQ(Code("after_load"), StatusCode::kOk);
  EXPECT_EQ(instances_[0]->log().size(), 22u);  // 1 + 10 x (1 + 1) + 1 executions
}

// A lone request under light load runs on the thread that submits it, once executions have been measured as short:
// no instance thread is woken, and the answer is there when Submit returns.
TEST_F(SchedulerTest, ALoneShortRequestRunsOnTheSubmittingThread) {
  Start(FakeConfig(8, DynamicBatchingConfig{}), /*gated=*/false, /*instances=*/1, {.callers_run_lone_requests = true});
  // The first runs on the instance's thread: nothing has been measured yet.
  EXPECT_FALSE(SubmitMayRunHere("first", {1}));
  EXPECT_EQ(Output("first"), (std::vector<float>{2}));
  // The instance's thread goes back to waiting a moment after it answers; until then requests go to it.
  int here = -1;
  for (int i = 0; i < 200 && here < 0; ++i) {
    if (SubmitMayRunHere("r" + std::to_string(i), {float(i)})) here = i;
    EXPECT_EQ(Output("r" + std::to_string(i)), (std::vector<float>{2.0f * i}));
    if (here < 0) std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_GE(here, 0) << "no lone request ran on the submitting thread";
  auto log = instances_[0]->log();
  EXPECT_NE(log.front().thread, std::this_thread::get_id());
  EXPECT_EQ(log.back().thread, std::this_thread::get_id());
  EXPECT_EQ(scheduler_->metrics().execution_count->value(), static_cast<double>(log.size()));
  EXPECT_EQ(scheduler_->metrics().caller_runs->value(), 1);
  // The instance's thread takes work again afterwards: a request that may not run here is answered by it.
  Submit("not_here", {7});
  EXPECT_EQ(Output("not_here"), (std::vector<float>{14}));
  EXPECT_NE(instances_[0]->log().back().thread, std::this_thread::get_id());
}

// Without the scheduler's leave or the request's, with a busy instance, or with long executions, the submitting
// thread never runs a batch.
TEST_F(SchedulerTest, TheSubmittingThreadRunsNothingWhenItMayNotOrShouldNot) {
  // Submits lone requests, one after another with pauses, and says whether any ran on this thread; then stops.
  auto any_ran_here = [this](const std::string& prefix) {
    for (int i = 0; i < 20; ++i) {
      SubmitMayRunHere(prefix + std::to_string(i), {1});
      EXPECT_EQ(Code(prefix + std::to_string(i)), StatusCode::kOk);
      std::this_thread::sleep_for(milliseconds(2));
    }
    bool here = false;
    for (const auto& e : instances_[0]->log()) here = here || e.thread == std::this_thread::get_id();
    scheduler_.reset();
    instances_.clear();
    return here;
  };
  // The scheduler does not allow it (a CUDA device, an execution timeout).
  Start(FakeConfig(8, DynamicBatchingConfig{}));
  EXPECT_FALSE(any_ran_here("off"));
  // Executions of 1 ms: longer than an I/O thread should be held.
  Start(FakeConfig(8, DynamicBatchingConfig{}), /*gated=*/false, /*instances=*/1, {.callers_run_lone_requests = true});
  instances_[0]->set_cost([](int64_t) { return std::chrono::microseconds(1000); });
  EXPECT_FALSE(any_ran_here("slow"));
  {
    // A busy instance: the request waits in the queue for the instance's thread.
    Start(FakeConfig(8, DynamicBatchingConfig{}), /*gated=*/true, /*instances=*/1, {.callers_run_lone_requests = true});
    gate_.Open();
    SubmitMayRunHere("measured", {1});
    ASSERT_EQ(Code("measured"), StatusCode::kOk);
    gate_.Close();
    Hold();
    EXPECT_FALSE(SubmitMayRunHere("behind", {2}));
    gate_.Open();
    EXPECT_EQ(Output("behind"), (std::vector<float>{4}));
    for (const auto& e : instances_[0]->log()) EXPECT_NE(e.thread, std::this_thread::get_id());
  }
}

// Threads that may run their requests themselves race with the instances' threads over two instances: every
// request is answered once, no instance runs two executions at once (checked in TearDown), and outputs are right.
TEST_F(SchedulerTest, SubmittingThreadsAndInstanceThreadsNeverShareAnInstance) {
  Start(FakeConfig(8, DynamicBatchingConfig{}), /*gated=*/false, /*instances=*/2, {.callers_run_lone_requests = true});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([this, t] {
        std::mt19937 rng(t);
        for (int i = 0; i < kPerThread; ++i) {
          const std::string id = std::to_string(t) + "/" + std::to_string(i);
          auto r = MakeFloatRequest({float(i)}, {1, 1}, id);
          auto inputs = r->inputs;
          scheduler_->Submit({.request = std::move(r),
                              .inputs = std::move(inputs),
                              .on_done = answers_.Callback(id),
                              .caller_may_run = rng() % 4 != 0});
          if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
        }
      });
    }
  }
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const std::string id = std::to_string(t) + "/" + std::to_string(i);
      ids_.push_back(id);
      EXPECT_EQ(Output(id), (std::vector<float>{2.0f * i})) << id;
    }
  }
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Hardening issue, item 4: `instance_group { count: 100000 }` aborted the server at start with an uncaught
// std::system_error from thread creation. Scheduler::Create turns that into an error for the one model. In a child
// process whose address space is capped just above what it uses, so that thread stacks cannot be mapped.
// The child's side: exits 0 when Create reports the failure as it should.
[[noreturn]] void CreateWithCappedAddressSpace() {
  std::vector<std::unique_ptr<testing::FakeInstance>> instances;
  std::vector<ModelInstance*> raw;
  for (int i = 0; i < 64; ++i) {
    instances.push_back(std::make_unique<testing::FakeInstance>());
    raw.push_back(instances.back().get());
  }
  MetricsRegistry metrics;
  long pages = 0;
  if (FILE* statm = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(statm, "%ld", &pages) != 1) pages = 0;
    std::fclose(statm);
  }
  // Room for a few 8 MiB thread stacks, not for 65.
  const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (32 << 20);
  struct rlimit cap = {limit, limit};
  if (pages == 0 || setrlimit(RLIMIT_AS, &cap) != 0) std::_Exit(3);
  Scheduler::Options options;
  options.version = 1;
  Result<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(FakeConfig(), std::move(raw), options, &metrics);
  if (scheduler.ok()) std::_Exit(1);
  const bool named =
      scheduler.status().code() == StatusCode::kUnavailable &&
      scheduler.status().message().find("cannot start the 65 scheduler threads of model 'fake'") != std::string::npos;
  std::_Exit(named ? 0 : 2);
}

TEST(SchedulerCreateDeathTest, ThreadCreationFailureIsAnError) {
  if (kSanitized) GTEST_SKIP() << "sanitizers reserve address space that an address-space limit would break";
  EXPECT_EXIT(CreateWithCappedAddressSpace(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace weft
