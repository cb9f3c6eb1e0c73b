#pragma once

namespace weft {

// The nice value of background threads that must not slow the request path: model loads, warm-ups and unloads.
// At 10 a thread gets about a tenth of a core that request threads (0) also want, so a load still progresses under
// full load instead of starving, as it would at 19 or under SCHED_IDLE.
inline constexpr int kBackgroundNice = 10;

// Sets the calling thread's nice value (Linux keeps one per thread). Threads it creates afterwards inherit it.
// Best effort: returns false (and changes nothing) when the system refuses.
bool SetCurrentThreadNice(int nice);

// Puts the calling thread in the kernel's idle scheduling class (SCHED_IDLE): it runs only on a core that no other
// thread of the machine wants, and a waking thread of the normal class preempts it at once. For work no client waits
// for (a rollout's shadow copies). Unprivileged threads cannot leave that class, so only threads that stay there for
// life should call it. When the kernel refuses, falls back to the weakest nice value (19) and returns false.
bool SetCurrentThreadIdle();

}  // namespace weft
