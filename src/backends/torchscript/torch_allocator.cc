#include "backends/torchscript/torch_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "backends/torchscript/torch_errors.h"
#include "base/large_buffer.h"

namespace weft {
namespace {

// The sizes of the large buffers handed out, by address: the raw deleter gets only the address.
std::mutex large_mu;
std::unordered_map<void*, size_t>& LargeBuffers() {
  static auto* buffers = new std::unordered_map<void*, size_t>();  // never destroyed: tensors may outlive main()
  return *buffers;
}

// The small buffers' deleter: torch's default CPU allocator's.
c10::DeleterFnPtr DefaultDeleter() { return c10::GetDefaultCPUAllocator()->raw_deleter(); }

void Release(void* data) {
  size_t size = 0;
  {
    std::lock_guard lock(large_mu);
    auto it = LargeBuffers().find(data);
    if (it != LargeBuffers().end()) {
      size = it->second;
      LargeBuffers().erase(it);
    }
  }
  if (size > 0) {
    UnmapLargeBuffer(data, size);
  } else {
    DefaultDeleter()(data);
  }
}

// A data pointer whose context is the data itself, as torch's default CPU allocator makes them: the raw
// allocation API (raw_allocate / raw_deallocate) relies on it.
c10::DataPtr Allocate(size_t n) {
  if (n < kLargeBufferBytes) return c10::GetDefaultCPUAllocator()->allocate(n);
  void* data = MapLargeBuffer(n);
  // An OutOfMemoryError, and a marker that survives the TorchScript interpreter's rethrow as text.
  TORCH_CHECK_WITH(OutOfMemoryError, data != nullptr, kWeftTorchOutOfMemory, ": cannot map ", n, " bytes for a tensor");
  {
    std::lock_guard lock(large_mu);
    LargeBuffers().emplace(data, n);
  }
  return {data, data, &Release, c10::Device(c10::DeviceType::CPU)};
}

// allocate() is const up to torch 2.2 and not since 2.3, which also made copy_data() pure: of these two spellings,
// the one that matches the torch being built against is the one that is not abstract, and the only one made. No
// `override` on either (it would not compile in the other); the using-declaration keeps the base's overload visible.
class ConstApiAllocator : public c10::Allocator {
 public:
  using c10::Allocator::allocate;
  c10::DataPtr allocate(size_t n) const { return Allocate(n); }
  c10::DeleterFnPtr raw_deleter() const { return &Release; }
  void copy_data(void* dest, const void* src, size_t count) const { std::memcpy(dest, src, count); }
};
class MutableApiAllocator : public c10::Allocator {
 public:
  using c10::Allocator::allocate;
  c10::DataPtr allocate(size_t n) { return Allocate(n); }
  c10::DeleterFnPtr raw_deleter() const { return &Release; }
  void copy_data(void* dest, const void* src, size_t count) const { std::memcpy(dest, src, count); }
};
using LargeBufferAllocator =
    std::conditional_t<std::is_abstract_v<ConstApiAllocator>, MutableApiAllocator, ConstApiAllocator>;

}  // namespace

void InstallTorchLargeBufferAllocator() {
  static LargeBufferAllocator* allocator = [] {
    auto* made = new LargeBufferAllocator();  // never destroyed: torch may allocate until the process ends
    // Above the default's priority (0), so that the default does not come back; below any allocator that someone
    // installed on purpose with a higher one.
    c10::SetCPUAllocator(made, /*priority=*/1);
    return made;
  }();
  (void)allocator;
}

}  // namespace weft
