#include "base/stoppable_sleep.h"

#include <condition_variable>
#include <mutex>

namespace weft {

bool SleepUnlessStopped(const std::stop_token& stop, std::chrono::nanoseconds duration) {
  std::mutex mu;
  std::condition_variable_any wake;
  std::unique_lock lock(mu);
  wake.wait_for(lock, stop, duration, [] { return false; });
  return !stop.stop_requested();
}

}  // namespace weft
