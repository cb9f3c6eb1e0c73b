#pragma once

#include <memory>

#include "model/backend.h"

namespace weft {

// The CUDA side of the TorchScript backend. CMake compiles torch_stream_cuda.cc when libtorch has CUDA and
// torch_stream_cpu.cc otherwise, so a CPU libtorch builds and behaves exactly as before and no #ifdef is needed.

// True when libtorch has CUDA and sees a GPU: instances of KIND_GPU or KIND_AUTO then load onto it.
bool TorchCudaAvailable();

// While it lives, torch's current CUDA stream on the stream's device is `stream` (a cudaStream_t handed over by the
// multiplexer), so that every kernel and copy torch launches goes there. For a CPU stream, or a CPU libtorch, it
// does nothing.
class TorchStreamScope {
 public:
  virtual ~TorchStreamScope() = default;
};
std::unique_ptr<TorchStreamScope> EnterTorchStream(const ExecutionStream& stream);

// Gives the blocks that torch's CUDA caching allocator holds unused back to the driver, on every device: after an
// execution ran out of memory, its retry (and the other models on the device) find them free, where a fragmented
// cache would fail them again. Blocks still in use, or recorded on a stream that has not reached them, stay.
// Thread-safe; it synchronizes the devices, so call it only after a failure. Does nothing for a CPU libtorch.
void ReleaseTorchCudaCache();

}  // namespace weft
