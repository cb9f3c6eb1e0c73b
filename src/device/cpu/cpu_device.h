#pragma once

#include <memory>

#include "base/result.h"
#include "device/device.h"

namespace weft {

struct CpuDeviceOptions {
  int workers = 2;  // threads that run work; at least 1
};

// The device layer on host threads, with the semantics of the CUDA device, so that everything above it runs and is
// tested without a GPU, and as a real CPU execution mode.
//
// - A stream is a queue; at most one of its items runs at a time, in order. Work on different streams runs on
//   different workers at once.
// - A stream is ready when its next item can run. A free worker takes the ready stream of the highest priority;
//   among equal priorities, the one that became ready first. A running item is never preempted.
// - Record and Wait are markers in the queue: a Record is passed as soon as the items before it are done; a Wait
//   holds its stream until the event's latest Record made before the Wait has been passed.
// - Work with Work::may_run_on_caller runs on the enqueueing thread, inside Enqueue, when a free worker would start
//   it at once; it holds one of the `workers` slots meanwhile, so at most `workers` items run at any time. With
//   Work::complete_on_caller its completion runs there as well, unless one of the stream's earlier completions is
//   still with the loop; the stream starts nothing more until it has returned.
// - A worker that finishes an item appends its completion to the stream's list and writes the stream's eventfd;
//   the completion loop runs the callbacks. Workers and the loop sleep when idle; nothing polls.
// - Idle streams (StreamOptions::idle) are served by one more thread, the idle worker, in the kernel's idle
//   scheduling class: their work holds none of the `workers` slots and gets a core only when no other thread of
//   the machine wants it. Never run on the caller.
// - Memory: host memory from a pool (AllocateHost and AllocateDevice are the same).
//
// InvalidArgument for fewer than 1 worker; Internal when the kernel refuses an eventfd or epoll descriptor.
Result<std::unique_ptr<Device>> CreateCpuDevice(CpuDeviceOptions options);

}  // namespace weft
