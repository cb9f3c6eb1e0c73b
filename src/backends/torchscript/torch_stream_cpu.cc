// A libtorch without CUDA: there is no stream to enter and no GPU to load onto.
#include "backends/torchscript/torch_stream.h"

namespace weft {

bool TorchCudaAvailable() { return false; }

std::unique_ptr<TorchStreamScope> EnterTorchStream(const ExecutionStream&) { return nullptr; }

void ReleaseTorchCudaCache() {}

}  // namespace weft
