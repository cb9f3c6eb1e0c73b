#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "device/cuda/cuda_ipc.h"
#include "tensor/tensor.h"

namespace weft {

// The system and CUDA shared memory extensions: clients put tensors in POSIX shared memory objects (shm_open) or in
// GPU memory shared with CUDA IPC, register a window of one under a region name, and then name the region in
// requests instead of sending the bytes. Shared by the HTTP and gRPC frontends, so a region registered over one
// protocol is usable over the other. System and CUDA regions share one namespace of names, as in Triton.

// A registered region as the status calls report it.
struct SharedMemoryRegionStatus {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// A registered CUDA region as the status calls report it.
struct CudaSharedMemoryRegionStatus {
  std::string name;
  int64_t device_id = 0;
  uint64_t byte_size = 0;
};

// Where a tensor lives in a region: the request parameters shared_memory_region, shared_memory_offset (relative
// to the region's own offset) and shared_memory_byte_size.
struct SharedMemoryRef {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

class GuardedMapping;

// A checked window of a region. `owner` keeps the mapping (or the opened CUDA handle) alive, so unregistering a
// region while a request still uses it is safe: the mapping goes away with the last slice.
struct SharedMemorySlice {
  std::string region;
  std::shared_ptr<const void> owner;
  std::byte* data = nullptr;  // null for a CUDA region
  size_t byte_size = 0;
  // The region's mapping (shares `owner`): tells whether the client shrank the object under it.
  std::shared_ptr<const GuardedMapping> mapping;
  // A CUDA region's GPU memory (shares `owner`), read and written through copies from `cuda_offset`: the host
  // cannot address it.
  std::shared_ptr<CudaSharedBuffer> cuda;
  uint64_t cuda_offset = 0;

  // Ok while every byte read or written through the slice was the object's own. InvalidArgument once the client
  // truncated the object under the mapping since the slice was taken: reads may have seen zeros and writes were
  // lost (see GuardedMapping). A frontend checks every slice of a request before it answers.
  Status CheckIntact() const;
};

// Checks a key before shm_open sees it: a key names a POSIX shared memory object and never a file, so it may
// have one leading '/', no other '/', no "..", no NUL, and at most 255 characters. InvalidArgument otherwise.
Status CheckSharedMemoryKey(const std::string& key);

// Checks that [offset, offset + byte_size) lies within `size` bytes without overflowing; InvalidArgument
// naming `what` otherwise.
Status CheckWindow(uint64_t offset, uint64_t byte_size, uint64_t size, const std::string& what);

// The regions registered with this server. Thread-safe; no call blocks on anything but the registry's lock and
// the system calls of registration. Each region holds one descriptor (its size is checked at every use) and one
// guarded mapping, so their number is bounded.
class SharedMemoryRegistry {
 public:
  struct Options {
    size_t max_regions = 1024;  // registrations past it get ResourceExhausted; at most GuardedMapping::kMaxMappings
    // Non-empty: only keys whose name (the key without its leading '/') starts with it may be registered; a
    // leading '/' on the prefix is ignored. A plain string prefix: "cam" admits "camera_x" too, so end it with a
    // separator ("cam_") where that matters. Checked before the object is opened: a refusal tells nothing of what
    // exists.
    std::string key_prefix;
    // Non-empty: the object's owner (as fstat reports it) must be one of these users, so that a client cannot make
    // the server map the memory of another user's processes. Empty: any object the server can open.
    std::vector<uint32_t> allowed_owner_uids;
    // Opens a CUDA region's handle: OpenCudaIpcBuffer, or GPU memory of a unit test's own.
    std::function<Result<std::shared_ptr<CudaSharedBuffer>>(int device_id, std::span<const std::byte> handle)>
        open_cuda_buffer = OpenCudaIpcBuffer;
  };
  SharedMemoryRegistry() : SharedMemoryRegistry(Options{}) {}
  explicit SharedMemoryRegistry(Options options);
  ~SharedMemoryRegistry();
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  static constexpr size_t kMaxRegionNameBytes = 256;

  // Opens the object `key` read-write (never through a symbolic link) and maps it. The window
  // [offset, offset + byte_size) must lie within the object's size as fstat reports it now. InvalidArgument for a
  // bad key, an object that is not a regular memory object, an empty window, a window past the end, a name that is
  // empty, longer than kMaxRegionNameBytes, not UTF-8 or already registered; PermissionDenied for a key outside
  // Options::key_prefix or an object whose owner is not in Options::allowed_owner_uids; NotFound when no object
  // has that key; ResourceExhausted when Options::max_regions are registered or no descriptor is left; Internal
  // when mapping fails.
  Status Register(const std::string& name, const std::string& key, uint64_t offset, uint64_t byte_size);
  // Forgets the system region; slices already handed out stay valid. Unregistering an unknown name (or the name
  // of a CUDA region) is not an error, as in Triton: the call is idempotent.
  void Unregister(const std::string& name);
  void UnregisterAll();

  // One system region (NotFound if unknown), or every one when `name` is empty, in name order.
  Result<std::vector<SharedMemoryRegionStatus>> Regions(const std::string& name) const;

  // Opens the GPU memory that `handle` (a cudaIpcMemHandle_t from another process) names on device `device_id`;
  // the region is its first `byte_size` bytes, which must lie within the allocation. The name is checked as for
  // Register. InvalidArgument for a bad name or one already registered (by either kind), an empty region, a
  // handle that is not kCudaIpcHandleBytes long or that CUDA refuses, a device that does not exist, or a region
  // larger than the allocation; ResourceExhausted at Options::max_regions; Unimplemented without a GPU.
  Status RegisterCuda(const std::string& name, std::span<const std::byte> handle, int64_t device_id,
                      uint64_t byte_size);
  // As Unregister and UnregisterAll, for CUDA regions.
  void UnregisterCuda(const std::string& name);
  void UnregisterAllCuda();
  // As Regions, for CUDA regions.
  Result<std::vector<CudaSharedMemoryRegionStatus>> CudaRegions(const std::string& name) const;
  // Whether this machine can register CUDA regions (CUDA built in and a GPU present), asked once: the server
  // metadata lists the cuda_shared_memory extension only then.
  static bool CudaAvailable();

  // The window `ref` names, checked against the region's window and, for a system region, against the object's
  // size as fstat reports it at this moment (a client that shrank the object since registering is caught here).
  // NotFound for an unknown region; InvalidArgument for a window out of bounds, or for a region whose object
  // was truncated under a request earlier (it must be registered again).
  Result<SharedMemorySlice> Slice(const SharedMemoryRef& ref) const;

 private:
  struct Region;
  Status CheckNewRegion(const std::string& name) const;  // the name, and RoomFor it; takes mu_
  Status RoomFor(const std::string& name) const;         // the name is free and the limit not reached; needs mu_
  Status Insert(std::shared_ptr<Region> region);         // RoomFor again, and the insertion, under one hold of mu_
  const Options options_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Region>> regions_;  // guarded by mu_
};

// An input tensor read from a slice. Fixed-size types view a system region in place when aligned for their type
// (copied otherwise); BYTES tensors are copied before they are checked, so that a client that rewrites the region
// cannot change the length prefixes after the check; a CUDA region is copied to the host. The slice's size must
// equal the tensor's size.
Result<Tensor> SharedMemoryInput(const SharedMemorySlice& slice, const std::string& name, DataType type,
                                 const Shape& shape);
// The same, slicing `ref` from `registry` first.
Result<Tensor> SharedMemoryInput(const SharedMemoryRegistry& registry, const SharedMemoryRef& ref,
                                 const std::string& name, DataType type, const Shape& shape);

// Writes an output's bytes to its slice (for a CUDA region, a copy to the GPU). InvalidArgument when the output is
// larger than the slice.
Status WriteSharedMemoryOutput(const Tensor& output, const SharedMemorySlice& slice);

// Where requested outputs go: output name -> slice. Outputs not listed travel in the response.
using SharedMemoryOutputs = std::map<std::string, SharedMemorySlice>;

// CheckIntact of every input slice and output slice of one request: the first error, or Ok.
Status CheckSharedMemoryIntact(std::span<const SharedMemorySlice> inputs, const SharedMemoryOutputs& outputs);

}  // namespace weft
