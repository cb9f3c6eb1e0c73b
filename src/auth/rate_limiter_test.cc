#include "auth/rate_limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace weft {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

const SteadyTime kStart = SteadyTime(seconds(1000));

TEST(TakeTokenTest, AllowsTheBurstThenSaysHowLongToWait) {
  const RateLimit limit{.rate = 2, .burst = 3};
  TokenBucket bucket;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(TakeToken(&bucket, limit, kStart), nanoseconds(0)) << i;
  // Empty: one token comes after 1 / rate.
  EXPECT_EQ(TakeToken(&bucket, limit, kStart), milliseconds(500));
  EXPECT_EQ(TakeToken(&bucket, limit, kStart), milliseconds(500));  // a refusal takes nothing
  EXPECT_EQ(TakeToken(&bucket, limit, kStart + milliseconds(200)), milliseconds(300));
  EXPECT_EQ(TakeToken(&bucket, limit, kStart + milliseconds(500)), nanoseconds(0));
  EXPECT_EQ(TakeToken(&bucket, limit, kStart + milliseconds(500)), milliseconds(500));
}

TEST(TakeTokenTest, RefillsAtTheRateUpToTheBurst) {
  const RateLimit limit{.rate = 10, .burst = 5};
  TokenBucket bucket;
  for (int i = 0; i < 5; ++i) ASSERT_EQ(TakeToken(&bucket, limit, kStart), nanoseconds(0));
  // 250 ms at 10/s: 2.5 tokens.
  SteadyTime now = kStart + milliseconds(250);
  EXPECT_EQ(TakeToken(&bucket, limit, now), nanoseconds(0));
  EXPECT_EQ(TakeToken(&bucket, limit, now), nanoseconds(0));
  EXPECT_EQ(TakeToken(&bucket, limit, now), milliseconds(50));
  // An hour later: the burst, no more.
  now += std::chrono::hours(1);
  int allowed = 0;
  while (TakeToken(&bucket, limit, now) == nanoseconds(0)) ++allowed;
  EXPECT_EQ(allowed, 5);
}

TEST(TakeTokenTest, WaitsOfSlowRates) {
  TokenBucket bucket;
  const RateLimit limit{.rate = 0.5, .burst = 1};
  EXPECT_EQ(TakeToken(&bucket, limit, kStart), nanoseconds(0));
  EXPECT_EQ(TakeToken(&bucket, limit, kStart), seconds(2));
  EXPECT_EQ(TakeToken(&bucket, limit, kStart + seconds(2)), nanoseconds(0));
  // So slow that the wait is capped rather than overflowing.
  TokenBucket slow;
  const RateLimit glacial{.rate = 1e-300, .burst = 1};
  EXPECT_EQ(TakeToken(&slow, glacial, kStart), nanoseconds(0));
  const nanoseconds wait = TakeToken(&slow, glacial, kStart);
  EXPECT_GT(wait, std::chrono::hours(24 * 364));
  EXPECT_LE(wait, std::chrono::hours(24 * 366));
}

TEST(TakeTokenTest, WithoutALimitAlwaysAllows) {
  TokenBucket bucket;
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(TakeToken(&bucket, RateLimit{}, kStart), nanoseconds(0));
  EXPECT_FALSE(bucket.started);
}

TEST(TakeTokenTest, ATimeBeforeTheLastRefillsNothing) {
  const RateLimit limit{.rate = 1, .burst = 1};
  TokenBucket bucket;
  EXPECT_EQ(TakeToken(&bucket, limit, kStart), nanoseconds(0));
  EXPECT_EQ(TakeToken(&bucket, limit, kStart - seconds(10)), seconds(1));
  EXPECT_EQ(TakeToken(&bucket, limit, kStart + seconds(1)), nanoseconds(0));
}

TEST(TakeTokenTest, AShrunkenBurstCapsWhatIsHeld) {
  TokenBucket bucket;
  EXPECT_EQ(TakeToken(&bucket, RateLimit{.rate = 1, .burst = 100}, kStart), nanoseconds(0));
  const RateLimit smaller{.rate = 1, .burst = 2};
  EXPECT_EQ(TakeToken(&bucket, smaller, kStart), nanoseconds(0));
  EXPECT_EQ(TakeToken(&bucket, smaller, kStart), nanoseconds(0));
  EXPECT_EQ(TakeToken(&bucket, smaller, kStart), seconds(1));
}

TEST(TakeTokenTest, AClientThatWaitsAsToldIsAllowed) {
  // Rates whose periods are not whole nanoseconds: the advertised wait must be enough, every time.
  for (double rate : {3.0, 7.0, 0.3, 1000.0 / 3}) {
    const RateLimit limit{.rate = rate, .burst = 1};
    TokenBucket bucket;
    SteadyTime now = kStart;
    ASSERT_EQ(TakeToken(&bucket, limit, now), nanoseconds(0));
    for (int i = 0; i < 1000; ++i) {
      const nanoseconds wait = TakeToken(&bucket, limit, now);
      ASSERT_GT(wait, nanoseconds(0)) << rate << " at " << i;
      now += wait;
      ASSERT_EQ(TakeToken(&bucket, limit, now), nanoseconds(0)) << rate << " at " << i;
    }
  }
}

TEST(RateLimiterTest, KeepsABucketPerIdentity) {
  RateLimiter limiter;
  const RateLimit limit{.rate = 1, .burst = 2};
  EXPECT_EQ(limiter.Acquire("a", limit, kStart), nanoseconds(0));
  EXPECT_EQ(limiter.Acquire("a", limit, kStart), nanoseconds(0));
  EXPECT_EQ(limiter.Acquire("a", limit, kStart), seconds(1));
  EXPECT_EQ(limiter.Acquire("b", limit, kStart), nanoseconds(0));
  EXPECT_EQ(limiter.Acquire("b", limit, kStart), nanoseconds(0));
  EXPECT_EQ(limiter.Acquire("b", limit, kStart), seconds(1));
  EXPECT_EQ(limiter.Acquire("a", limit, kStart + seconds(1)), nanoseconds(0));
  EXPECT_EQ(limiter.size(), 2u);
  // Unlimited callers take no bucket.
  EXPECT_EQ(limiter.Acquire("c", RateLimit{}, kStart), nanoseconds(0));
  EXPECT_EQ(limiter.size(), 2u);
}

TEST(RateLimiterTest, StaysWithinItsBoundDroppingTheOldest) {
  RateLimiter limiter(64);
  const RateLimit slow{.rate = 1e-6, .burst = 1};
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(limiter.Acquire("client-" + std::to_string(i), slow, kStart + milliseconds(i)), nanoseconds(0));
    ASSERT_LE(limiter.size(), 64u);
  }
  // The latest is still held, and limited; the first was dropped, so it starts again with a full bucket.
  EXPECT_GT(limiter.Acquire("client-9999", slow, kStart + seconds(10)), nanoseconds(0));
  EXPECT_EQ(limiter.Acquire("client-0", slow, kStart + seconds(10)), nanoseconds(0));
}

TEST(RateLimiterTest, DropsRefilledBucketsFirst) {
  RateLimiter limiter(64);
  const RateLimit victim_limit{.rate = 1e-6, .burst = 1};
  ASSERT_EQ(limiter.Acquire("victim", victim_limit, kStart), nanoseconds(0));
  // Many callers after it, each of whose buckets is full again a millisecond later.
  const RateLimit fast{.rate = 1000, .burst = 2};
  for (int i = 1; i <= 10000; ++i) {
    ASSERT_EQ(limiter.Acquire("caller-" + std::to_string(i), fast, kStart + milliseconds(2 * i)), nanoseconds(0));
  }
  EXPECT_LE(limiter.size(), 64u);
  EXPECT_GT(limiter.Acquire("victim", victim_limit, kStart + seconds(30)), nanoseconds(0));
}

TEST(RateLimiterTest, CountsExactlyUnderConcurrentUse) {
  constexpr int kThreads = 4;
  constexpr int kCallsPerThread = 5000;
  RateLimiter limiter(256);
  const RateLimit limit{.rate = 1, .burst = 100};
  std::atomic<int> shared_allowed{0};
  std::vector<int> own_allowed(kThreads, 0);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const std::string own = "thread-" + std::to_string(t);
        for (int i = 0; i < kCallsPerThread; ++i) {
          // One clock reading for all: nothing refills, so the totals are exact.
          const SteadyTime now = kStart + std::chrono::hours(1);
          if (limiter.Acquire("shared", limit, now) == nanoseconds(0)) shared_allowed.fetch_add(1);
          if (limiter.Acquire(own, limit, now) == nanoseconds(0)) ++own_allowed[t];
          // Identities that come and go, so that buckets are dropped while others are in use. They are older than
          // the counted ones, which are therefore never the oldest of their shard and stay.
          limiter.Acquire("passing-" + std::to_string(t) + "-" + std::to_string(i), limit, kStart + nanoseconds(i));
        }
      });
    }
  }
  EXPECT_EQ(shared_allowed.load(), 100);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(own_allowed[t], 100) << t;
  EXPECT_LE(limiter.size(), 256u);
}

}  // namespace
}  // namespace weft
