#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "tensor/tensor.h"

namespace weft {

class CompletionLoop;

// The device layer: one interface for the CPU and the CUDA implementation (docs/architecture.md, "Device layer").
//
//   Stream  an ordered queue of work on a device. Work on one stream runs in order; work on different streams may
//           overlap. Each piece of work reports its end once, in order, on the device's completion loop thread (or, on
//           the CPU device, on the thread that ran it: Work::complete_on_caller).
//   Event   a point in a stream (Record) that another stream can wait for (Wait).
//
// Nothing here blocks on device work except Synchronize() (for tests and shutdown).

enum class DeviceKind : uint8_t { kCpu, kCuda };
std::string_view DeviceKindName(DeviceKind kind);

// How urgent a stream's work is. The CPU device gives a free worker to the ready stream of the highest priority;
// the CUDA device maps kHigh, kNormal and kLow onto the greatest, middle and least value of the range that
// cudaDeviceGetStreamPriorityRange reports. On CUDA it is a hint: it orders pending blocks, never preempts.
enum class StreamPriority : uint8_t { kLow = 0, kNormal = 1, kHigh = 2 };
std::string_view StreamPriorityName(StreamPriority priority);

// The native queue behind a stream, for code that launches its own device work into it (a backend on CUDA).
struct NativeStream {
  DeviceKind kind = DeviceKind::kCpu;
  int device_id = 0;
  void* handle = nullptr;  // cudaStream_t on a CUDA device; null on the CPU device
};

// Memory from a device's pools. `owner` returns the bytes to their pool when its last copy is dropped; hand it to
// Work::keep_alive so that a stream holds the bytes until its completion for that work has fired.
struct Buffer {
  std::shared_ptr<void> owner;
  std::byte* data = nullptr;
  size_t size = 0;
  MemoryPlace place;
};

// What a stream reports for one piece of work once the stream has passed it.
struct Completion {
  Status status;  // an error from launching or running the work; later work on the stream still runs
  // When the work began and ended on the device, on the host's steady clock (CUDA converts event timestamps).
  // Equal for work that had nothing to run. The union of these intervals is the device's busy time.
  SteadyTime start;
  SteadyTime end;
};

using CompletionCallback = std::function<void(const Completion&)>;

struct Work {
  // The work itself. CPU device: runs on a worker once everything enqueued before it on the stream is done.
  // CUDA device: runs at once on the enqueueing thread and launches its device work into `stream.handle`; it must
  // not wait for that work. Empty: a host callback, nothing runs. Must not throw.
  std::function<Status(const NativeStream& stream)> run;
  // Called exactly once, after the stream has passed this work (and so all work enqueued before it), on the
  // completion loop's thread (or on the enqueueing thread: complete_on_caller). Completions of one stream never
  // overlap and keep the stream's order. Must not block, and must not destroy the stream it came from.
  CompletionCallback on_done;
  // Released after on_done has returned: the buffers the work reads or writes live at least that long.
  std::vector<std::shared_ptr<const void>> keep_alive;
  // CPU device: the enqueueing thread may run `run` itself, before Enqueue returns, when a worker would start it
  // at once anyway (the stream has nothing queued or running, fewer items run than there are workers, and no
  // stream of a higher priority is ready). This saves the hand-off to a worker, a wake-up of tens of microseconds
  // on a small machine; on_done still arrives on the completion loop. Only for a caller that may block for the
  // work's duration and would otherwise only wait for it (the scheduler's instance thread). Ignored on CUDA, where
  // `run` always runs on the enqueueing thread.
  bool may_run_on_caller = false;
  // With may_run_on_caller, when the enqueueing thread ran the work: it calls on_done too, before Enqueue returns,
  // unless an earlier completion of the stream has not returned yet (then on_done arrives on the completion loop).
  // The loop's wake-up is saved as well. For a caller with nothing better to do meanwhile (an instance thread with
  // no request queued: otherwise the loop runs the completion while the thread forms the next batch).
  bool complete_on_caller = false;
};

// A point in a stream. Recording it again moves the point; a Wait waits for the latest Record made before it (a
// never-recorded event is passed at once), as in CUDA. Use it only with streams of the device that created it.
// Thread-safe.
class Event {
 public:
  virtual ~Event() = default;
  // True when the stream has passed the latest Record (or there was none). Never blocks.
  virtual bool Query() const = 0;
  // Blocks until Query() is true.
  virtual void Synchronize() const = 0;
};

// An ordered queue of work on a device. Every method is thread-safe; what one thread enqueues runs in the order it
// was enqueued. Enqueue always takes ownership: a failure to launch arrives as the Completion's status.
class Stream {
 public:
  virtual ~Stream() = default;  // waits until every completion of this stream has fired

  virtual void Enqueue(Work work) = 0;
  // Copies `bytes` from `src` to `dst` in stream order (async on CUDA: pinned host memory never waits for the
  // host); both buffers are held until `on_done` has returned.
  virtual void Copy(Buffer dst, Buffer src, size_t bytes, CompletionCallback on_done) = 0;
  // Marks this point of the stream in `event`.
  virtual void Record(Event& event) = 0;
  // Work enqueued after this call starts only once `event`'s latest Record has been passed.
  virtual void Wait(const Event& event) = 0;
  // Blocks until every completion enqueued so far has fired and returned. Never call it from a completion.
  virtual void Synchronize() = 0;

  virtual const std::string& name() const = 0;
  virtual StreamPriority priority() const = 0;
  virtual NativeStream native() const = 0;
  // Work enqueued whose completion has not fired yet (the stream's queue depth).
  virtual size_t pending() const = 0;
};

struct StreamOptions {
  std::string name;
  StreamPriority priority = StreamPriority::kNormal;
  // For work no client waits for. CPU device: the stream's work runs only on the device's idle worker, a thread of
  // its own in the kernel's idle class (SCHED_IDLE) that gets a core only when nothing else wants it, so it never
  // takes a worker or a core from other streams. CUDA device: the lowest stream priority.
  bool idle = false;
};

// A CPU or a GPU with its streams, events, memory pools and completion loop. Streams and events must be destroyed
// before their device. Thread-safe.
class Device {
 public:
  virtual ~Device() = default;

  virtual DeviceKind kind() const = 0;
  virtual int id() const = 0;
  // For logs and metric labels: "cpu", "cuda:0".
  virtual const std::string& name() const = 0;
  // One line for the start-up log: the model, workers or priority range.
  virtual std::string Describe() const = 0;

  virtual Result<std::unique_ptr<Stream>> CreateStream(StreamOptions options) = 0;
  virtual Result<std::unique_ptr<Event>> CreateEvent() = 0;
  // Host memory the device copies from and to without staging: pinned on CUDA. From a pool.
  virtual Result<Buffer> AllocateHost(size_t bytes) = 0;
  // Memory on the device, usable by work on `stream` from now on (stream-ordered on CUDA, never managed memory).
  virtual Result<Buffer> AllocateDevice(size_t bytes, Stream& stream) = 0;

  // The thread on which every completion of this device's streams is delivered.
  virtual CompletionLoop& completion_loop() = 0;

  // Gives the memory its pools hold free (device memory, pinned host blocks) back to the system, so that a retry
  // after an out-of-memory finds it; allocations after it are slower until the pools fill again.
  virtual void ReleaseCachedMemory() {}
};

}  // namespace weft
