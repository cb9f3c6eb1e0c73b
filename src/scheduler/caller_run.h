#pragma once

#include <chrono>
#include <cstddef>

#include "scheduler/batch_policy.h"

namespace weft {

// What the submitting thread knows, under the scheduler's lock, right after its request was queued.
struct CallerRunFacts {
  bool allowed = false;    // the scheduler and the request both allow it (Scheduler::Options, Work::caller_may_run)
  size_t queued = 0;       // requests queued, this one included
  BatchDecision decision;  // DecideBatch on the queue as it is now
  double mean_batch = 0;   // requests per execution, recent ones weighted most
  std::chrono::nanoseconds mean_execution{0};  // of an execution, recent ones weighted most; 0 = none measured
  std::chrono::nanoseconds mean_interval{0};   // between two requests' admissions, likewise; 0 = none measured
  bool instance_waiting = false;  // an instance's thread waits for work, holding nothing (no slot, no retry)
};

// Requests come one at a time while recent executions averaged under this many requests each. Above it, the
// instance's thread forming the next batch while one runs is worth more than the thread hand-offs that a lone batch
// saves (its completion on the submitting thread, BatchHints::lone; its whole run there, CallerRunsBatch).
inline constexpr double kLoneMeanBatch = 1.5;

// The longest mean execution that the submitting thread runs itself: for longer ones, the I/O thread's other
// connections would wait longer than the two thread hand-offs that running it saves.
inline constexpr std::chrono::nanoseconds kCallerRunsUnder = std::chrono::microseconds(250);

// Requests must come at least this many mean executions apart. Closer, they would join batches, and a submitting
// thread that runs one is an I/O thread that stops reading the next requests meanwhile: at 64 connections on the
// peers' MLP, lone runs then made batches half as large and cost 14% of the throughput (docs/benchmarks.md).
inline constexpr double kIntervalsPerExecution = 2.0;

// Whether the thread that submitted a request runs its batch itself, instead of waking an instance's thread and
// being woken again for the answer: when requests come one at a time (nothing else is queued, recent batches held
// about one request, requests come further apart than executions take), the batch would start at once anyway, an
// instance's thread is idle, and executions are short. Under load the instance's threads form batches as before.
bool CallerRunsBatch(const CallerRunFacts& facts);

}  // namespace weft
