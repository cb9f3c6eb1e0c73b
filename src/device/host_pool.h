#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "base/result.h"
#include "device/device.h"

namespace weft {

// Reuses allocations by size class (powers of two from 4 KiB up to 256 MiB; larger ones are not cached), so that
// steady traffic stops calling the allocator: cudaHostAlloc takes milliseconds and synchronizes the device.
// A Buffer's owner returns its block to the pool; the pool lives as long as its buffers. Thread-safe.
class HostPool : public std::enable_shared_from_this<HostPool> {
 public:
  struct Allocator {
    std::function<void*(size_t bytes)> allocate;  // null on failure
    std::function<void(void* block)> free;
    MemoryPlace place;  // reported on every buffer
  };

  // Keeps at most `max_cached_bytes` of free blocks; beyond, freed blocks go back to the allocator.
  static std::shared_ptr<HostPool> Create(Allocator allocator, size_t max_cached_bytes);
  ~HostPool();  // frees the cached blocks

  // ResourceExhausted when the allocator fails.
  Result<Buffer> Allocate(size_t bytes);
  // Gives every cached free block back to the allocator (after an out-of-memory: the next allocations are slower).
  void Trim();

  size_t cached_bytes() const;
  // Blocks taken from the allocator so far (tests check that reuse happens).
  size_t allocations() const;

 private:
  HostPool(Allocator allocator, size_t max_cached_bytes)
      : allocator_(std::move(allocator)), max_cached_(max_cached_bytes) {}
  void Release(void* block, size_t size_class);

  const Allocator allocator_;
  const size_t max_cached_;

  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // guarded by mu_; size class -> blocks
  size_t cached_ = 0;                          // guarded by mu_
  size_t allocations_ = 0;                     // guarded by mu_
};

}  // namespace weft
