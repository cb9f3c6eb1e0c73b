#include "frontend/shm/guarded_mapping.h"

#include <signal.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

namespace weft {
namespace {

// One guarded range. `begin` is published last (release) and cleared first, so the handler, which reads it with
// acquire, sees a complete entry or none. Lock-free atomics only: the handler may run on any thread at any time.
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<uint32_t> faults{0};
};
static_assert(std::atomic<uintptr_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

// Zero-initialized in .bss: untouched pages of the table cost no memory.
std::array<Slot, GuardedMapping::kMaxMappings> slots;
// Slots at or past this index have never been used: the handler scans no further.
std::atomic<size_t> slots_used{0};
// Guards slot allocation and the handler's installation (never taken by the handler).
std::mutex slots_mu;
bool in_use[GuardedMapping::kMaxMappings];  // guarded by slots_mu
bool handler_installed = false;             // guarded by slots_mu
struct sigaction previous_action;           // written once under slots_mu, before the handler can run

void PassOn(int signal, siginfo_t* info, void* context) {
  const struct sigaction& previous = previous_action;
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction) return previous.sa_sigaction(signal, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    return previous.sa_handler(signal);
  }
  // No handler before ours: restore the default action; returning re-runs the faulting instruction, which then
  // ends the process with SIGBUS as it would have without us.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(SIGBUS, &fallback, nullptr);
}

void OnSigbus(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  const size_t used = slots_used.load(std::memory_order_acquire);
  for (size_t i = 0; i < used; ++i) {
    Slot& slot = slots[i];
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address >= slot.end.load(std::memory_order_relaxed)) continue;
    const size_t length = slot.end.load(std::memory_order_relaxed) - begin;
    void* replaced = mmap(reinterpret_cast<void*>(begin), length, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (replaced != MAP_FAILED) {
      slot.faults.fetch_add(1, std::memory_order_release);
      errno = saved_errno;
      return;
    }
    break;  // the range could not be replaced: the fault is fatal after all
  }
  errno = saved_errno;
  PassOn(signal, info, context);
}

// Installs OnSigbus once per process. Under slots_mu.
bool InstallHandlerLocked() {
  if (handler_installed) return true;
  struct sigaction action {};
  action.sa_sigaction = OnSigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGBUS, &action, &previous_action) != 0) return false;
  handler_installed = true;
  return true;
}

}  // namespace

Result<std::unique_ptr<GuardedMapping>> GuardedMapping::Map(int fd, size_t size) {
  if (size == 0) return InvalidArgument("a shared memory mapping needs at least one byte");
  size_t slot = kMaxMappings;
  {
    std::lock_guard lock(slots_mu);
    if (!InstallHandlerLocked()) return Internal(std::string("cannot install the SIGBUS handler: ") + strerror(errno));
    for (size_t i = 0; i < kMaxMappings; ++i) {
      if (!in_use[i]) {
        slot = i;
        break;
      }
    }
    if (slot == kMaxMappings) {
      return ResourceExhausted("the process already maps " + std::to_string(kMaxMappings) + " shared memory regions");
    }
    in_use[slot] = true;
    if (slot >= slots_used.load(std::memory_order_relaxed)) slots_used.store(slot + 1, std::memory_order_release);
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int error = errno;
    std::lock_guard lock(slots_mu);
    in_use[slot] = false;
    return Internal(std::string("mmap: ") + strerror(error));
  }
  Slot& entry = slots[slot];
  entry.faults.store(0, std::memory_order_relaxed);
  entry.end.store(reinterpret_cast<uintptr_t>(base) + size, std::memory_order_relaxed);
  entry.begin.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
  return std::unique_ptr<GuardedMapping>(new GuardedMapping(static_cast<std::byte*>(base), size, slot));
}

GuardedMapping::~GuardedMapping() {
  // Unguarded before it is unmapped: no fault can be in this range any more (no slice holds it), and a handler
  // running now for another range never touches an address range that the kernel may hand out again.
  slots[slot_].begin.store(0, std::memory_order_release);
  munmap(data_, size_);
  std::lock_guard lock(slots_mu);
  in_use[slot_] = false;
}

bool GuardedMapping::faulted() const { return slots[slot_].faults.load(std::memory_order_acquire) > 0; }

}  // namespace weft
