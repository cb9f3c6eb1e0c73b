#pragma once

#include <memory>

#include "base/result.h"
#include "model/backend.h"

namespace weft {

// fault: identity with injected faults, for tests and drills of circuit breakers, fallbacks, out-of-memory
// recovery and hung executions.
//
// Tensors: every config input except an optional control input `FAULT_RATE` maps by position to the outputs (same
// data_type, dims and reshape pairwise); output i shares data input i's bytes, renamed. `FAULT_RATE`, TYPE_FP32 with
// dims [1], is a client's failure probability for its own batch item (clamped to [0, 1]; NaN counts as 0).
//
// Parameters, all optional; a value that is not a number or out of range is an InvalidArgument naming it:
//   failure_rate     probability in [0, 1] that an execution fails (default 0).
//   delay_us         every execution sleeps this long first (default 0).
//   hang_ms          with probability hang_rate (in [0, 1]; default 1) an execution sleeps this long, then answers
//                    normally: a hung execution that returns late (default 0 = off).
//   oom_above_batch  an execution of a batch larger than this fails with OutOfMemory (default 0 = off).
//   crash_rate       probability in [0, 1] that an execution crashes the instance: it and every later execution of
//                    that instance fail; only a new instance serves again (default 0).
//   seed             seeds instance i's generator with seed + i, for reproducible runs (default: random_device).
//
// Execute, in order: CheckInputs; a crashed instance fails; delay_us; oom_above_batch; crash_rate; hang_ms;
// failure_rate; each item's FAULT_RATE; then the identity outputs. Injected failures are Internal("fault: ...")
// except out of memory. Each instance owns its generator and crashed flag (one execution at a time per instance).

Status ValidateFault(const ModelConfig& config);
// `index` is the instance's number within the model: it offsets `seed`.
Result<std::unique_ptr<ModelInstance>> MakeFaultInstance(const ModelConfig& config, int index);

}  // namespace weft
