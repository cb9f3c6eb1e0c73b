#include "device/device.h"

namespace weft {

std::string_view DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kCuda: return "cuda";
  }
  return "unknown";
}

std::string_view StreamPriorityName(StreamPriority priority) {
  switch (priority) {
    case StreamPriority::kLow: return "low";
    case StreamPriority::kNormal: return "normal";
    case StreamPriority::kHigh: return "high";
  }
  return "unknown";
}

}  // namespace weft
