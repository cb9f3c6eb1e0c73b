#include "scheduler/request_queue.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

using std::chrono::microseconds;
using TimeoutAction = QueuePolicyConfig::TimeoutAction;

class RequestQueueTest : public ::testing::Test {
 protected:
  // Queues a request with the given level and deadline (relative to now) and returns its id.
  uint64_t Push(RequestQueue& queue, uint32_t level, std::optional<Micros> timeout = std::nullopt,
                std::string source = "") {
    auto e = std::make_unique<QueueEntry>();
    e->id = next_id_++;
    e->request = std::make_unique<InferenceRequest>();
    e->level = level;
    if (timeout) e->deadline = clock_.Now() + *timeout;
    e->enqueued = clock_.Now();
    e->source = std::move(source);
    queue.Push(std::move(e));
    return next_id_ - 1;
  }
  // The ids of the whole queue in dispatch order (empties it).
  static std::vector<uint64_t> Drain(RequestQueue& queue) {
    std::vector<uint64_t> ids;
    for (auto& e : queue.TakeAll()) ids.push_back(e->id);
    return ids;
  }

  ManualClock clock_{SteadyTime(std::chrono::seconds(100))};
  uint64_t next_id_ = 1;
};

QueueOptions TwoLevels() {
  QueueOptions options;
  options.levels = {LevelPolicy{}, LevelPolicy{}};
  options.default_level = 2;
  return options;
}

TEST_F(RequestQueueTest, HigherLevelsFirstThenEarliestDeadlineThenArrival) {
  RequestQueue queue(TwoLevels());
  uint64_t low = Push(queue, 2);
  uint64_t no_deadline = Push(queue, 1);
  uint64_t late = Push(queue, 1, microseconds(500));
  uint64_t early = Push(queue, 1, microseconds(100));
  uint64_t no_deadline_2 = Push(queue, 1);
  EXPECT_EQ(queue.size(), 5u);
  EXPECT_EQ(queue.size(1), 4u);
  EXPECT_EQ(Drain(queue), (std::vector<uint64_t>{early, late, no_deadline, no_deadline_2, low}));
}

TEST_F(RequestQueueTest, LevelOfARequest) {
  RequestQueue queue(TwoLevels());
  InferenceRequest r;
  EXPECT_EQ(queue.LevelOf(r), 2u);  // priority 0 = the default level
  r.priority = 1;
  EXPECT_EQ(queue.LevelOf(r), 1u);
  r.priority = 7;  // out of range: the default level, as Triton does
  EXPECT_EQ(queue.LevelOf(r), 2u);
}

TEST_F(RequestQueueTest, DeadlinesFollowTheLevelPolicy) {
  QueueOptions options;
  options.levels = {
      LevelPolicy{.default_timeout = microseconds(1000), .allow_timeout_override = true},
      LevelPolicy{.default_timeout = microseconds(1000), .allow_timeout_override = false},
      LevelPolicy{.default_timeout = microseconds(0), .allow_timeout_override = true},
  };
  RequestQueue queue(options);
  const SteadyTime now = clock_.Now();
  InferenceRequest none;
  InferenceRequest shorter;
  shorter.deadline = now + microseconds(200);
  InferenceRequest longer;
  longer.deadline = now + microseconds(5000);

  EXPECT_EQ(queue.DeadlineOf(none, 1, now), now + microseconds(1000));
  EXPECT_EQ(queue.DeadlineOf(shorter, 1, now), now + microseconds(200));   // a request may shorten it
  EXPECT_EQ(queue.DeadlineOf(longer, 1, now), now + microseconds(1000));   // but never lengthen it
  EXPECT_EQ(queue.DeadlineOf(shorter, 2, now), now + microseconds(1000));  // no override allowed
  EXPECT_EQ(queue.DeadlineOf(none, 3, now), std::nullopt);
  EXPECT_EQ(queue.DeadlineOf(longer, 3, now), now + microseconds(5000));
}

TEST_F(RequestQueueTest, FromConfig) {
  ModelConfig config;
  config.max_batch_size = 4;
  QueueOptions plain = QueueOptions::FromConfig(config, 7);
  ASSERT_EQ(plain.levels.size(), 1u);
  EXPECT_TRUE(plain.levels[0].allow_timeout_override);  // no dynamic_batching: the request's deadline applies
  EXPECT_EQ(plain.max_total, 7u);
  EXPECT_FALSE(plain.latest_frame_wins);

  DynamicBatchingConfig batching;
  batching.priority_levels = 3;
  batching.default_priority_level = 2;
  batching.default_queue_policy.max_queue_size = 5;
  batching.priority_queue_policy[1] =
      QueuePolicyConfig{.timeout_action = TimeoutAction::kDelay, .default_timeout_us = 10};
  config.dynamic_batching = batching;
  config.parameters["weft.latest_frame_wins"] = "true";
  QueueOptions options = QueueOptions::FromConfig(config, 0);
  ASSERT_EQ(options.levels.size(), 3u);
  EXPECT_EQ(options.default_level, 2u);
  EXPECT_EQ(options.levels[0].timeout_action, TimeoutAction::kDelay);
  EXPECT_EQ(options.levels[0].default_timeout, microseconds(10));
  EXPECT_EQ(options.levels[1].max_queue_size, 5u);
  EXPECT_FALSE(options.levels[1].allow_timeout_override);  // Triton's default
  EXPECT_TRUE(options.latest_frame_wins);
}

TEST_F(RequestQueueTest, RoomPerLevelAndInTotal) {
  QueueOptions options = TwoLevels();
  options.levels[0].max_queue_size = 1;
  options.max_total = 2;
  RequestQueue queue(options);
  EXPECT_TRUE(queue.HasRoom(1, std::nullopt).ok());
  uint64_t first = Push(queue, 1);
  Status full = queue.HasRoom(1, std::nullopt);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("priority level 1"), std::string::npos);
  EXPECT_TRUE(queue.HasRoom(1, first).ok());  // the request about to be replaced frees its slot
  EXPECT_TRUE(queue.HasRoom(2, std::nullopt).ok());
  Push(queue, 2);
  EXPECT_EQ(queue.HasRoom(2, std::nullopt).code(), StatusCode::kResourceExhausted);
}

TEST_F(RequestQueueTest, ExpiryRejectsOrDelaysByLevel) {
  QueueOptions options = TwoLevels();
  options.levels[1].timeout_action = TimeoutAction::kDelay;
  RequestQueue queue(options);
  uint64_t reject = Push(queue, 1, microseconds(100));
  uint64_t delay = Push(queue, 2, microseconds(50));
  uint64_t on_time = Push(queue, 2, microseconds(1000));
  uint64_t no_deadline = Push(queue, 2);
  EXPECT_EQ(queue.NextDeadline(), clock_.Now() + microseconds(50));

  std::vector<std::unique_ptr<QueueEntry>> expired;
  EXPECT_FALSE(queue.Expire(clock_.Now() + microseconds(49), &expired));
  clock_.Advance(microseconds(100));
  EXPECT_TRUE(queue.Expire(clock_.Now(), &expired));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0]->id, reject);
  EXPECT_EQ(queue.NextDeadline(), clock_.Now() + microseconds(900));
  // The delayed request runs after every on-time request of its level.
  EXPECT_EQ(Drain(queue), (std::vector<uint64_t>{on_time, no_deadline, delay}));
}

TEST_F(RequestQueueTest, RemoveAndSourceIndex) {
  RequestQueue queue(QueueOptions{});
  uint64_t a = Push(queue, 1, microseconds(10), "cam1");
  uint64_t b = Push(queue, 1, std::nullopt, "cam2");
  EXPECT_EQ(queue.FindSource("cam1"), a);
  EXPECT_EQ(queue.FindSource("cam3"), std::nullopt);
  auto removed = queue.Remove(a);
  ASSERT_NE(removed, nullptr);
  EXPECT_EQ(queue.Remove(a), nullptr);
  EXPECT_EQ(queue.FindSource("cam1"), std::nullopt);
  EXPECT_EQ(queue.NextDeadline(), std::nullopt);
  std::vector<std::unique_ptr<QueueEntry>> popped;
  queue.PopFront(1, &popped);
  EXPECT_EQ(popped[0]->id, b);
  EXPECT_EQ(queue.FindSource("cam2"), std::nullopt);
  EXPECT_EQ(queue.size(), 0u);
}

TEST_F(RequestQueueTest, SnapshotIsTheHeadInDispatchOrder) {
  RequestQueue queue(TwoLevels());
  Push(queue, 2);
  Push(queue, 1, microseconds(30));
  Push(queue, 1);
  QueueSnapshot snapshot;
  queue.Snapshot(2, &snapshot);
  ASSERT_EQ(snapshot.requests.size(), 2u);
  EXPECT_EQ(snapshot.requests[0].deadline, clock_.Now() + microseconds(30));
  EXPECT_EQ(snapshot.requests[1].deadline, std::nullopt);
}

TEST(SourceOfTest, StringOrInteger) {
  InferenceRequest r;
  EXPECT_EQ(SourceOf(r), "");
  r.parameters["source"] = std::string("cam1");
  EXPECT_EQ(SourceOf(r), "cam1");
  r.parameters["source"] = int64_t{7};
  EXPECT_EQ(SourceOf(r), "7");
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

TEST(DefaultQueueBoundTest, SixteenBatchesPerInstanceAtLeast64) {
  ModelConfig config;
  config.max_batch_size = 0;
  EXPECT_EQ(DefaultQueueBound(config), 64u);
  config.max_batch_size = 8;
  EXPECT_EQ(DefaultQueueBound(config), 128u);
  config.instance_groups = {InstanceGroupConfig{.count = 2}, InstanceGroupConfig{.count = 1, .gpus = {0, 1}}};
  EXPECT_EQ(DefaultQueueBound(config), 16u * 8 * 4);
  EXPECT_FALSE(ConfigBoundsQueue(config));
  config.dynamic_batching = DynamicBatchingConfig{};
  EXPECT_FALSE(ConfigBoundsQueue(config));
  config.dynamic_batching->priority_queue_policy[2].max_queue_size = 5;
  EXPECT_TRUE(ConfigBoundsQueue(config));
}

}  // namespace
}  // namespace weft
