// Out-of-memory recovery: a batch of several requests that runs out of memory is split in two halves, each retried
// once on the same instance, and the instance's batches are capped for a while.
#include <gtest/gtest.h>

#include <atomic>
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

// A FakeInstance whose executions of more than `limit` batch items run (they wait at the gate and are logged) but
// fail with OutOfMemory, as a backend's do once its allocator gives up.
class OomInstance : public ModelInstance {
 public:
  OomInstance(Gate* gate, int64_t limit) : fake_(gate), limit_(limit) {}

  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    Result<std::vector<Tensor>> outputs = fake_.Execute(inputs);
    const int64_t items = inputs[0].shape()[0];
    if (items > limit_) return OutOfMemory("test: out of memory at a batch of " + std::to_string(items) + " items");
    return outputs;
  }

  // The batch items of every execution so far, in order.
  std::vector<int64_t> Batches() const {
    std::vector<int64_t> items;
    for (const FakeInstance::Execution& e : fake_.log()) items.push_back(e.shapes[0][0]);
    return items;
  }
  FakeInstance& fake() { return fake_; }

 private:
  FakeInstance fake_;
  const int64_t limit_;
};

// One FP32 input of variable length, batched up to 8 items without delay.
ModelConfig OomConfig(DynamicBatchingConfig batching = {}) {
  ModelConfig c;
  c.name = "fake";
  c.max_batch_size = 8;
  c.inputs = {{"INPUT0", DataType::kFp32, {-1}, std::nullopt}};
  c.outputs = {{"OUTPUT0", DataType::kFp32, {-1}, std::nullopt}};
  c.dynamic_batching = std::move(batching);
  return c;
}

class SchedulerOomTest : public ::testing::Test {
 protected:
  // One instance that runs out of memory above `limit` items, on its own thread; its gate starts open.
  void Start(int64_t limit, Scheduler::Options options = {}, ModelConfig config = OomConfig()) {
    gate_.Open();
    instance_ = std::make_unique<OomInstance>(&gate_, limit);
    options.version = 1;
    scheduler_ = std::make_unique<Scheduler>(std::move(config), std::vector<ModelInstance*>{instance_.get()},
                                             std::move(options), &metrics_);
  }

  // Submits a request "id" of `values`, shape {n, 1} (n items) unless given; returns its cancel token.
  std::shared_ptr<CancelToken> Submit(const std::string& id, std::vector<float> values, Shape shape = {},
                                      std::function<void(InferenceRequest&)> edit = nullptr) {
    if (shape.empty()) shape = {static_cast<int64_t>(values.size()), 1};
    auto r = MakeFloatRequest(std::move(values), std::move(shape), id);
    if (edit) edit(*r);
    auto token = r->cancel;
    auto inputs = r->inputs;
    ids_.push_back(id);
    scheduler_->Submit({.request = std::move(r), .inputs = std::move(inputs), .on_done = answers_.Callback(id)});
    return token;
  }
  // Closes the gate and runs `id` (one item) into it, so that what is submitted next queues up as one batch.
  void Hold(const std::string& id) {
    gate_.Close();
    const int started = instance_->fake().started();
    Submit(id, {0});
    ASSERT_TRUE(instance_->fake().WaitForStarted(started + 1));
  }
  // Submits prefix0 .. prefix<n-1>, one item each, valued by their number.
  std::vector<std::string> SubmitMany(const std::string& prefix, int n) {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      ids.push_back(prefix + std::to_string(i));
      Submit(ids.back(), {float(i)});
    }
    return ids;
  }

  void TearDown() override {
    gate_.Open();
    scheduler_.reset();
    EXPECT_EQ(answers_.NotOnce(ids_), std::vector<std::string>{}) << "every request is answered exactly once";
    if (instance_) {
      EXPECT_FALSE(instance_->fake().overlapped());
    }
  }

  StatusCode Code(const std::string& id) { return answers_.Wait(id).status().code(); }
  std::vector<float> Output(const std::string& id) {
    auto r = answers_.Wait(id);
    if (!r.ok() || r->outputs.empty()) return {};
    auto v = r->outputs[0].as<float>();
    return {v.begin(), v.end()};
  }
  VersionMetrics& Metrics() { return scheduler_->metrics(); }
  double Retries() { return Metrics().oom_retries->value(); }
  double Cap() { return Metrics().oom_batch_cap->value(); }
  double OutOfMemoryFailures() { return Metrics().FailureCounter(StatusCode::kOutOfMemory)->value(); }

  Gate gate_;
  std::unique_ptr<OomInstance> instance_;
  MetricsRegistry metrics_;
  Answers answers_;
  std::vector<std::string> ids_;
  std::unique_ptr<Scheduler> scheduler_;  // last: stops before what it uses
};

TEST_F(SchedulerOomTest, BatchIsSplitInHalvesRetriedAndLaterBatchesAreCapped) {
  Start(/*limit=*/4);
  Hold("holder");
  std::vector<std::string> ids = SubmitMany("r", 8);
  gate_.Open();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(Output(ids[i]), (std::vector<float>{2.0f * i}));
  EXPECT_EQ(instance_->Batches(), (std::vector<int64_t>{1, 8, 4, 4}));
  // Each half got its own requests' inputs back, in order.
  auto log = instance_->fake().log();
  EXPECT_EQ(log[2].values, (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(log[3].values, (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(Retries(), 1);
  EXPECT_EQ(Cap(), 4);
  EXPECT_EQ(OutOfMemoryFailures(), 0);

  // While the cap holds, eight queued requests run as two batches of four, with no failure.
  Hold("holder2");
  ids = SubmitMany("s", 8);
  gate_.Open();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(Output(ids[i]), (std::vector<float>{2.0f * i}));
  EXPECT_EQ(instance_->Batches(), (std::vector<int64_t>{1, 8, 4, 4, 1, 4, 4}));
  EXPECT_EQ(Retries(), 1);
}

TEST_F(SchedulerOomTest, HalvesThatRunOutOfMemoryAgainAnswerWithTheError) {
  std::atomic<int> released{0};
  Start(/*limit=*/1, {.on_out_of_memory = [&released] { released++; }});
  Hold("holder");
  std::vector<std::string> ids = SubmitMany("r", 8);
  gate_.Open();
  for (const std::string& id : ids) EXPECT_EQ(Code(id), StatusCode::kOutOfMemory) << id;
  EXPECT_EQ(Code("holder"), StatusCode::kOk);
  // Retried once: the halves are not split again.
  EXPECT_EQ(instance_->Batches(), (std::vector<int64_t>{1, 8, 4, 4}));
  EXPECT_EQ(Retries(), 1);
  EXPECT_EQ(OutOfMemoryFailures(), 8);
  EXPECT_EQ(Cap(), 2);            // lowered again by the halves of four that failed
  EXPECT_EQ(released.load(), 3);  // the device's cached memory, after each of the three out-of-memories
}

TEST_F(SchedulerOomTest, ARequestAloneIsNotRetried) {
  Start(/*limit=*/1);
  Submit("pair", {1, 2});  // two items, one request
  EXPECT_EQ(Code("pair"), StatusCode::kOutOfMemory);
  EXPECT_EQ(instance_->Batches(), (std::vector<int64_t>{2}));
  EXPECT_EQ(Retries(), 0);
  EXPECT_EQ(Cap(), 1);
  // The cap never stops a request larger than it: it runs alone, as one larger than max_batch_size would.
  Submit("single", {3});
  EXPECT_EQ(Output("single"), (std::vector<float>{6}));
}

TEST_F(SchedulerOomTest, OneItemThatRunsOutOfMemoryLeavesNoCap) {
  Start(/*limit=*/0);
  Submit("one", {1});
  EXPECT_EQ(Code("one"), StatusCode::kOutOfMemory);
  EXPECT_EQ(instance_->Batches(), (std::vector<int64_t>{1}));
  EXPECT_EQ(Retries(), 0);
  EXPECT_EQ(Cap(), 0);
}

TEST_F(SchedulerOomTest, HalvesAreCutAtRequestBoundaries) {
  Start(/*limit=*/3);
  Hold("holder");
  Submit("a", {1, 2});  // 2 items
  Submit("b", {3});     // 1 item
  Submit("c", {4, 5});  // 2 items
  gate_.Open();
  EXPECT_EQ(Output("a"), (std::vector<float>{2, 4}));
  EXPECT_EQ(Output("b"), (std::vector<float>{6}));
  EXPECT_EQ(Output("c"), (std::vector<float>{8, 10}));
  // Five items fail; the first half holds the first ceil(3 / 2) = 2 requests.
  EXPECT_EQ(instance_->Batches(), (std::vector<int64_t>{1, 5, 3, 2}));
  EXPECT_EQ(answers_.Wait("a")->outputs[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(Cap(), 2);
}

TEST_F(SchedulerOomTest, CancelledAndExpiredRequestsAreAnsweredInsteadOfRetried) {
  DynamicBatchingConfig batching{.preferred_batch_size = {4}, .max_queue_delay_us = 10'000'000};
  batching.default_queue_policy.allow_timeout_override = true;
  Start(/*limit=*/2, {}, OomConfig(batching));
  gate_.Close();
  Submit("r0", {0});
  auto cancel = Submit("r1", {1});
  Submit("r2", {2});
  Submit("r3", {3}, {}, [](InferenceRequest& r) { r.deadline = Clock::now() + milliseconds(100); });
  ASSERT_TRUE(instance_->fake().WaitForStarted(1));  // the batch of four waits at the gate
  cancel->Cancel();
  std::this_thread::sleep_for(milliseconds(200));  // r3's deadline passes while its batch runs
  gate_.Open();
  EXPECT_EQ(Output("r0"), (std::vector<float>{0}));
  EXPECT_EQ(Code("r1"), StatusCode::kCancelled);
  EXPECT_EQ(Output("r2"), (std::vector<float>{4}));
  EXPECT_EQ(Code("r3"), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(instance_->Batches(), (std::vector<int64_t>{4, 1, 1}));
  EXPECT_EQ(Retries(), 1);
}

TEST_F(SchedulerOomTest, CapIsLiftedAfterItsTime) {
  Start(/*limit=*/4, {.oom_batch_cap_for = milliseconds(500)});
  Hold("holder");
  std::vector<std::string> ids = SubmitMany("r", 8);
  gate_.Open();
  for (const std::string& id : ids) EXPECT_EQ(Code(id), StatusCode::kOk);
  EXPECT_EQ(Cap(), 4);
  // The idle instance wakes when its cap ends and reports it gone.
  for (int i = 0; i < 1000 && Cap() != 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(Cap(), 0);
  // Eight requests form a batch of eight again (which runs out of memory again).
  Hold("holder2");
  ids = SubmitMany("s", 8);
  gate_.Open();
  for (const std::string& id : ids) EXPECT_EQ(Code(id), StatusCode::kOk);
  EXPECT_EQ(instance_->Batches(), (std::vector<int64_t>{1, 8, 4, 4, 1, 8, 4, 4}));
  EXPECT_EQ(Retries(), 2);
}

// With an executor of one slot (a device lane), the completion that ran out of memory still holds the slot: the
// halves wait for it on the instance's thread and take it in turn.
TEST_F(SchedulerOomTest, WithAnExecutorTheHalvesTakeTheSlotInTurn) {
  instance_ = std::make_unique<OomInstance>(nullptr, /*limit=*/4);
  ManualExecutor executor(instance_.get());
  scheduler_ = std::make_unique<Scheduler>(OomConfig(), std::vector<ModelInstance*>{instance_.get()},
                                           Scheduler::Options{.version = 1, .executors = {&executor}}, &metrics_);
  Submit("first", {1});
  ASSERT_TRUE(executor.WaitForSubmitted());  // "first" holds the slot; the next eight queue up
  std::vector<std::string> ids = SubmitMany("r", 8);
  ASSERT_TRUE(executor.CompleteOne());  // "first"
  ASSERT_TRUE(executor.CompleteOne());  // the eight, out of memory
  ASSERT_TRUE(executor.CompleteOne());  // the first half
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Output(ids[i]), (std::vector<float>{2.0f * i}));
  ASSERT_TRUE(executor.CompleteOne());  // the second half
  for (int i = 4; i < 8; ++i) EXPECT_EQ(Output(ids[i]), (std::vector<float>{2.0f * i}));
  EXPECT_EQ(instance_->Batches(), (std::vector<int64_t>{1, 8, 4, 4}));
  EXPECT_EQ(Retries(), 1);
  scheduler_.reset();  // before `executor`
}

// A half still waiting for its retry at shutdown is answered UNAVAILABLE, like a queued request; the half in flight
// answers from its completion.
TEST_F(SchedulerOomTest, ShutdownAnswersAWaitingHalfUnavailable) {
  instance_ = std::make_unique<OomInstance>(nullptr, /*limit=*/4);
  ManualExecutor executor(instance_.get());
  scheduler_ = std::make_unique<Scheduler>(OomConfig(), std::vector<ModelInstance*>{instance_.get()},
                                           Scheduler::Options{.version = 1, .executors = {&executor}}, &metrics_);
  Submit("first", {1});
  ASSERT_TRUE(executor.WaitForSubmitted());
  std::vector<std::string> ids = SubmitMany("r", 8);
  ASSERT_TRUE(executor.CompleteOne());       // "first"
  ASSERT_TRUE(executor.CompleteOne());       // the eight, out of memory
  ASSERT_TRUE(executor.WaitForSubmitted());  // the first half holds the slot; the second waits for it
  std::jthread stopper([this] { scheduler_.reset(); });
  for (int i = 4; i < 8; ++i) EXPECT_EQ(Code(ids[i]), StatusCode::kUnavailable) << ids[i];
  EXPECT_FALSE(answers_.Has(ids[0]));
  ASSERT_TRUE(executor.CompleteOne());  // the first half; the destructor waits for it
  stopper.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Output(ids[i]), (std::vector<float>{2.0f * i}));
  EXPECT_EQ(instance_->Batches(), (std::vector<int64_t>{1, 8, 4}));
}

}  // namespace
}  // namespace weft
