#include "base/thread_name.h"

#include <pthread.h>

#include <algorithm>

namespace weft {

namespace {
constexpr size_t kMaxNameBytes = 15;  // the kernel's 16, with the terminating zero
}  // namespace

void SetCurrentThreadName(std::string_view name) {
  size_t length = std::min(name.size(), kMaxNameBytes);
  // Back off continuation bytes (10xxxxxx) so that the cut falls between characters.
  if (length < name.size()) {
    while (length > 0 && (static_cast<unsigned char>(name[length]) & 0xC0) == 0x80) --length;
  }
  const std::string truncated(name.substr(0, length));
  pthread_setname_np(pthread_self(), truncated.c_str());
}

std::string CurrentThreadName() {
  char name[kMaxNameBytes + 1] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) return "";
  return name;
}

}  // namespace weft
