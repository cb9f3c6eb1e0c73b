#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace weft {

// Whether `address` lies in a mapping of this process (/proc/self/maps): for tests of memory given back.
inline bool MappedInThisProcess(const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream(line) >> std::hex >> begin >> dash >> end;
    if (a >= begin && a < end) return true;
  }
  return false;
}

}  // namespace weft
