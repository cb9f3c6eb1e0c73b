#include "loadgen/client_shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "base/checked_math.h"

namespace weft {

namespace {

constexpr uint64_t kAlignment = 64;
constexpr uint64_t kMinUnknownOutputBytes = 100 << 10;
// Each output's window: more than any tensor a server sends in one answer (the offsets below add up at most a
// few of these, far from overflowing).
constexpr uint64_t kMaxOutputRegionBytes = uint64_t{16} << 30;

uint64_t AlignUp(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

Result<std::unique_ptr<ClientSharedMemory>> ClientSharedMemory::Create(std::string key, size_t byte_size) {
  if (byte_size == 0) return InvalidArgument("a shared memory region needs at least one byte");
  int fd = shm_open(key.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return Unavailable("cannot create shared memory '" + key + "': " + std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(byte_size)) != 0) {
    int error = errno;
    close(fd);
    shm_unlink(key.c_str());
    return Unavailable("cannot size shared memory '" + key + "': " + std::strerror(error));
  }
  void* data = mmap(nullptr, byte_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int error = errno;
  close(fd);
  if (data == MAP_FAILED) {
    shm_unlink(key.c_str());
    return Unavailable("cannot map shared memory '" + key + "': " + std::strerror(error));
  }
  return std::unique_ptr<ClientSharedMemory>(
      new ClientSharedMemory(std::move(key), static_cast<std::byte*>(data), byte_size));
}

ClientSharedMemory::~ClientSharedMemory() {
  munmap(data_, byte_size_);
  shm_unlink(key_.c_str());
}

Result<SharedMemoryRun> CreateSharedMemoryRun(const std::vector<GeneratedInput>& inputs, const ModelMetadata& metadata,
                                              bool batches, int64_t batch_size, uint64_t output_byte_size,
                                              SharedMemoryMode mode) {
  SharedMemoryRun run;
  std::string tag = "weft_bench_" + std::to_string(getpid());
  run.input_region = tag + "_inputs";
  run.output_region = tag + "_outputs";

  uint64_t offset = 0;
  uint64_t largest_input = 0;
  for (const GeneratedInput& input : inputs) {
    run.input_placements[input.name] = {run.input_region, offset, input.data.size()};
    offset = AlignUp(offset + input.data.size());
    largest_input = std::max<uint64_t>(largest_input, input.data.size());
  }
  if (mode == SharedMemoryMode::kCuda) {
    WEFT_ASSIGN_OR_RETURN(run.cuda_inputs,
                          ExportCudaBuffer(SharedMemoryRun::kCudaDevice, std::max<uint64_t>(offset, 1)));
  } else {
    WEFT_ASSIGN_OR_RETURN(run.inputs,
                          ClientSharedMemory::Create("/" + run.input_region, std::max<uint64_t>(offset, 1)));
  }
  for (const GeneratedInput& input : inputs) {
    const SharedMemoryPlacement& p = run.input_placements[input.name];
    if (input.data.empty()) continue;
    if (run.cuda_inputs) {
      WEFT_RETURN_IF_ERROR(run.cuda_inputs->Write(p.offset, std::as_bytes(std::span(input.data))));
    } else {
      std::memcpy(run.inputs->data() + p.offset, input.data.data(), input.data.size());
    }
  }

  uint64_t unknown = output_byte_size > 0 ? output_byte_size : std::max(kMinUnknownOutputBytes, largest_input);
  offset = 0;
  for (const TensorMetadata& output : metadata.outputs) {
    // The shape comes from the server's metadata: a product that overflows is a server's error, not a size.
    std::optional<uint64_t> bytes = DataTypeSize(output.datatype);
    for (size_t d = 0; d < output.shape.size() && bytes && *bytes > 0; ++d) {
      int64_t dim = output.shape[d] < 0 && d == 0 && batches ? batch_size : output.shape[d];
      bytes = dim < 0 ? 0 : CheckedMul(*bytes, static_cast<uint64_t>(dim));
    }
    if (!bytes || *bytes > kMaxOutputRegionBytes) {
      return InvalidArgument("output '" + output.name + "': the server's metadata gives it more than " +
                             std::to_string(kMaxOutputRegionBytes >> 30) + " GiB");
    }
    if (*bytes == 0) bytes = unknown;
    run.output_placements[output.name] = {run.output_region, offset, *bytes};
    offset = AlignUp(offset + *bytes);
  }
  if (mode == SharedMemoryMode::kCuda) {
    WEFT_ASSIGN_OR_RETURN(run.cuda_outputs,
                          ExportCudaBuffer(SharedMemoryRun::kCudaDevice, std::max<uint64_t>(offset, 1)));
  } else {
    WEFT_ASSIGN_OR_RETURN(run.outputs,
                          ClientSharedMemory::Create("/" + run.output_region, std::max<uint64_t>(offset, 1)));
  }
  return run;
}

}  // namespace weft
