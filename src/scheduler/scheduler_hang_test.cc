// Hung executions: with Options::execution_timeout an execution that overruns is answered INTERNAL at the limit,
// its instance is quarantined and a fresh one from replace_instance serves in its place; the hung execution's
// return answers nothing.
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "scheduler/scheduler.h"
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

constexpr milliseconds kTimeout{50};

ModelConfig HangConfig() {
  ModelConfig c;
  c.name = "fake";
  c.max_batch_size = 8;
  c.inputs = {{"INPUT0", DataType::kFp32, {-1}, std::nullopt}};
  c.outputs = {{"OUTPUT0", DataType::kFp32, {-1}, std::nullopt}};
  c.dynamic_batching = DynamicBatchingConfig{};
  return c;
}

class SchedulerHangTest : public ::testing::Test {
 protected:
  // Scheduler options with the timeout and a hook that makes a fresh FakeInstance (no gate: it never hangs), run on
  // its own thread, or fails with `fail` when set.
  Scheduler::Options Options(Status fail = Status::Ok(), milliseconds timeout = kTimeout) {
    Scheduler::Options options{.version = 1, .execution_timeout = timeout};
    options.replace_instance = [this, fail](size_t index) -> Result<InstanceReplacement> {
      std::lock_guard lock(mu_);
      replaced_numbers_.push_back(index);
      if (!fail.ok()) return fail;
      auto instance = std::make_unique<FakeInstance>();
      fresh_.push_back(instance.get());
      return InstanceReplacement{.instance = std::move(instance)};
    };
    return options;
  }
  void Start(std::vector<ModelInstance*> instances, Scheduler::Options options) {
    scheduler_ = std::make_unique<Scheduler>(HangConfig(), std::move(instances), std::move(options), &metrics_);
  }

  void Submit(const std::string& id, float value) {
    auto r = MakeFloatRequest({value}, {1, 1}, id);
    auto inputs = r->inputs;
    ids_.push_back(id);
    scheduler_->Submit({.request = std::move(r), .inputs = std::move(inputs), .on_done = answers_.Callback(id)});
  }

  void TearDown() override {
    gate_.Open();
    scheduler_.reset();
    EXPECT_EQ(answers_.NotOnce(ids_), std::vector<std::string>{}) << "every request is answered exactly once";
    EXPECT_FALSE(hung_.overlapped());
  }

  StatusCode Code(const std::string& id) { return answers_.Wait(id).status().code(); }
  std::vector<float> Output(const std::string& id) {
    auto r = answers_.Wait(id);
    if (!r.ok() || r->outputs.empty()) return {};
    auto v = r->outputs[0].as<float>();
    return {v.begin(), v.end()};
  }
  // Waits up to 10 s for `counter` to reach `value`.
  static bool WaitFor(Counter* counter, double value) {
    for (int i = 0; i < 1000 && counter->value() < value; ++i) std::this_thread::sleep_for(milliseconds(10));
    return counter->value() == value;
  }
  std::vector<FakeInstance*> Fresh() {
    std::lock_guard lock(mu_);
    return fresh_;
  }

  Gate gate_;  // closed: the first instance hangs
  FakeInstance hung_{&gate_};
  MetricsRegistry metrics_;
  Answers answers_;
  std::vector<std::string> ids_;
  std::mutex mu_;
  std::vector<FakeInstance*> fresh_;      // guarded by mu_; owned by the scheduler
  std::vector<size_t> replaced_numbers_;  // guarded by mu_
  std::unique_ptr<Scheduler> scheduler_;  // last: stops before what it uses
};

TEST_F(SchedulerHangTest, AHungExecutionIsAnsweredAtTheLimitAndReplacedWhileOtherRequestsKeepFlowing) {
  Start({&hung_}, Options());
  const Clock::time_point start = Clock::now();
  Submit("hung", 1);
  ASSERT_TRUE(hung_.WaitForStarted(1));
  Submit("queued", 2);  // waits behind the hung execution; the replacement runs it

  Result<InferenceResponse> answer = answers_.Wait("hung");
  const Clock::duration took = Clock::now() - start;
  EXPECT_EQ(answer.status().code(), StatusCode::kInternal);
  EXPECT_NE(answer.status().message().find("did not finish within weft.execution_timeout_ms (50 ms)"),
            std::string::npos)
      << answer.status().message();
  EXPECT_GE(took, kTimeout);
  EXPECT_LT(took, std::chrono::seconds(5));

  // The first instance still hangs; the replacement answers the rest.
  EXPECT_EQ(Output("queued"), (std::vector<float>{4}));
  for (int i = 0; i < 4; ++i) Submit("r" + std::to_string(i), float(i));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Output("r" + std::to_string(i)), (std::vector<float>{2.0f * i}));
  EXPECT_TRUE(WaitFor(scheduler_->metrics().instances_replaced, 1));
  EXPECT_EQ(scheduler_->metrics().execution_timeouts->value(), 1);
  ASSERT_EQ(Fresh().size(), 1u);
  EXPECT_FALSE(Fresh()[0]->log().empty());
  {
    std::lock_guard lock(mu_);
    EXPECT_EQ(replaced_numbers_, std::vector<size_t>{0});
  }

  // The hung execution returns: it answers nothing (TearDown counts each request's answers), and its instance
  // takes no more work.
  gate_.Open();
  for (int i = 0; i < 1000 && hung_.log().empty(); ++i) std::this_thread::sleep_for(milliseconds(10));
  ASSERT_EQ(hung_.log().size(), 1u);
  Submit("after", 5);
  EXPECT_EQ(Output("after"), (std::vector<float>{10}));
  EXPECT_EQ(hung_.started(), 1);
}

// A device lane's slot is held by the batch that hangs: the instance's thread must stop taking work although it is
// free, and the lane's late completion answers nothing.
TEST_F(SchedulerHangTest, WithAnExecutorTheQuarantinedInstanceTakesNoMoreWork) {
  FakeInstance stuck;  // runs when the test completes its batch, which is late
  ManualExecutor executor(&stuck);
  Start({&stuck}, [&] {
    Scheduler::Options options = Options();
    options.executors = {&executor};
    return options;
  }());
  Submit("hung", 1);
  ASSERT_TRUE(executor.WaitForSubmitted());
  Submit("queued", 2);
  EXPECT_EQ(Code("hung"), StatusCode::kInternal);
  EXPECT_EQ(Output("queued"), (std::vector<float>{4}));
  for (int i = 0; i < 3; ++i) Submit("r" + std::to_string(i), float(i));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Output("r" + std::to_string(i)), (std::vector<float>{2.0f * i}));
  ASSERT_TRUE(executor.CompleteOne());  // the late completion: reaped, answers nothing
  Submit("after", 5);
  EXPECT_EQ(Output("after"), (std::vector<float>{10}));
  EXPECT_EQ(stuck.started(), 1);
  EXPECT_EQ(scheduler_->metrics().execution_timeouts->value(), 1);
  scheduler_.reset();  // before `executor` and `stuck`
}

// When the replacement cannot be created, the other instances serve on.
TEST_F(SchedulerHangTest, AFailedReplacementLeavesTheOtherInstancesServing) {
  Gate healthy_gate;  // closed: the healthy instance holds its first request, so the next one must go to `hung_`
  FakeInstance healthy(&healthy_gate);
  // Stops the scheduler before `healthy` goes, also when an assertion returns early.
  struct Deferred {
    std::function<void()> run;
    ~Deferred() { run(); }
  } stop_first{[this, &healthy_gate] {
    healthy_gate.Open();
    gate_.Open();
    scheduler_.reset();
  }};
  // A limit long enough that the healthy instance's held request never reaches it.
  Start({&hung_, &healthy}, Options(Unavailable("test: no device memory for another instance"), milliseconds(500)));
  // Which idle instance takes a request is up to the threads' wake-ups; waiting for the first to start before the
  // second is sent keeps the two out of one batch, and the held healthy instance leaves only `hung_` for the second.
  Submit("first", 1);
  while (hung_.started() + healthy.started() == 0) std::this_thread::sleep_for(milliseconds(1));
  std::string hung_id = "first";
  if (hung_.started() == 0) {
    Submit("second", 2);
    ASSERT_TRUE(hung_.WaitForStarted(1));
    hung_id = "second";
  }
  healthy_gate.Open();
  EXPECT_EQ(Code(hung_id), StatusCode::kInternal);
  EXPECT_EQ(scheduler_->metrics().execution_timeouts->value(), 1);
  for (int i = 0; i < 4; ++i) Submit("r" + std::to_string(i), float(i));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Output("r" + std::to_string(i)), (std::vector<float>{2.0f * i}));
  EXPECT_EQ(hung_.started(), 1);
  // The replacement is tried on a thread of its own, which may not have run yet on a busy machine.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard lock(mu_);
      if (!replaced_numbers_.empty()) break;
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(scheduler_->metrics().instances_replaced->value(), 0);
  {
    std::lock_guard lock(mu_);
    EXPECT_EQ(replaced_numbers_, std::vector<size_t>{0});
  }
}

// With no instance left and none being created, what is queued and what comes later is answered UNAVAILABLE.
TEST_F(SchedulerHangTest, WithNoInstanceLeftRequestsAreAnsweredUnavailable) {
  Start({&hung_}, Options(Unavailable("test: no device memory for another instance")));
  Submit("hung", 1);
  ASSERT_TRUE(hung_.WaitForStarted(1));
  Submit("queued", 2);
  EXPECT_EQ(Code("hung"), StatusCode::kInternal);
  Result<InferenceResponse> queued = answers_.Wait("queued");
  EXPECT_EQ(queued.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(queued.status().message().find("no instance is left"), std::string::npos) << queued.status().message();
  Submit("later", 3);
  EXPECT_EQ(Code("later"), StatusCode::kUnavailable);
  EXPECT_EQ(hung_.started(), 1);
}

// Without a replace_instance hook the instance is only taken out of service.
TEST_F(SchedulerHangTest, WithoutAHookTheInstanceIsOnlyQuarantined) {
  Start({&hung_}, {.version = 1, .execution_timeout = kTimeout});
  Submit("hung", 1);
  ASSERT_TRUE(hung_.WaitForStarted(1));
  EXPECT_EQ(Code("hung"), StatusCode::kInternal);
  Submit("later", 3);
  EXPECT_EQ(Code("later"), StatusCode::kUnavailable);
}

// The destructor answers what is queued and waits for the hung execution to return.
TEST_F(SchedulerHangTest, DestructorWaitsForTheHungExecution) {
  Start({&hung_}, Options());
  Submit("hung", 1);
  ASSERT_TRUE(hung_.WaitForStarted(1));
  EXPECT_EQ(Code("hung"), StatusCode::kInternal);
  std::jthread stopper([this] { scheduler_.reset(); });
  std::this_thread::sleep_for(milliseconds(50));
  gate_.Open();
  stopper.join();
  EXPECT_EQ(hung_.log().size(), 1u);
}

// An execution that finishes within the limit is answered by its outputs, and nothing is replaced.
TEST_F(SchedulerHangTest, AnExecutionWithinTheLimitIsAnsweredNormally) {
  gate_.Open();
  Start({&hung_}, Options());
  for (int i = 0; i < 20; ++i) Submit("r" + std::to_string(i), float(i));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(Output("r" + std::to_string(i)), (std::vector<float>{2.0f * i}));
  std::this_thread::sleep_for(kTimeout * 2);
  EXPECT_EQ(scheduler_->metrics().execution_timeouts->value(), 0);
  EXPECT_TRUE(Fresh().empty());
}

}  // namespace
}  // namespace weft
