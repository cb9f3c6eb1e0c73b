#include "scheduler/caller_run.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

using std::chrono::microseconds;

// A lone request on an idle instance, under light load, with short executions: the caller runs it.
CallerRunFacts Lone() {
  return CallerRunFacts{.allowed = true,
                        .queued = 1,
                        .decision = BatchDecision::Run(1),
                        .mean_batch = 1.0,
                        .mean_execution = microseconds(30),
                        .mean_interval = microseconds(100),
                        .instance_waiting = true};
}

TEST(CallerRunTest, ALoneShortRequestOnAnIdleInstanceRunsOnTheCaller) {
  EXPECT_TRUE(CallerRunsBatch(Lone()));
  CallerRunFacts at_bound = Lone();
  at_bound.mean_execution = kCallerRunsUnder;
  at_bound.mean_interval = 2 * kCallerRunsUnder;
  EXPECT_TRUE(CallerRunsBatch(at_bound));
  CallerRunFacts before_load = Lone();
  before_load.mean_batch = 0;  // no execution yet counted as a batch
  before_load.mean_execution = microseconds(1);
  EXPECT_TRUE(CallerRunsBatch(before_load));
  CallerRunFacts spaced_at_bound = Lone();
  spaced_at_bound.mean_interval = microseconds(60);  // two executions of 30 us
  EXPECT_TRUE(CallerRunsBatch(spaced_at_bound));
}

TEST(CallerRunTest, EachConditionAloneKeepsTheRequestOffTheCaller) {
  std::vector<std::pair<const char*, CallerRunFacts>> cases;
  auto add = [&](const char* why, auto edit) {
    CallerRunFacts f = Lone();
    edit(f);
    cases.emplace_back(why, f);
  };
  add("not allowed", [](CallerRunFacts& f) { f.allowed = false; });
  add("others queued", [](CallerRunFacts& f) { f.queued = 2; });
  add("nothing queued", [](CallerRunFacts& f) { f.queued = 0; });
  add("the policy waits", [](CallerRunFacts& f) { f.decision = BatchDecision{BatchDecision::Kind::kWait, 0, {}}; });
  add("the policy is idle", [](CallerRunFacts& f) { f.decision = BatchDecision::Idle(); });
  add("a batch of two", [](CallerRunFacts& f) { f.decision = BatchDecision::Run(2); });
  add("batches under load", [](CallerRunFacts& f) { f.mean_batch = 1.5; });
  add("nothing measured", [](CallerRunFacts& f) { f.mean_execution = microseconds(0); });
  add("long executions", [](CallerRunFacts& f) { f.mean_execution = kCallerRunsUnder + microseconds(1); });
  add("no idle instance", [](CallerRunFacts& f) { f.instance_waiting = false; });
  add("requests closer than two executions", [](CallerRunFacts& f) { f.mean_interval = microseconds(59); });
  add("no interval measured", [](CallerRunFacts& f) { f.mean_interval = microseconds(0); });
  for (const auto& [why, facts] : cases) EXPECT_FALSE(CallerRunsBatch(facts)) << why;
}

}  // namespace
}  // namespace weft
