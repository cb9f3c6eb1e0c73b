#include "base/thread_priority.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace weft {

bool SetCurrentThreadNice(int nice) {
  // PRIO_PROCESS with a thread id sets that thread alone on Linux (POSIX would say the whole process).
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  return setpriority(PRIO_PROCESS, tid, nice) == 0;
}

bool SetCurrentThreadIdle() {
  sched_param param{};
  param.sched_priority = 0;
  // pid 0 is the calling thread for sched_setscheduler on Linux, as for setpriority with a thread id.
  if (sched_setscheduler(0, SCHED_IDLE, &param) == 0) return true;
  SetCurrentThreadNice(19);
  return false;
}

}  // namespace weft
