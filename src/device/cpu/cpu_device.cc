#include "device/cpu/cpu_device.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "base/log.h"
#include "base/thread_name.h"
#include "base/thread_priority.h"
#include "device/completion_loop.h"
#include "device/host_pool.h"

namespace weft {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kMaxCachedHostBytes = size_t{1} << 30;

class CpuDevice;
class CpuStream;

// One Record of an event: passed once the stream reaches it.
struct Occurrence {
  bool passed = false;              // guarded by the device's mu_
  std::vector<CpuStream*> waiters;  // guarded by the device's mu_; streams held by a Wait on it
};

class CpuEvent final : public Event {
 public:
  explicit CpuEvent(CpuDevice* device) : device_(device) {}
  bool Query() const override;
  void Synchronize() const override;

  CpuDevice* const device_;
  std::shared_ptr<Occurrence> latest;  // guarded by the device's mu_; null until recorded
};

struct Item {
  enum class Kind { kWork, kRecord, kWait };
  Kind kind = Kind::kWork;
  Work work;
  std::shared_ptr<Occurrence> occurrence;  // kRecord, kWait
};

// A completion that waits for the loop thread.
struct Finished {
  CompletionCallback on_done;
  std::vector<std::shared_ptr<const void>> keep_alive;
  Completion completion;
};

Status RunSafely(const std::function<Status(const NativeStream&)>& run, const NativeStream& native) {
  try {
    return run(native);
  } catch (const std::exception& e) {
    return Internal(std::string("work threw: ") + e.what());
  } catch (...) {
    return Internal("work threw a non-standard exception");
  }
}

class CpuDevice final : public Device {
 public:
  CpuDevice(int workers, std::unique_ptr<CompletionLoop> loop);
  ~CpuDevice() override;

  DeviceKind kind() const override { return DeviceKind::kCpu; }
  int id() const override { return 0; }
  const std::string& name() const override { return name_; }
  std::string Describe() const override {
    return "cpu: " + std::to_string(worker_count_) +
           " workers; a free worker takes the ready stream of the highest priority; idle streams run on one more "
           "worker in the kernel's idle class";
  }
  Result<std::unique_ptr<Stream>> CreateStream(StreamOptions options) override;
  Result<std::unique_ptr<Event>> CreateEvent() override { return std::unique_ptr<Event>(new CpuEvent(this)); }
  Result<Buffer> AllocateHost(size_t bytes) override { return pool_->Allocate(bytes); }
  Result<Buffer> AllocateDevice(size_t bytes, Stream&) override { return pool_->Allocate(bytes); }
  CompletionLoop& completion_loop() override { return *loop_; }
  void ReleaseCachedMemory() override { pool_->Trim(); }

 private:
  friend class CpuStream;
  friend class CpuEvent;

  // Moves `stream` (and every stream its progress unblocks) forward: passes Records and satisfied Waits, finishes
  // host callbacks, and makes it ready when its next item is work. Signals under mu_, so that a stream's
  // destructor, which takes mu_ after its last completion, knows that nobody touches the stream any more.
  void AdvanceLocked(CpuStream* stream);
  void PassLocked(Occurrence& occurrence, std::vector<CpuStream*>* todo);
  // Whether work enqueued on `stream` now could start at once: what a free worker would do with it.
  bool CanStartNowLocked(const CpuStream& stream) const;
  // Runs `work`, taken from the front of `stream` or enqueued on it, for which the caller took a slot (running_)
  // unless the stream is idle.
  // Called and returns with `lock` held; releases it while the work runs.
  void RunItem(CpuStream* stream, Work work, std::unique_lock<std::mutex>& lock);
  // Runs `work` on the enqueueing thread (Work::may_run_on_caller), which took a slot and marked `stream` running.
  // With Work::complete_on_caller, when every earlier completion of the stream has returned, it delivers the
  // completion there too: the loop thread's wake-up is saved as well as the worker's. Until the callback has
  // returned the stream stays marked running, so nothing behind the work starts and no later completion can overtake
  // it. Called and returns with `lock` held.
  void RunOnCaller(CpuStream* stream, Work work, std::unique_lock<std::mutex>& lock);
  // Runs `work.run` on this thread with `lock` released, and drops it; returns with `lock` released.
  static Completion RunUnlocked(const CpuStream& stream, Work& work, std::unique_lock<std::mutex>& lock);
  void Serve(std::stop_token stop);
  // The idle worker: runs the work of idle streams (StreamOptions::idle), in the order they became ready.
  void ServeIdle(std::stop_token stop);

  // Constant after construction.
  const std::string name_ = "cpu";
  const int worker_count_;
  const std::unique_ptr<CompletionLoop> loop_;
  const std::shared_ptr<HostPool> pool_;

  std::atomic<int> live_streams_{0};

  std::mutex mu_;
  std::condition_variable_any ready_changed_;  // workers wait here
  std::condition_variable_any passed_;         // Event::Synchronize waits here
  // Ready streams: highest priority first, then the one ready longest. Guarded by mu_.
  std::set<std::tuple<int, uint64_t, CpuStream*>> ready_;
  uint64_t next_ready_seq_ = 0;  // guarded by mu_
  // Items running now, on workers or on enqueueing threads (Work::may_run_on_caller). Guarded by mu_. Never above
  // worker_count_: the workers are the device's size, whichever threads run the work.
  int running_ = 0;
  // Ready idle streams, the one ready longest first. Guarded by mu_. Their work holds no slot of running_.
  std::deque<CpuStream*> idle_ready_;
  std::condition_variable_any idle_ready_changed_;  // the idle worker waits here

  std::vector<std::jthread> workers_;  // the idle worker last; started last, joined first
};

class CpuStream final : public Stream {
 public:
  CpuStream(CpuDevice* device, StreamOptions options) : device_(device), options_(std::move(options)) {}
  ~CpuStream() override;

  Status Start() {
    WEFT_ASSIGN_OR_RETURN(source_, device_->loop_->Register([this](uint64_t) { DeliverCompletions(); }));
    return Status::Ok();
  }

  void Enqueue(Work work) override;
  void Copy(Buffer dst, Buffer src, size_t bytes, CompletionCallback on_done) override;
  void Record(Event& event) override;
  void Wait(const Event& event) override;
  void Synchronize() override;

  const std::string& name() const override { return options_.name; }
  StreamPriority priority() const override { return options_.priority; }
  bool idle() const { return options_.idle; }
  NativeStream native() const override { return {DeviceKind::kCpu, 0, nullptr}; }
  size_t pending() const override {
    std::lock_guard lock(done_mu_);
    return pending_;
  }

  void AddFinished(Finished finished) {
    std::lock_guard lock(done_mu_);
    finished_.push_back(std::move(finished));
    ++undelivered_;
  }
  // Whether every completion that finished before now has returned, so that one delivered on this thread now comes
  // after them.
  bool AllDelivered() const {
    std::lock_guard lock(done_mu_);
    return undelivered_ == 0;
  }
  // After a completion delivered by the enqueueing thread has returned.
  void DeliveredOnCaller() {
    std::lock_guard lock(done_mu_);
    --pending_;
    // Under done_mu_: a Synchronize that returns on this may destroy the stream as soon as the lock is free.
    drained_.notify_all();
  }
  void Signal() const { source_->Signal(); }

  // Guarded by the device's mu_.
  std::deque<Item> items;
  bool running = false;  // a worker runs its front item
  bool ready = false;    // in the device's ready set
  bool blocked = false;  // registered as a waiter of the occurrence its front Wait names

 private:
  // On the loop thread: runs the callbacks of finished work in order, then releases what they kept alive.
  void DeliverCompletions();

  CpuDevice* const device_;
  const StreamOptions options_;
  std::unique_ptr<CompletionLoop::Source> source_;

  mutable std::mutex done_mu_;  // after the device's mu_ when both are held
  std::condition_variable drained_;
  std::deque<Finished> finished_;  // guarded by done_mu_
  size_t pending_ = 0;             // guarded by done_mu_; work enqueued whose callback has not returned
  size_t undelivered_ = 0;         // guarded by done_mu_; completions for the loop whose callback has not returned
};

bool CpuEvent::Query() const {
  std::lock_guard lock(device_->mu_);
  return !latest || latest->passed;
}

void CpuEvent::Synchronize() const {
  std::unique_lock lock(device_->mu_);
  std::shared_ptr<Occurrence> occurrence = latest;
  if (!occurrence) return;
  device_->passed_.wait(lock, [&] { return occurrence->passed; });
}

CpuDevice::CpuDevice(int workers, std::unique_ptr<CompletionLoop> loop)
    : worker_count_(workers),
      loop_(std::move(loop)),
      pool_(HostPool::Create({.allocate = [](size_t bytes) -> void* {
                                return ::operator new((bytes + kAlignment - 1) / kAlignment * kAlignment,
                                                      std::align_val_t(kAlignment), std::nothrow);
                              },
                              .free = [](void* block) { ::operator delete(block, std::align_val_t(kAlignment)); },
                              .place = {MemoryKind::kCpu, 0}},
                             kMaxCachedHostBytes)) {
  for (int i = 0; i < workers; ++i) {
    workers_.emplace_back([this](std::stop_token stop) {
      SetCurrentThreadName("cpu-worker");
      Serve(stop);
    });
  }
  workers_.emplace_back([this](std::stop_token stop) {
    SetCurrentThreadName("cpu-idle");
    if (!SetCurrentThreadIdle()) {
      WEFT_LOG(Warning) << "the CPU device's idle worker could not enter the idle scheduling class; it runs at nice 19";
    }
    ServeIdle(stop);
  });
}

CpuDevice::~CpuDevice() {
  WEFT_CHECK(live_streams_.load() == 0) << "the CPU device is destroyed before " << live_streams_.load()
                                        << " of its streams";
  workers_.clear();
}

Result<std::unique_ptr<Stream>> CpuDevice::CreateStream(StreamOptions options) {
  auto stream = std::make_unique<CpuStream>(this, std::move(options));
  WEFT_RETURN_IF_ERROR(stream->Start());
  live_streams_.fetch_add(1);
  return std::unique_ptr<Stream>(std::move(stream));
}

void CpuDevice::PassLocked(Occurrence& occurrence, std::vector<CpuStream*>* todo) {
  occurrence.passed = true;
  for (CpuStream* waiter : occurrence.waiters) {
    waiter->blocked = false;
    todo->push_back(waiter);
  }
  occurrence.waiters.clear();
  passed_.notify_all();
}

void CpuDevice::AdvanceLocked(CpuStream* stream) {
  std::vector<CpuStream*> todo{stream};
  while (!todo.empty()) {
    CpuStream* s = todo.back();
    todo.pop_back();
    if (s->running || s->ready || s->blocked) continue;
    while (!s->items.empty()) {
      Item& head = s->items.front();
      if (head.kind == Item::Kind::kRecord) {
        PassLocked(*head.occurrence, &todo);
        s->items.pop_front();
        continue;
      }
      if (head.kind == Item::Kind::kWait) {
        if (head.occurrence->passed) {
          s->items.pop_front();
          continue;
        }
        head.occurrence->waiters.push_back(s);
        s->blocked = true;
        break;
      }
      if (!head.work.run) {
        // A host callback: nothing to run, so it needs no worker.
        const SteadyTime now = std::chrono::steady_clock::now();
        s->AddFinished({std::move(head.work.on_done), std::move(head.work.keep_alive), {Status::Ok(), now, now}});
        s->items.pop_front();
        s->Signal();
        continue;
      }
      s->ready = true;
      if (s->idle()) {
        idle_ready_.push_back(s);
        idle_ready_changed_.notify_one();
      } else {
        ready_.emplace(-static_cast<int>(s->priority()), next_ready_seq_++, s);
        ready_changed_.notify_one();
      }
      break;
    }
  }
}

bool CpuDevice::CanStartNowLocked(const CpuStream& stream) const {
  if (stream.idle() || !stream.items.empty() || stream.running || stream.ready || stream.blocked) return false;
  if (running_ >= worker_count_) return false;
  // A ready stream of the same priority became ready first; one of a lower priority would yield to this one.
  return ready_.empty() || -std::get<0>(*ready_.begin()) < static_cast<int>(stream.priority());
}

void CpuDevice::RunItem(CpuStream* stream, Work work, std::unique_lock<std::mutex>& lock) {
  Completion completion = RunUnlocked(*stream, work, lock);
  lock.lock();
  // Under mu_: once the completion is visible, the stream may be destroyed as soon as mu_ is free.
  stream->AddFinished({std::move(work.on_done), std::move(work.keep_alive), std::move(completion)});
  stream->Signal();
  stream->running = false;
  if (!stream->idle()) --running_;
  AdvanceLocked(stream);
}

Completion CpuDevice::RunUnlocked(const CpuStream& stream, Work& work, std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  const SteadyTime start = std::chrono::steady_clock::now();
  Status status = RunSafely(work.run, stream.native());
  const SteadyTime end = std::chrono::steady_clock::now();
  work.run = nullptr;  // its captures die here, on the running thread, not on the loop thread
  return {std::move(status), start, end};
}

void CpuDevice::RunOnCaller(CpuStream* stream, Work work, std::unique_lock<std::mutex>& lock) {
  // Decided before the run: while it runs nothing else of the stream can finish.
  const bool complete_here = work.complete_on_caller && stream->AllDelivered();
  Completion completion;
  if (complete_here) {
    completion = RunUnlocked(*stream, work, lock);
    lock.lock();
    --running_;
  } else {
    RunItem(stream, std::move(work), lock);
  }
  // The slot this thread held is free again: a stream that found every slot taken may start now.
  if (!ready_.empty()) ready_changed_.notify_one();
  if (!complete_here) return;
  lock.unlock();
  if (work.on_done) work.on_done(completion);
  work.on_done = nullptr;
  work.keep_alive.clear();
  lock.lock();
  stream->running = false;
  AdvanceLocked(stream);
  stream->DeliveredOnCaller();
}

void CpuDevice::Serve(std::stop_token stop) {
  std::unique_lock lock(mu_);
  // An idle worker may still find no slot: enqueueing threads hold some while they run work themselves.
  while (ready_changed_.wait(lock, stop, [this] { return !ready_.empty() && running_ < worker_count_; })) {
    CpuStream* stream = std::get<2>(*ready_.begin());
    ready_.erase(ready_.begin());
    stream->ready = false;
    stream->running = true;
    ++running_;
    Work work = std::move(stream->items.front().work);
    stream->items.pop_front();
    RunItem(stream, std::move(work), lock);
  }
}

void CpuDevice::ServeIdle(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (idle_ready_changed_.wait(lock, stop, [this] { return !idle_ready_.empty(); })) {
    CpuStream* stream = idle_ready_.front();
    idle_ready_.pop_front();
    stream->ready = false;
    stream->running = true;
    Work work = std::move(stream->items.front().work);
    stream->items.pop_front();
    RunItem(stream, std::move(work), lock);
  }
}

CpuStream::~CpuStream() {
  Synchronize();
  {
    std::lock_guard lock(device_->mu_);
    // Only markers can be left. A Record with nothing before it counts as passed; a Wait is withdrawn.
    std::vector<CpuStream*> todo;
    for (Item& item : items) {
      if (item.kind == Item::Kind::kRecord) device_->PassLocked(*item.occurrence, &todo);
      if (item.kind == Item::Kind::kWait) std::erase(item.occurrence->waiters, this);
    }
    items.clear();
    for (CpuStream* s : todo) {
      if (s != this) device_->AdvanceLocked(s);
    }
  }
  source_.reset();
  device_->live_streams_.fetch_sub(1);
}

void CpuStream::Enqueue(Work work) {
  {
    std::lock_guard lock(done_mu_);
    ++pending_;
  }
  std::unique_lock lock(device_->mu_);
  // Never on the completion loop's thread: work run there would hold up the completions of every stream.
  if (work.may_run_on_caller && work.run && !device_->loop_->InLoopThread() && device_->CanStartNowLocked(*this)) {
    running = true;
    ++device_->running_;
    device_->RunOnCaller(this, std::move(work), lock);
    return;
  }
  items.push_back({.kind = Item::Kind::kWork, .work = std::move(work)});
  device_->AdvanceLocked(this);
}

void CpuStream::Copy(Buffer dst, Buffer src, size_t bytes, CompletionCallback on_done) {
  Work work;
  if (bytes > dst.size || bytes > src.size) {
    work.run = [bytes, dst = dst.size, src = src.size](const NativeStream&) {
      return InvalidArgument("copy of " + std::to_string(bytes) + " bytes between buffers of " + std::to_string(src) +
                             " and " + std::to_string(dst) + " bytes");
    };
  } else {
    work.run = [d = dst.data, s = src.data, bytes](const NativeStream&) {
      if (bytes > 0) std::memcpy(d, s, bytes);
      return Status::Ok();
    };
  }
  work.on_done = std::move(on_done);
  work.keep_alive = {std::move(dst.owner), std::move(src.owner)};
  Enqueue(std::move(work));
}

void CpuStream::Record(Event& event) {
  auto& cpu_event = static_cast<CpuEvent&>(event);
  WEFT_CHECK(cpu_event.device_ == device_) << "an event is recorded on another device's stream";
  auto occurrence = std::make_shared<Occurrence>();
  std::lock_guard lock(device_->mu_);
  cpu_event.latest = occurrence;
  items.push_back({.kind = Item::Kind::kRecord, .occurrence = std::move(occurrence)});
  device_->AdvanceLocked(this);
}

void CpuStream::Wait(const Event& event) {
  const auto& cpu_event = static_cast<const CpuEvent&>(event);
  WEFT_CHECK(cpu_event.device_ == device_) << "a stream waits on another device's event";
  std::lock_guard lock(device_->mu_);
  if (!cpu_event.latest || cpu_event.latest->passed) return;
  items.push_back({.kind = Item::Kind::kWait, .occurrence = cpu_event.latest});
  device_->AdvanceLocked(this);
}

void CpuStream::Synchronize() {
  WEFT_CHECK(!device_->loop_->InLoopThread()) << "Stream::Synchronize called from a completion";
  std::unique_lock lock(done_mu_);
  drained_.wait(lock, [this] { return pending_ == 0; });
}

void CpuStream::DeliverCompletions() {
  std::deque<Finished> batch;
  {
    std::lock_guard lock(done_mu_);
    batch.swap(finished_);
  }
  for (Finished& f : batch) {
    if (f.on_done) f.on_done(f.completion);
    f.on_done = nullptr;
    f.keep_alive.clear();
  }
  const size_t n = batch.size();
  batch.clear();
  {
    std::lock_guard lock(done_mu_);
    pending_ -= n;
    undelivered_ -= n;
  }
  drained_.notify_all();
}

}  // namespace

Result<std::unique_ptr<Device>> CreateCpuDevice(CpuDeviceOptions options) {
  if (options.workers < 1) {
    return InvalidArgument("the CPU device needs at least 1 worker, got " + std::to_string(options.workers));
  }
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<CompletionLoop> loop, CompletionLoop::Create("cpu completions"));
  return std::unique_ptr<Device>(new CpuDevice(options.workers, std::move(loop)));
}

}  // namespace weft
