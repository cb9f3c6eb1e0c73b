#include "device/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "base/log.h"
#include "device/completion_loop.h"
#include "device/cuda/cuda_status.h"
#include "device/host_pool.h"

namespace weft {

namespace cuda_kernels {
cudaError_t LaunchSpin(cudaStream_t stream, unsigned long long ns, int blocks, int threads);
}

namespace {

// How often the mapping from GPU event times to the host clock is renewed. Event times are differences in float
// milliseconds from the anchor: within 10 s that keeps about a microsecond of precision.
constexpr auto kReanchorEvery = std::chrono::seconds(5);

Status RunSafely(const std::function<Status(const NativeStream&)>& run, const NativeStream& native) {
  try {
    return run(native);
  } catch (const std::exception& e) {
    return Internal(std::string("work threw: ") + e.what());
  } catch (...) {
    return Internal("work threw a non-standard exception");
  }
}

// The host function of every completion: one write(2) to the stream's eventfd. It must not call CUDA.
void CUDART_CB SignalCompletion(void* source) { static_cast<const CompletionLoop::Source*>(source)->Signal(); }

class CudaDevice;
class CudaStream;

// The polling thread of CudaDeviceOptions::poll_high_completions: while any registered stream has work whose end it
// has not seen, it queries the oldest such end event of each stream in turn, yielding between passes; with nothing
// pending it sleeps until the next Enqueue wakes it, so an idle device burns no core.
class EventPoller {
 public:
  explicit EventPoller(int device_id);
  ~EventPoller() { thread_.request_stop(); }  // the jthread joins

  void Add(CudaStream* stream) {
    std::lock_guard lock(mu_);
    streams_.push_back(stream);
  }
  // After the stream has drained: the poller never touches it again.
  void Remove(CudaStream* stream) {
    std::lock_guard lock(mu_);
    std::erase(streams_, stream);
  }
  void Wake() {
    {
      std::lock_guard lock(mu_);
      ++wakeups_;
    }
    wake_.notify_one();
  }

 private:
  void Run(std::stop_token stop);

  const int device_id_;
  std::mutex mu_;
  std::condition_variable_any wake_;
  std::vector<CudaStream*> streams_;  // guarded by mu_
  uint64_t wakeups_ = 0;              // guarded by mu_
  std::jthread thread_;               // last: starts after the rest is built
};

class CudaEvent final : public Event {
 public:
  CudaEvent(int device_id, cudaEvent_t event) : device_id_(device_id), event_(event) {}
  ~CudaEvent() override {
    cudaSetDevice(device_id_);
    cudaEventDestroy(event_);
  }
  bool Query() const override {
    cudaSetDevice(device_id_);
    return cudaEventQuery(event_) != cudaErrorNotReady;
  }
  void Synchronize() const override {
    cudaSetDevice(device_id_);
    cudaEventSynchronize(event_);
  }
  cudaEvent_t get() const { return event_; }

 private:
  const int device_id_;
  const cudaEvent_t event_;
};

// Converts event timestamps to the host's steady clock: `event` was reached at `host` (within the few microseconds
// a cudaEventSynchronize on an idle stream takes).
struct ClockAnchor {
  cudaEvent_t event = nullptr;
  SteadyTime host;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(int id, std::string describe, int least, int greatest, std::unique_ptr<CompletionLoop> loop,
             cudaStream_t service_stream, size_t max_cached_pinned, bool poll_high)
      : poller_(poll_high ? std::make_unique<EventPoller>(id) : nullptr),
        id_(id),
        name_("cuda:" + std::to_string(id)),
        describe_(std::move(describe)),
        least_(least),
        greatest_(greatest),
        loop_(std::move(loop)),
        service_stream_(service_stream),
        pinned_(HostPool::Create({.allocate = [id](size_t bytes) -> void* {
                                    cudaSetDevice(id);
                                    void* p = nullptr;
                                    return cudaHostAlloc(&p, bytes, cudaHostAllocDefault) == cudaSuccess ? p : nullptr;
                                  },
                                  .free =
                                      [id](void* p) {
                                        cudaSetDevice(id);
                                        cudaFreeHost(p);
                                      },
                                  .place = {MemoryKind::kCpuPinned, id}},
                                 max_cached_pinned)) {}

  ~CudaDevice() override {
    WEFT_CHECK(live_streams_.load() == 0)
        << name_ << " is destroyed before " << live_streams_.load() << " of its streams";
    cudaSetDevice(id_);
    if (anchor_.event) cudaEventDestroy(anchor_.event);
    cudaStreamSynchronize(service_stream_);
    cudaStreamDestroy(service_stream_);
  }

  Status Start() { return Reanchor(); }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  int id() const override { return id_; }
  const std::string& name() const override { return name_; }
  std::string Describe() const override { return describe_; }
  Result<std::unique_ptr<Stream>> CreateStream(StreamOptions options) override;
  Result<std::unique_ptr<Event>> CreateEvent() override {
    cudaSetDevice(id_);
    cudaEvent_t event;
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return std::unique_ptr<Event>(new CudaEvent(id_, event));
  }
  Result<Buffer> AllocateHost(size_t bytes) override { return pinned_->Allocate(bytes); }
  Result<Buffer> AllocateDevice(size_t bytes, Stream& stream) override;
  CompletionLoop& completion_loop() override { return *loop_; }
  void ReleaseCachedMemory() override {
    // The default pool keeps every freed block (release threshold UINT64_MAX, set at creation): trimming it returns
    // those not in use to the driver, for whatever allocates next (libtorch's own allocator included).
    cudaSetDevice(id_);
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, id_) == cudaSuccess) cudaMemPoolTrimTo(pool, 0);
    pinned_->Trim();
  }

  int PriorityValue(StreamPriority priority) const {
    switch (priority) {
      case StreamPriority::kHigh: return greatest_;
      case StreamPriority::kLow: return least_;
      case StreamPriority::kNormal: break;
    }
    return (least_ + greatest_) / 2;
  }

  // The host time of `event` (a completed timing event). On the loop thread only.
  SteadyTime HostTimeOf(cudaEvent_t event) {
    if (std::chrono::steady_clock::now() - anchor_.host > kReanchorEvery) {
      if (Status s = Reanchor(); !s.ok()) {
        WEFT_LOG(Warning) << name_ << ": " << s.message();
      }
    }
    float ms = 0;
    if (cudaEventElapsedTime(&ms, anchor_.event, event) != cudaSuccess) return std::chrono::steady_clock::now();
    return anchor_.host +
           std::chrono::duration_cast<SteadyTime::duration>(std::chrono::duration<double, std::milli>(ms));
  }

  std::atomic<int> live_streams_{0};
  // Null unless CudaDeviceOptions::poll_high_completions; then the kHigh streams' end events are polled.
  const std::unique_ptr<EventPoller> poller_;

 private:
  // Records a fresh anchor on the idle service stream and waits for it (microseconds).
  Status Reanchor() {
    cudaSetDevice(id_);
    cudaEvent_t event;
    WEFT_CUDA_RETURN_IF_ERROR(cudaEventCreate(&event), "cudaEventCreate");
    cudaError_t error = cudaEventRecord(event, service_stream_);
    if (error == cudaSuccess) error = cudaEventSynchronize(event);
    if (error != cudaSuccess) {
      cudaEventDestroy(event);
      return CudaError(error, "clock anchor");
    }
    if (anchor_.event) cudaEventDestroy(anchor_.event);
    anchor_ = {event, std::chrono::steady_clock::now()};
    return Status::Ok();
  }

  const int id_;
  const std::string name_;
  const std::string describe_;
  const int least_;
  const int greatest_;
  const std::unique_ptr<CompletionLoop> loop_;
  const cudaStream_t service_stream_;  // clock anchors and stream-ordered frees
  const std::shared_ptr<HostPool> pinned_;
  ClockAnchor anchor_;  // touched by Start() and then the loop thread only
};

class CudaStream final : public Stream {
 public:
  CudaStream(CudaDevice* device, StreamOptions options)
      : device_(device),
        options_(std::move(options)),
        polled_(device->poller_ != nullptr && options_.priority == StreamPriority::kHigh) {}
  ~CudaStream() override {
    Synchronize();
    if (polled_) device_->poller_->Remove(this);
    source_.reset();
    cudaSetDevice(device_->id());
    if (side_) cudaStreamDestroy(side_);
    if (stream_) cudaStreamDestroy(stream_);
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
    device_->live_streams_.fetch_sub(1);
  }

  Status Start() {
    device_->live_streams_.fetch_add(1);
    cudaSetDevice(device_->id());
    const int value = device_->PriorityValue(options_.idle ? StreamPriority::kLow : options_.priority);
    WEFT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, value),
                              "cudaStreamCreateWithPriority");
    WEFT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, value),
                              "cudaStreamCreateWithPriority (completion side stream)");
    WEFT_ASSIGN_OR_RETURN(source_, device_->completion_loop().Register([this](uint64_t n) { Deliver(n); }));
    if (polled_) device_->poller_->Add(this);
    return Status::Ok();
  }

  // On the poller's thread: signals the oldest piece of work whose end the poller has not seen, if it has ended.
  // False when nothing of this stream is left to watch.
  bool PollOnce() {
    cudaEvent_t end;
    {
      std::lock_guard lock(fifo_mu_);
      if (signalled_ >= pending_.size()) return false;
      end = pending_[signalled_].end;  // a handle; reused only after its delivery, which waits for this signal
    }
    // Anything but "not ready" ends the wait: an error of the work surfaces in Deliver's own query.
    if (end != nullptr && cudaEventQuery(end) == cudaErrorNotReady) return true;
    {
      std::lock_guard lock(fifo_mu_);
      ++signalled_;
    }
    source_->Signal();
    return true;
  }

  void Enqueue(Work work) override;
  void Copy(Buffer dst, Buffer src, size_t bytes, CompletionCallback on_done) override;
  void Record(Event& event) override {
    std::lock_guard lock(launch_mu_);
    cudaSetDevice(device_->id());
    cudaEventRecord(static_cast<CudaEvent&>(event).get(), stream_);
  }
  void Wait(const Event& event) override {
    std::lock_guard lock(launch_mu_);
    cudaSetDevice(device_->id());
    cudaStreamWaitEvent(stream_, static_cast<const CudaEvent&>(event).get(), 0);
  }
  void Synchronize() override {
    WEFT_CHECK(!device_->completion_loop().InLoopThread()) << "Stream::Synchronize called from a completion";
    std::unique_lock lock(fifo_mu_);
    drained_.wait(lock, [this] { return pending_.empty() && delivering_ == 0; });
  }

  const std::string& name() const override { return options_.name; }
  StreamPriority priority() const override { return options_.priority; }
  NativeStream native() const override { return {DeviceKind::kCuda, device_->id(), stream_}; }
  size_t pending() const override {
    std::lock_guard lock(fifo_mu_);
    return pending_.size() + delivering_;
  }

 private:
  struct Pending {
    CompletionCallback on_done;
    std::vector<std::shared_ptr<const void>> keep_alive;
    Status status;
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
  };

  cudaEvent_t TakeEvent() {
    std::lock_guard lock(fifo_mu_);
    if (!free_events_.empty()) {
      cudaEvent_t e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) return nullptr;
    return e;
  }

  // On the loop thread: `signals` host functions have run, so the `signals` oldest pending pieces of work are done.
  void Deliver(uint64_t signals);

  CudaDevice* const device_;
  const StreamOptions options_;
  const bool polled_;  // the device's poller watches the end events instead of a host function
  cudaStream_t stream_ = nullptr;
  cudaStream_t side_ = nullptr;  // waits on each piece's end event, then runs the host function
  std::unique_ptr<CompletionLoop::Source> source_;

  std::mutex launch_mu_;  // keeps launches and the pending list in the same order

  mutable std::mutex fifo_mu_;
  std::condition_variable drained_;
  std::deque<Pending> pending_;           // guarded by fifo_mu_; in launch order
  size_t delivering_ = 0;                 // guarded by fifo_mu_; off pending_, callbacks not yet returned
  size_t signalled_ = 0;                  // guarded by fifo_mu_; polled_ only: the front of pending_ seen ended
  std::vector<cudaEvent_t> free_events_;  // guarded by fifo_mu_; timing events to reuse
};

void CudaStream::Enqueue(Work work) {
  std::lock_guard lock(launch_mu_);
  cudaSetDevice(device_->id());
  Pending p{.on_done = std::move(work.on_done), .keep_alive = std::move(work.keep_alive)};
  p.start = TakeEvent();
  p.end = TakeEvent();
  if (p.start) cudaEventRecord(p.start, stream_);
  if (work.run) p.status = RunSafely(work.run, native());
  work.run = nullptr;
  cudaError_t error = p.end ? cudaEventRecord(p.end, stream_) : cudaErrorMemoryAllocation;
  if (polled_) {
    if (error != cudaSuccess) {
      // The poller takes a piece whose end event is missing or was never recorded as ended, still in order.
      WEFT_LOG(Error) << device_->name() << " stream '" << options_.name
                      << "': cannot record the end event: " << cudaGetErrorString(error);
      if (p.status.ok()) p.status = CudaError(error, "end event");
    }
    {
      std::lock_guard fifo(fifo_mu_);
      pending_.push_back(std::move(p));
    }
    device_->poller_->Wake();
    return;
  }
  if (error == cudaSuccess) error = cudaStreamWaitEvent(side_, p.end, 0);
  {
    std::lock_guard fifo(fifo_mu_);
    pending_.push_back(std::move(p));
  }
  if (error == cudaSuccess) error = cudaLaunchHostFunc(side_, SignalCompletion, source_.get());
  if (error != cudaSuccess) {
    // The context is broken or out of resources. Complete in order anyway: wait for the host functions already
    // launched, then signal for this piece ourselves.
    WEFT_LOG(Error) << device_->name() << " stream '" << options_.name
                    << "': cannot launch the completion: " << cudaGetErrorString(error);
    cudaStreamSynchronize(side_);
    {
      std::lock_guard fifo(fifo_mu_);
      if (pending_.back().status.ok()) pending_.back().status = CudaError(error, "completion launch");
    }
    source_->Signal();
  }
}

void CudaStream::Copy(Buffer dst, Buffer src, size_t bytes, CompletionCallback on_done) {
  Work work;
  work.run = [d = dst.data, s = src.data, bytes, dst_size = dst.size, src_size = src.size](const NativeStream& n) {
    if (bytes > dst_size || bytes > src_size) {
      return InvalidArgument("copy of " + std::to_string(bytes) + " bytes between buffers of " +
                             std::to_string(src_size) + " and " + std::to_string(dst_size) + " bytes");
    }
    WEFT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(n.handle)),
                              "cudaMemcpyAsync");
    return Status::Ok();
  };
  work.on_done = std::move(on_done);
  work.keep_alive = {std::move(dst.owner), std::move(src.owner)};
  Enqueue(std::move(work));
}

void CudaStream::Deliver(uint64_t signals) {
  cudaSetDevice(device_->id());
  std::vector<Pending> done;
  {
    std::lock_guard lock(fifo_mu_);
    while (signals-- > 0 && !pending_.empty()) {
      done.push_back(std::move(pending_.front()));
      pending_.pop_front();
      if (polled_) --signalled_;
    }
    delivering_ += done.size();
  }
  for (Pending& p : done) {
    Completion completion;
    completion.status = p.status;
    if (completion.status.ok()) {
      // An error of the work itself (an illegal address in a kernel) surfaces at its end event.
      cudaError_t error = cudaEventQuery(p.end);
      if (error != cudaSuccess) completion.status = CudaError(error, "stream '" + options_.name + "'");
    }
    completion.start = p.start ? device_->HostTimeOf(p.start) : std::chrono::steady_clock::now();
    completion.end = p.end ? device_->HostTimeOf(p.end) : completion.start;
    if (completion.end < completion.start) completion.end = completion.start;
    if (p.on_done) p.on_done(completion);
    p.on_done = nullptr;
    p.keep_alive.clear();
  }
  {
    std::lock_guard lock(fifo_mu_);
    for (Pending& p : done) {
      if (p.start) free_events_.push_back(p.start);
      if (p.end) free_events_.push_back(p.end);
    }
    delivering_ -= done.size();
    done.clear();  // under the lock: once Synchronize sees nothing left, nothing of this stream's work is alive
  }
  drained_.notify_all();
}

EventPoller::EventPoller(int device_id) : device_id_(device_id), thread_([this](std::stop_token stop) { Run(stop); }) {}

void EventPoller::Run(std::stop_token stop) {
  cudaSetDevice(device_id_);
  while (!stop.stop_requested()) {
    bool pending = false;
    {
      std::unique_lock lock(mu_);
      const uint64_t seen = wakeups_;
      for (CudaStream* stream : streams_) pending = stream->PollOnce() || pending;
      if (!pending) {
        wake_.wait(lock, stop, [&] { return wakeups_ != seen; });
        continue;
      }
    }
    std::this_thread::yield();
  }
}

Result<std::unique_ptr<Stream>> CudaDevice::CreateStream(StreamOptions options) {
  auto stream = std::make_unique<CudaStream>(this, std::move(options));
  WEFT_RETURN_IF_ERROR(stream->Start());
  return std::unique_ptr<Stream>(std::move(stream));
}

Result<Buffer> CudaDevice::AllocateDevice(size_t bytes, Stream& stream) {
  cudaSetDevice(id_);
  auto cuda_stream = static_cast<cudaStream_t>(stream.native().handle);
  void* p = nullptr;
  cudaError_t error = cudaMallocAsync(&p, bytes, cuda_stream);
  if (error != cudaSuccess) {
    return ResourceExhausted("cannot allocate " + std::to_string(bytes) + " bytes on " + name_ + ": " +
                             cudaGetErrorString(error));
  }
  Buffer buffer;
  // The owner is dropped only after the completions of the work that used the bytes: nothing on the GPU uses them
  // any more, so the free needs no stream order beyond the service stream's.
  buffer.owner = std::shared_ptr<void>(p, [id = id_, service = service_stream_](void* q) {
    cudaSetDevice(id);
    cudaFreeAsync(q, service);
  });
  buffer.data = static_cast<std::byte*>(p);
  buffer.size = bytes;
  buffer.place = {MemoryKind::kGpu, id_};
  return buffer;
}

}  // namespace

std::string CudaUnavailableReason() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return std::string("no usable CUDA driver: ") + cudaGetErrorString(error);
  if (count == 0) return "no GPU";
  return "";
}

Result<std::unique_ptr<Device>> CreateCudaDevice(CudaDeviceOptions options) {
  if (std::string why = CudaUnavailableReason(); !why.empty()) return Unavailable(why);
  const int id = options.device_id;
  WEFT_CUDA_RETURN_IF_ERROR(cudaSetDevice(id), "cudaSetDevice(" + std::to_string(id) + ")");
  cudaDeviceProp props{};
  WEFT_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, id), "cudaGetDeviceProperties");
  int least = 0, greatest = 0;
  WEFT_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
  // Keep freed device memory in the pool instead of returning it to the driver at every synchronization.
  cudaMemPool_t pool;
  if (cudaDeviceGetDefaultMemPool(&pool, id) == cudaSuccess) {
    uint64_t threshold = UINT64_MAX;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  }
  cudaStream_t service;
  WEFT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&service, cudaStreamNonBlocking), "cudaStreamCreate");
  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  std::string describe = "cuda:" + std::to_string(id) + " " + props.name + " (sm_" + std::to_string(props.major) +
                         std::to_string(props.minor) + ", " + std::to_string(props.multiProcessorCount) + " SMs, " +
                         std::to_string(props.asyncEngineCount) + " copy engines); stream priorities from " +
                         std::to_string(least) + " (least) to " + std::to_string(greatest) + " (greatest), " +
                         std::to_string(least - greatest + 1) +
                         " levels; CUDA_DEVICE_MAX_CONNECTIONS=" + (connections ? connections : "unset (8)");
  auto loop = CompletionLoop::Create("cuda:" + std::to_string(id) + " completions");
  if (!loop.ok()) {
    cudaStreamDestroy(service);
    return loop.status();
  }
  if (options.poll_high_completions) describe += "; high-priority completions polled (cudaEventQuery)";
  auto device = std::make_unique<CudaDevice>(id, std::move(describe), least, greatest, std::move(loop).value(), service,
                                             options.max_cached_pinned_bytes, options.poll_high_completions);
  WEFT_RETURN_IF_ERROR(device->Start());
  WEFT_LOG(Info) << device->Describe();
  return std::unique_ptr<Device>(std::move(device));
}

Status LaunchSpinKernel(const NativeStream& stream, std::chrono::nanoseconds duration, int blocks,
                        int threads_per_block) {
  if (stream.kind != DeviceKind::kCuda || stream.handle == nullptr) {
    return Unavailable("the spin kernel needs a CUDA stream; this work runs on the CPU device");
  }
  if (blocks < 1 || threads_per_block < 1 || threads_per_block > 1024) {
    return InvalidArgument("spin kernel: blocks must be >= 1 and threads per block in [1, 1024]");
  }
  cudaSetDevice(stream.device_id);
  WEFT_CUDA_RETURN_IF_ERROR(
      cuda_kernels::LaunchSpin(static_cast<cudaStream_t>(stream.handle),
                               static_cast<unsigned long long>(duration.count()), blocks, threads_per_block),
      "spin kernel launch");
  return Status::Ok();
}

}  // namespace weft
