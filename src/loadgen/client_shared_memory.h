#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "device/cuda/cuda_ipc.h"
#include "loadgen/bench_options.h"
#include "loadgen/infer_request_builder.h"
#include "loadgen/input_generator.h"
#include "loadgen/model_metadata.h"

namespace weft {

// A POSIX shared memory object that this process creates (shm_open with O_EXCL) and maps; unmapped and unlinked
// when destroyed. Thread-compatible.
class ClientSharedMemory {
 public:
  // `key` is "/name". InvalidArgument for a bad size; Unavailable when the object cannot be made or mapped.
  static Result<std::unique_ptr<ClientSharedMemory>> Create(std::string key, size_t byte_size);
  ~ClientSharedMemory();
  ClientSharedMemory(const ClientSharedMemory&) = delete;
  ClientSharedMemory& operator=(const ClientSharedMemory&) = delete;

  const std::string& key() const { return key_; }
  size_t byte_size() const { return byte_size_; }
  std::byte* data() const { return data_; }

 private:
  ClientSharedMemory(std::string key, std::byte* data, size_t byte_size)
      : key_(std::move(key)), data_(data), byte_size_(byte_size) {}
  std::string key_;
  std::byte* data_;
  size_t byte_size_;
};

// The regions of a shared memory run: every input written once into one object, every output given a window in
// another. All requests of the run share them (outputs are overwritten by each answer, which a benchmark never
// reads). Region names and keys carry the process id, so runs side by side do not collide.
struct SharedMemoryRun {
  // kSystem: the two POSIX objects.
  std::unique_ptr<ClientSharedMemory> inputs;
  std::unique_ptr<ClientSharedMemory> outputs;
  // kCuda: the two allocations on GPU 0 (kCudaDevice), shared by their handles; null for kSystem.
  static constexpr int kCudaDevice = 0;
  std::shared_ptr<CudaSharedBuffer> cuda_inputs;
  std::shared_ptr<CudaSharedBuffer> cuda_outputs;
  std::string input_region, output_region;
  std::map<std::string, SharedMemoryPlacement> input_placements;
  std::map<std::string, SharedMemoryPlacement> output_placements;
};

// Lays out and creates the regions of `mode` (kSystem or kCuda). An output gets the bytes its metadata fixes (the
// batch dim filled in for a model that batches); one whose size is not fixed (another variable dim, BYTES) gets
// `output_byte_size`, or when that is 0 the larger of 100 KiB and the largest input. Windows start on 64-byte
// boundaries. kCuda without a GPU: Unimplemented, saying why.
Result<SharedMemoryRun> CreateSharedMemoryRun(const std::vector<GeneratedInput>& inputs, const ModelMetadata& metadata,
                                              bool batches, int64_t batch_size, uint64_t output_byte_size,
                                              SharedMemoryMode mode = SharedMemoryMode::kSystem);

}  // namespace weft
