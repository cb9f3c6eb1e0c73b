#include "scheduler/caller_run.h"

namespace weft {

bool CallerRunsBatch(const CallerRunFacts& facts) {
  return facts.allowed && facts.queued == 1 && facts.decision.kind == BatchDecision::Kind::kRun &&
         facts.decision.count == 1 && facts.mean_batch < kLoneMeanBatch && facts.mean_execution.count() > 0 &&
         facts.mean_execution <= kCallerRunsUnder &&
         static_cast<double>(facts.mean_interval.count()) >=
             kIntervalsPerExecution * static_cast<double>(facts.mean_execution.count()) &&
         facts.instance_waiting;
}

}  // namespace weft
