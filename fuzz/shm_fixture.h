#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "frontend/shm/shared_memory.h"

namespace weft {

// A POSIX shared memory object of kBytes that a fuzz target creates for itself and keeps mapped: the client's
// side of the shared memory extension. Created (or reopened and resized) by the constructor; unlinked by Unlink
// or else by the destructor (at exit: a crashed run leaves it behind, and the next run reuses it). The mapping
// stays valid after the unlink. Not thread-safe.
class ShmObject {
 public:
  static constexpr size_t kBytes = 4096;

  // Aborts when the object cannot be created: the target cannot run without it.
  explicit ShmObject(std::string key);
  ~ShmObject();
  ShmObject(const ShmObject&) = delete;
  ShmObject& operator=(const ShmObject&) = delete;

  const std::string& key() const { return key_; }
  // Removes the name. A registry that has the object open keeps it; nothing is left behind after a crash.
  void Unlink();
  // Sets the contents to `bytes` (at most kBytes of them), then zeros.
  void Fill(std::span<const std::byte> bytes);

 private:
  std::string key_;
  std::byte* base_ = nullptr;
  bool linked_ = true;
};

// A registry with one region, "region", over the whole of a ShmObject of the target's own, for requests to name.
// Its contents are BYTES elements ("\x04\0\0\0weft"), which read as any other datatype too; Reset puts them back
// before every input, so that what one input writes there (outputs) does not change what the next one reads: a
// crash reproduces from its input alone. Not thread-safe.
class RegisteredRegion {
 public:
  RegisteredRegion();

  void Reset() { object_.Fill(contents_); }
  SharedMemoryRegistry* registry() { return &registry_; }

 private:
  ShmObject object_;
  std::vector<std::byte> contents_;
  SharedMemoryRegistry registry_;
};

}  // namespace weft
