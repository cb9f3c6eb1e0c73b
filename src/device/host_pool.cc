#include "device/host_pool.h"

#include <bit>

namespace weft {
namespace {

constexpr size_t kMinClass = 4096;
constexpr size_t kMaxClass = size_t{256} << 20;

// The size class of a request; 0 = too large to cache, allocated exactly.
size_t SizeClass(size_t bytes) {
  if (bytes > kMaxClass) return 0;
  return std::max(kMinClass, std::bit_ceil(bytes));
}

}  // namespace

std::shared_ptr<HostPool> HostPool::Create(Allocator allocator, size_t max_cached_bytes) {
  return std::shared_ptr<HostPool>(new HostPool(std::move(allocator), max_cached_bytes));
}

HostPool::~HostPool() {
  for (auto& [size, blocks] : free_) {
    for (void* b : blocks) allocator_.free(b);
  }
}

void HostPool::Trim() {
  std::map<size_t, std::vector<void*>> blocks;
  {
    std::lock_guard lock(mu_);
    blocks.swap(free_);
    cached_ = 0;
  }
  // Outside the lock: freeing pinned memory takes milliseconds and synchronizes the device.
  for (auto& [size, list] : blocks) {
    for (void* b : list) allocator_.free(b);
  }
}

Result<Buffer> HostPool::Allocate(size_t bytes) {
  const size_t size_class = SizeClass(bytes);
  const size_t size = size_class == 0 ? bytes : size_class;
  void* block = nullptr;
  {
    std::lock_guard lock(mu_);
    if (size_class != 0) {
      auto it = free_.find(size_class);
      if (it != free_.end() && !it->second.empty()) {
        block = it->second.back();
        it->second.pop_back();
        cached_ -= size_class;
      }
    }
  }
  if (block == nullptr) {
    block = allocator_.allocate(size);
    if (block == nullptr) {
      return ResourceExhausted("cannot allocate " + std::to_string(size) + " bytes of host memory");
    }
    std::lock_guard lock(mu_);
    ++allocations_;
  }
  Buffer buffer;
  buffer.owner =
      std::shared_ptr<void>(block, [pool = shared_from_this(), size_class](void* b) { pool->Release(b, size_class); });
  buffer.data = static_cast<std::byte*>(block);
  buffer.size = bytes;
  buffer.place = allocator_.place;
  return buffer;
}

void HostPool::Release(void* block, size_t size_class) {
  {
    std::lock_guard lock(mu_);
    if (size_class != 0 && cached_ + size_class <= max_cached_) {
      free_[size_class].push_back(block);
      cached_ += size_class;
      return;
    }
  }
  allocator_.free(block);
}

size_t HostPool::cached_bytes() const {
  std::lock_guard lock(mu_);
  return cached_;
}

size_t HostPool::allocations() const {
  std::lock_guard lock(mu_);
  return allocations_;
}

}  // namespace weft
