#pragma once

#include <cstddef>
#include <memory>

#include "base/result.h"

namespace weft {

// A shared mapping of a client's memory object that the client cannot use to kill the server.
//
// A client may ftruncate its object while the server reads an input from it in place or writes an output to it;
// touching a page past the object's new end raises SIGBUS, whose default action ends the process. Checking the size
// first (fstat) leaves a window, and copying every tensor would give up zero-copy. Instead every mapping is
// registered with one process-wide SIGBUS handler: a fault inside a registered range replaces the whole range with
// private zero pages (mmap MAP_FIXED, async-signal-safe on Linux) and marks the mapping faulted; the faulting
// instruction then runs again and succeeds. Reads see zeros and writes go nowhere, so a request that used a faulted
// mapping is answered with an error (faulted() is checked before the answer), and the mapping stays faulted until
// it is unmapped. A SIGBUS outside every registered range goes to the handler that was installed before, or, if
// there was none, kills the process as it would have.
//
// At most kMaxMappings mappings exist at once in the process (the handler cannot allocate or lock, so the table
// is a fixed array). Thread-safe.
class GuardedMapping {
 public:
  static constexpr size_t kMaxMappings = 65536;

  // Maps `size` bytes of `fd` from offset 0, shared and read-write, and guards them. InvalidArgument for size 0;
  // ResourceExhausted when kMaxMappings are in use; Internal when mmap or installing the handler fails.
  static Result<std::unique_ptr<GuardedMapping>> Map(int fd, size_t size);
  ~GuardedMapping();  // stops guarding, then unmaps
  GuardedMapping(const GuardedMapping&) = delete;
  GuardedMapping& operator=(const GuardedMapping&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  // True once a fault replaced the range with zero pages: what was read since may be zeros, and what was written
  // never reached the object.
  bool faulted() const;

 private:
  GuardedMapping(std::byte* data, size_t size, size_t slot) : data_(data), size_(size), slot_(slot) {}
  std::byte* const data_;
  const size_t size_;
  const size_t slot_;  // this mapping's entry in the handler's table
};

}  // namespace weft
