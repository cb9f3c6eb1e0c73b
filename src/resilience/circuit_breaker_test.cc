#include "resilience/circuit_breaker.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace weft {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Options with only the failure rate deciding (no "N in a row"), over a count window of 10.
BreakerOptions RateOnly() {
  BreakerOptions o;
  o.window_calls = 10;
  o.minimum_calls = 10;
  o.failure_rate = 0.5;
  o.consecutive_failures = 0;
  o.open_duration = milliseconds(1000);
  o.max_open_duration = milliseconds(5000);
  o.half_open_probes = 3;
  return o;
}

// A breaker and a manual clock: `now` only moves when a test advances it.
struct Fixture {
  explicit Fixture(BreakerOptions options) : breaker(std::move(options)) {}
  SteadyTime now = SteadyTime{} + seconds(100);
  CircuitBreaker breaker;

  void Call(CallOutcome outcome, int times = 1) {
    for (int i = 0; i < times; ++i) {
      CircuitBreaker::Admission a = breaker.Admit(now);
      ASSERT_TRUE(a.admitted);
      breaker.Record(outcome, a.probe, now);
    }
  }
  void Trip() {
    Call(CallOutcome::kFailure, static_cast<int>(breaker.options().minimum_calls));
    ASSERT_EQ(breaker.state(), BreakerState::kOpen);
  }
  // Moves to the end of the open period and admits the first probe.
  CircuitBreaker::Admission HalfOpen() {
    now += breaker.open_period();
    CircuitBreaker::Admission a = breaker.Admit(now);
    EXPECT_TRUE(a.admitted);
    EXPECT_TRUE(a.probe);
    EXPECT_EQ(breaker.state(), BreakerState::kHalfOpen);
    return a;
  }
};

TEST(CircuitBreakerTest, StateNames) {
  EXPECT_EQ(BreakerStateName(BreakerState::kClosed), "closed");
  EXPECT_EQ(BreakerStateName(BreakerState::kOpen), "open");
  EXPECT_EQ(BreakerStateName(BreakerState::kHalfOpen), "half_open");
}

TEST(CircuitBreakerTest, ClassifiesEveryStatusCode) {
  const std::vector<std::pair<StatusCode, CallOutcome>> expected = {
      {StatusCode::kOk, CallOutcome::kSuccess},
      {StatusCode::kInvalidArgument, CallOutcome::kIgnored},
      {StatusCode::kNotFound, CallOutcome::kIgnored},
      {StatusCode::kUnavailable, CallOutcome::kIgnored},
      {StatusCode::kResourceExhausted, CallOutcome::kIgnored},
      {StatusCode::kDeadlineExceeded, CallOutcome::kIgnored},
      {StatusCode::kCancelled, CallOutcome::kIgnored},
      {StatusCode::kAborted, CallOutcome::kIgnored},
      {StatusCode::kUnimplemented, CallOutcome::kIgnored},
      {StatusCode::kInternal, CallOutcome::kFailure},
      {StatusCode::kOutOfMemory, CallOutcome::kFailure},
  };
  // The table covers every code, the last one included.
  ASSERT_EQ(expected.size(), static_cast<size_t>(StatusCode::kOutOfMemory) + 1);
  for (const auto& [code, outcome] : expected) {
    SCOPED_TRACE(std::string(StatusCodeName(code)));
    const Status status = code == StatusCode::kOk ? Status::Ok() : Status(code, "x");
    EXPECT_EQ(ClassifyForBreaker(status), outcome);
  }
}

TEST(CircuitBreakerTest, StaysClosedBelowMinimumCallsEvenAtFullFailure) {
  Fixture f(RateOnly());
  f.Call(CallOutcome::kFailure, 9);
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);
  EXPECT_EQ(f.breaker.window_failures(f.now), 9u);
  EXPECT_EQ(f.breaker.window_calls(f.now), 9u);
  EXPECT_EQ(f.breaker.transitions(), 0u);
  EXPECT_TRUE(f.breaker.Admit(f.now).admitted);
}

TEST(CircuitBreakerTest, OpensAtTheFailureRateOnceMinimumCallsReached) {
  Fixture below(RateOnly());
  below.Call(CallOutcome::kSuccess, 6);
  below.Call(CallOutcome::kFailure, 4);  // 4 of 10: under 50 %
  EXPECT_EQ(below.breaker.state(), BreakerState::kClosed);

  Fixture f(RateOnly());
  f.Call(CallOutcome::kSuccess, 5);
  f.Call(CallOutcome::kFailure, 4);
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);  // 9 calls: under minimum_calls
  f.Call(CallOutcome::kFailure);                        // 5 of 10: exactly the rate
  EXPECT_EQ(f.breaker.state(), BreakerState::kOpen);
  EXPECT_EQ(f.breaker.transitions(), 1u);

  // A success that brings the window to minimum_calls decides too.
  Fixture g(RateOnly());
  g.Call(CallOutcome::kFailure, 9);
  g.Call(CallOutcome::kSuccess);
  EXPECT_EQ(g.breaker.state(), BreakerState::kOpen);
}

TEST(CircuitBreakerTest, CountWindowKeepsOnlyTheLastCalls) {
  BreakerOptions o = RateOnly();
  o.failure_rate = 0.6;
  Fixture f(o);
  f.Call(CallOutcome::kFailure, 5);
  f.Call(CallOutcome::kSuccess, 5);  // 5 of 10
  EXPECT_EQ(f.breaker.window_failures(f.now), 5u);
  f.Call(CallOutcome::kSuccess, 3);  // the three oldest failures leave the window
  EXPECT_EQ(f.breaker.window_failures(f.now), 2u);
  EXPECT_EQ(f.breaker.window_calls(f.now), 10u);
  f.Call(CallOutcome::kFailure, 5);  // evicts 2 failures and 3 successes: 5 of 10, under 60 %
  EXPECT_EQ(f.breaker.window_failures(f.now), 5u);
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);
  f.Call(CallOutcome::kFailure);  // 6 of 10
  EXPECT_EQ(f.breaker.state(), BreakerState::kOpen);
}

TEST(CircuitBreakerTest, ConsecutiveFailuresOpenWhateverTheWindow) {
  BreakerOptions o = RateOnly();
  o.window_calls = 100;
  o.minimum_calls = 100;
  o.consecutive_failures = 3;
  Fixture f(o);
  f.Call(CallOutcome::kFailure, 2);
  f.Call(CallOutcome::kSuccess);  // breaks the run
  f.Call(CallOutcome::kFailure, 2);
  f.Call(CallOutcome::kIgnored);  // does not
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);
  f.Call(CallOutcome::kFailure);
  EXPECT_EQ(f.breaker.state(), BreakerState::kOpen);
}

TEST(CircuitBreakerTest, OpenRefusesWithRetryAfterThenHalfOpensAtOpenUntil) {
  Fixture f(RateOnly());
  f.Trip();
  const SteadyTime opened = f.now;
  CircuitBreaker::Admission a = f.breaker.Admit(opened);
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.retry_after, milliseconds(1000));
  a = f.breaker.Admit(opened + milliseconds(300));
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.retry_after, milliseconds(700));
  a = f.breaker.Admit(opened + std::chrono::microseconds(999'500));
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.retry_after, milliseconds(1));  // rounded up, never 0
  EXPECT_EQ(f.breaker.state(), BreakerState::kOpen);

  // Outcomes of calls admitted before the breaker opened are dropped.
  f.breaker.Record(CallOutcome::kSuccess, false, opened);
  f.breaker.Record(CallOutcome::kFailure, true, opened);
  EXPECT_EQ(f.breaker.state(), BreakerState::kOpen);
  EXPECT_EQ(f.breaker.transitions(), 1u);

  a = f.breaker.Admit(opened + milliseconds(1000));
  EXPECT_TRUE(a.admitted);
  EXPECT_TRUE(a.probe);
  EXPECT_EQ(f.breaker.state(), BreakerState::kHalfOpen);
  EXPECT_EQ(f.breaker.transitions(), 2u);
}

TEST(CircuitBreakerTest, HalfOpenAdmitsExactlyHalfOpenProbes) {
  Fixture f(RateOnly());
  f.Trip();
  f.HalfOpen();
  EXPECT_TRUE(f.breaker.Admit(f.now).probe);
  EXPECT_TRUE(f.breaker.Admit(f.now).probe);
  for (int i = 0; i < 5; ++i) {
    CircuitBreaker::Admission a = f.breaker.Admit(f.now + seconds(i));
    EXPECT_FALSE(a.admitted);
    EXPECT_FALSE(a.probe);
    EXPECT_EQ(a.retry_after, milliseconds(1000));  // the current open period, as an estimate
  }
  // A decided (successful) probe does not free its slot: the period admits 3 probes in all.
  f.breaker.Record(CallOutcome::kSuccess, true, f.now);
  EXPECT_FALSE(f.breaker.Admit(f.now).admitted);
  EXPECT_EQ(f.breaker.state(), BreakerState::kHalfOpen);
}

TEST(CircuitBreakerTest, FailedProbeReopensWithADoubledPeriodUpToTheCap) {
  Fixture f(RateOnly());  // open 1000 ms, at most 5000 ms
  f.Trip();
  EXPECT_EQ(f.breaker.open_period(), milliseconds(1000));
  for (milliseconds expected : {milliseconds(2000), milliseconds(4000), milliseconds(5000), milliseconds(5000)}) {
    SCOPED_TRACE(expected.count());
    f.HalfOpen();
    f.breaker.Record(CallOutcome::kFailure, true, f.now);
    EXPECT_EQ(f.breaker.state(), BreakerState::kOpen);
    EXPECT_EQ(f.breaker.open_period(), expected);
    CircuitBreaker::Admission a = f.breaker.Admit(f.now);
    EXPECT_FALSE(a.admitted);
    EXPECT_EQ(a.retry_after, expected);
    EXPECT_FALSE(f.breaker.Admit(f.now + expected - milliseconds(1)).admitted);
  }
  EXPECT_EQ(f.breaker.transitions(), 1u + 4u * 2u);
}

TEST(CircuitBreakerTest, AllProbesSucceedingClosesAndResetsThePeriod) {
  Fixture f(RateOnly());
  f.Trip();
  f.HalfOpen();
  f.breaker.Record(CallOutcome::kFailure, true, f.now);  // reopen: 2000 ms
  CircuitBreaker::Admission probes[3] = {f.HalfOpen(), f.breaker.Admit(f.now), f.breaker.Admit(f.now)};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(probes[i].probe);
    EXPECT_EQ(f.breaker.state(), BreakerState::kHalfOpen);
    f.breaker.Record(CallOutcome::kSuccess, true, f.now);
  }
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);
  EXPECT_EQ(f.breaker.open_period(), milliseconds(1000));
  EXPECT_EQ(f.breaker.window_calls(f.now), 0u);  // the window starts empty
  EXPECT_EQ(f.breaker.window_failures(f.now), 0u);
  CircuitBreaker::Admission a = f.breaker.Admit(f.now);
  EXPECT_TRUE(a.admitted);
  EXPECT_FALSE(a.probe);

  // The next trip opens for open_duration again.
  f.Trip();
  EXPECT_EQ(f.breaker.Admit(f.now).retry_after, milliseconds(1000));
}

TEST(CircuitBreakerTest, IgnoredOutcomesChangeNothing) {
  Fixture f(RateOnly());
  f.Call(CallOutcome::kIgnored, 1000);
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);
  EXPECT_EQ(f.breaker.window_calls(f.now), 0u);
  f.Call(CallOutcome::kFailure, 9);
  f.Call(CallOutcome::kIgnored, 1000);
  EXPECT_EQ(f.breaker.window_calls(f.now), 9u);
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);
  EXPECT_EQ(f.breaker.transitions(), 0u);
}

TEST(CircuitBreakerTest, AnIgnoredProbeFreesItsSlot) {
  Fixture f(RateOnly());
  f.Trip();
  f.HalfOpen();
  ASSERT_TRUE(f.breaker.Admit(f.now).probe);
  ASSERT_TRUE(f.breaker.Admit(f.now).probe);
  ASSERT_FALSE(f.breaker.Admit(f.now).admitted);
  f.breaker.Record(CallOutcome::kIgnored, true, f.now);  // e.g. the client cancelled
  EXPECT_EQ(f.breaker.state(), BreakerState::kHalfOpen);
  EXPECT_TRUE(f.breaker.Admit(f.now).probe);
  EXPECT_FALSE(f.breaker.Admit(f.now).admitted);
  // Three successes close: the ignored one did not count.
  f.breaker.Record(CallOutcome::kSuccess, true, f.now);
  f.breaker.Record(CallOutcome::kSuccess, true, f.now);
  EXPECT_EQ(f.breaker.state(), BreakerState::kHalfOpen);
  f.breaker.Record(CallOutcome::kSuccess, true, f.now);
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);
}

TEST(CircuitBreakerTest, HalfOpenIgnoresCallsAdmittedBeforeAndLateProbes) {
  Fixture f(RateOnly());
  f.Trip();
  f.HalfOpen();
  // Outcomes of calls admitted while closed.
  f.breaker.Record(CallOutcome::kFailure, false, f.now);
  f.breaker.Record(CallOutcome::kSuccess, false, f.now);
  EXPECT_EQ(f.breaker.state(), BreakerState::kHalfOpen);
  ASSERT_TRUE(f.breaker.Admit(f.now).probe);
  ASSERT_TRUE(f.breaker.Admit(f.now).probe);
  f.breaker.Record(CallOutcome::kFailure, true, f.now);  // reopen, two probes of this period still out
  ASSERT_EQ(f.breaker.state(), BreakerState::kOpen);
  f.HalfOpen();
  f.breaker.Record(CallOutcome::kSuccess, true, f.now);  // this period's probe
  // The two late probes of the earlier period find no probe in flight: dropped, no slot freed, no decision.
  f.breaker.Record(CallOutcome::kFailure, true, f.now);
  f.breaker.Record(CallOutcome::kIgnored, true, f.now);
  EXPECT_EQ(f.breaker.state(), BreakerState::kHalfOpen);
  EXPECT_TRUE(f.breaker.Admit(f.now).probe);
  EXPECT_TRUE(f.breaker.Admit(f.now).probe);
  EXPECT_FALSE(f.breaker.Admit(f.now).admitted);
}

TEST(CircuitBreakerTest, TimeWindowForgetsFailuresOlderThanTheWindow) {
  BreakerOptions o = RateOnly();
  o.window = milliseconds(10000);
  o.minimum_calls = 5;
  Fixture f(o);
  f.Call(CallOutcome::kFailure, 4);
  f.now += seconds(5);
  EXPECT_EQ(f.breaker.window_failures(f.now), 4u);
  EXPECT_EQ(f.breaker.window_calls(f.now), 4u);
  f.now += seconds(5);  // 10 s after the failures: out of the window
  EXPECT_EQ(f.breaker.window_failures(f.now), 0u);
  EXPECT_EQ(f.breaker.window_calls(f.now), 0u);
  f.Call(CallOutcome::kFailure);
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);  // 1 call, not 5
  f.Call(CallOutcome::kSuccess, 3);
  f.now += seconds(2);
  f.Call(CallOutcome::kFailure);  // 2 of 5 calls
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);
  f.Call(CallOutcome::kFailure);  // 3 of 6
  EXPECT_EQ(f.breaker.state(), BreakerState::kOpen);
  EXPECT_EQ(f.breaker.window_calls(f.now), 6u);
}

TEST(CircuitBreakerTest, TimeWindowToleratesTimeGoingBackwards) {
  BreakerOptions o = RateOnly();
  o.window = milliseconds(1000);
  o.minimum_calls = 3;
  Fixture f(o);
  f.Call(CallOutcome::kSuccess);
  f.breaker.Record(CallOutcome::kFailure, false, f.now - milliseconds(50));  // a little older: counted
  EXPECT_EQ(f.breaker.window_failures(f.now), 1u);
  f.breaker.Record(CallOutcome::kFailure, false, f.now - seconds(60));  // older than the window: dropped
  EXPECT_EQ(f.breaker.window_calls(f.now), 2u);
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);
  // Times before the clock's epoch work too.
  Fixture g(o);
  g.now = SteadyTime{} - milliseconds(250);
  g.Call(CallOutcome::kFailure, 2);
  g.now += milliseconds(500);
  EXPECT_EQ(g.breaker.window_failures(g.now), 2u);
  g.Call(CallOutcome::kFailure);
  EXPECT_EQ(g.breaker.state(), BreakerState::kOpen);
}

TEST(CircuitBreakerTest, DisabledNeverOpens) {
  BreakerOptions o = RateOnly();
  o.enabled = false;
  o.consecutive_failures = 3;
  Fixture f(o);
  f.Call(CallOutcome::kFailure, 1000);
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);
  EXPECT_EQ(f.breaker.transitions(), 0u);
  EXPECT_EQ(f.breaker.window_failures(f.now), 10u);  // still counted, for logs
  CircuitBreaker::Admission a = f.breaker.Admit(f.now);
  EXPECT_TRUE(a.admitted);
  EXPECT_FALSE(a.probe);
}

TEST(CircuitBreakerTest, DefaultOptionsOpenAfterFiveFailuresInARow) {
  Fixture f(BreakerOptions{});
  f.Call(CallOutcome::kFailure, 4);
  EXPECT_EQ(f.breaker.state(), BreakerState::kClosed);
  f.Call(CallOutcome::kFailure);
  EXPECT_EQ(f.breaker.state(), BreakerState::kOpen);
  EXPECT_EQ(f.breaker.Admit(f.now).retry_after, milliseconds(5000));
}

}  // namespace
}  // namespace weft
