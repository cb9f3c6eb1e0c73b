#pragma once

#include <chrono>
#include <stop_token>

namespace weft {

// Sleeps for `duration`, or until a stop is requested on `stop`, whichever comes first: the wait of a periodic
// thread that must end promptly when its owner goes. True when it slept the whole time, false when stopped.
bool SleepUnlessStopped(const std::stop_token& stop, std::chrono::nanoseconds duration);

}  // namespace weft
