#pragma once

#include <memory>

#include "model/backend.h"

namespace weft {

// Models built into the server, for tests, demos and benchmarks of everything around a framework. Selected by
// `backend: "weft_builtin"`; config parameter `builtin` names the model:
//   identity  output i = input i, zero-copy (the output shares the input's bytes), any datatype incl. BYTES.
//   add_sub   INPUT0, INPUT1 (same shape, FP32/FP64/INT32/INT64) -> OUTPUT0 = a + b, OUTPUT1 = a - b.
//   sleep     identity after sleeping parameters batch_delay_us + item_delay_us * batch size (default 0 each):
//             a model whose cost is fixed per batch, the case that dynamic batching is for.
//   counter   a running count of executed items per instance (its output depends on execution order);
//   gpu_spin  a CUDA kernel that spins for a configured time on a configured number of blocks (needs a GPU).
//             Both are described in stateful_models.h.
//   affine    one input and one output, TYPE_FP32, same dims -> OUTPUT = scale * INPUT + offset, where "scale offset"
//             are the two numbers of the version's model file (default_model_filename, else model.txt; at most
//             4 KiB): tests of reloads tell versions apart by their outputs, without a framework.
//   fault     identity with injected faults (failures, delays, hangs, out of memory, crashed instances), for
//             drills of breakers and fallbacks; described in fault_model.h.
// Only affine reads a model file (CreateInstance: NotFound when it is missing); the others need none. Thread-safe.
std::shared_ptr<const Backend> MakeBuiltinBackend();

}  // namespace weft
