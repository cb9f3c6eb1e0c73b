#include "app/memory_allocator.h"

#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>
#include <thread>

#include "base/idle_purge_policy.h"
#include "base/log.h"
#include "base/stoppable_sleep.h"
#include "base/thread_name.h"

#ifdef WEFT_JEMALLOC
#include <jemalloc/jemalloc.h>
#include <sys/types.h>

// jemalloc reads its options from this symbol when it starts; MALLOC_CONF in the environment still overrides them.
// - oversize_threshold:0 turns off the separate arena for allocations of 8 MiB and more. That arena gives freed
//   pages back to the system at once, so each large request body (a 16 MB tensor) was faulted in again, page by
//   page, on the next request. On this project's VMs a fault costs tens of microseconds, and a 16 MB round trip
//   over HTTP took 55-105 ms instead of 9-12 (docs/benchmarks.md).
// - dirty_decay_ms:-1,muzzy_decay_ms:-1: jemalloc's own purge is off; IdleMemoryPurge gives the pages back once
//   large allocations stop. jemalloc's decay counts only the growth of its freed pages per interval, so memory
//   that requests free and take again within an interval looked unused and was purged between requests: 16 MB over
//   gRPC faulted in 14-23 MB a request and ran at 6-10 req/s, 48-66 without the purge.
// - lg_extent_max_active_fit:10: a freed range may serve a request of up to 1/1024 of its size (1/64 by default).
//   gRPC reads a message into many slices of varying size; held to 1/64, they took fresh pages while large freed
//   ranges sat unused, and resident memory grew past 1.1 GiB under the same load with purging off.
// Buffers of 64 MiB and more (MapLargeBuffer) are mapped on their own either way.
const char* malloc_conf = "oversize_threshold:0,dirty_decay_ms:-1,muzzy_decay_ms:-1,lg_extent_max_active_fit:10";
#endif

namespace weft {

#ifdef WEFT_JEMALLOC
namespace {

// True when jemalloc's own purge is off, as malloc_conf asks unless MALLOC_CONF turned it back on.
bool JemallocDecayIsOff() {
  ssize_t decay = 0;
  size_t size = sizeof(decay);
  return mallctl("opt.dirty_decay_ms", &decay, &size, nullptr, 0) == 0 && decay < 0;
}

}  // namespace
#endif

std::string MemoryAllocatorName() {
#ifdef WEFT_JEMALLOC
  std::string name = "jemalloc";
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (mallctl("version", &version, &size, nullptr, 0) == 0 && version != nullptr) name += std::string(" ") + version;
  // The options in force, which MALLOC_CONF may have changed.
  size_t oversize = 0;
  size = sizeof(oversize);
  if (mallctl("opt.oversize_threshold", &oversize, &size, nullptr, 0) == 0) {
    name += oversize == 0 ? " (no oversize arena" : " (oversize arena from " + std::to_string(oversize) + " bytes";
    name += JemallocDecayIsOff() ? ", freed pages given back when idle" : ", jemalloc's decay purge";
    name += ")";
  }
  return name;
#else
  return "the C library's malloc";
#endif
}

namespace {

#ifdef WEFT_JEMALLOC
constexpr size_t kLeastDirtyBytes = size_t{16} << 20;
constexpr size_t kMostDirtyBytes = size_t{1} << 30;
constexpr std::chrono::seconds kQuiet{10};
constexpr std::chrono::seconds kLookEvery{1};

// "arena.4096.purge", "stats.arenas.4096.pdirty": a mallctl name that covers every arena.
std::string AllArenas(const char* prefix, const char* what) {
  return std::string(prefix) + "." + std::to_string(MALLCTL_ARENAS_ALL) + "." + what;
}

// The statistics IdlePurgePolicy looks at, read through names built once.
class ActivityReader {
 public:
  // False when jemalloc cannot say (built without statistics).
  bool Read(AllocatorActivity* activity) const {
    uint64_t epoch = 1;
    if (page_ == 0 || mallctl("epoch", nullptr, nullptr, &epoch, sizeof(epoch)) != 0) return false;
    uint64_t large = 0;
    size_t size = sizeof(large);
    if (mallctl(large_allocations_.c_str(), &large, &size, nullptr, 0) != 0) return false;
    size_t dirty_pages = 0;
    size = sizeof(dirty_pages);
    if (mallctl(dirty_pages_.c_str(), &dirty_pages, &size, nullptr, 0) != 0) return false;
    activity->large_allocations = large;
    activity->dirty_bytes = dirty_pages * page_;
    return true;
  }

 private:
  static size_t PageSize() {
    size_t page = 0;
    size_t size = sizeof(page);
    return mallctl("arenas.page", &page, &size, nullptr, 0) == 0 ? page : 0;
  }

  const std::string large_allocations_ = AllArenas("stats.arenas", "large.nmalloc");
  const std::string dirty_pages_ = AllArenas("stats.arenas", "pdirty");
  const size_t page_ = PageSize();
};

class JemallocIdlePurge final : public IdleMemoryPurge {
 public:
  JemallocIdlePurge()
      : thread_([this](std::stop_token stop) {
          SetCurrentThreadName("mem-purge");
          Run(stop);
        }) {}

 private:
  void Run(std::stop_token stop) {
    IdlePurgePolicy policy(kQuiet, kLeastDirtyBytes, kMostDirtyBytes);
    const ActivityReader reader;
    const std::string purge = AllArenas("arena", "purge");
    bool blind = false;
    while (SleepUnlessStopped(stop, blind ? kQuiet : kLookEvery)) {
      AllocatorActivity activity;
      if (!blind && !reader.Read(&activity)) {
        // Without statistics the pages still have to go back: every quiet period, busy or not.
        WEFT_LOG(Warning) << "jemalloc gives no statistics: freed memory is purged every " << kQuiet.count() << " s";
        blind = true;
      }
      if (blind || policy.Observe(activity, std::chrono::steady_clock::now())) {
        mallctl(purge.c_str(), nullptr, nullptr, nullptr, 0);
      }
    }
  }

  std::jthread thread_;
};
#endif

class NoIdlePurge final : public IdleMemoryPurge {};

}  // namespace

std::unique_ptr<IdleMemoryPurge> IdleMemoryPurge::Start() {
#ifdef WEFT_JEMALLOC
  if (JemallocDecayIsOff()) return std::make_unique<JemallocIdlePurge>();
#endif
  return std::make_unique<NoIdlePurge>();
}

}  // namespace weft
