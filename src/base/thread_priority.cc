#include "base/thread_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace weft {

bool SetCurrentThreadNice(int nice) {
  // PRIO_PROCESS with a thread id sets that thread alone on Linux (POSIX would say the whole process).
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  return setpriority(PRIO_PROCESS, tid, nice) == 0;
}

}  // namespace weft
