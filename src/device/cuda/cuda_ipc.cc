#include "device/cuda/cuda_ipc.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <array>
#include <cstring>
#include <string>

#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_status.h"

namespace weft {

namespace {

// Makes `device` current for one call and puts back the thread's previous device: a frontend thread that copies
// for a region on device 1 must not leave later CUDA calls of that thread on device 1.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    status_ = previous_ == device ? cudaSuccess : cudaSetDevice(device);
  }
  ~CurrentDevice() {
    if (previous_ >= 0 && status_ == cudaSuccess) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
  cudaError_t status() const { return status_; }

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

// cuMemGetAddressRange from the driver through the runtime: linking libcuda would make weft fail to start on a
// machine without the driver, where the runtime only reports that there is no GPU.
using AddressRangeFunction = CUresult (*)(CUdeviceptr* base, size_t* size, CUdeviceptr pointer);

Result<AddressRangeFunction> AddressRange() {
  static const Result<AddressRangeFunction> function = []() -> Result<AddressRangeFunction> {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &entry, CUDART_VERSION, cudaEnableDefault, &found),
        "cudaGetDriverEntryPointByVersion(cuMemGetAddressRange)");
    if (found != cudaDriverEntryPointSuccess || entry == nullptr) {
      return Internal("the CUDA driver has no cuMemGetAddressRange");
    }
    return reinterpret_cast<AddressRangeFunction>(entry);
  }();
  return function;
}

Status CheckDevice(int device_id) {
  if (std::string why = CudaUnavailableReason(); !why.empty()) {
    return Unimplemented("CUDA shared memory needs a GPU: " + why);
  }
  int count = 0;
  WEFT_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (device_id < 0 || device_id >= count) {
    return InvalidArgument("no CUDA device " + std::to_string(device_id) + " (this machine has " +
                           std::to_string(count) + ")");
  }
  return Status::Ok();
}

class CudaBuffer final : public CudaSharedBuffer {
 public:
  enum class Origin { kImported, kExported };

  CudaBuffer(Origin origin, int device_id, std::byte* data, uint64_t byte_size,
             const std::array<std::byte, kCudaIpcHandleBytes>& handle, cudaStream_t stream)
      : origin_(origin), device_id_(device_id), data_(data), byte_size_(byte_size), handle_(handle), stream_(stream) {}

  ~CudaBuffer() override {
    CurrentDevice device(device_id_);
    cudaStreamDestroy(stream_);
    if (origin_ == Origin::kImported) {
      cudaIpcCloseMemHandle(data_);
    } else {
      cudaFree(data_);
    }
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  int device_id() const override { return device_id_; }
  uint64_t byte_size() const override { return byte_size_; }
  std::span<const std::byte, kCudaIpcHandleBytes> handle() const override { return handle_; }

  Status Read(uint64_t offset, std::span<std::byte> destination) const override {
    WEFT_RETURN_IF_ERROR(CheckWindow(offset, destination.size()));
    if (destination.empty()) return Status::Ok();
    return Copy(destination.data(), data_ + offset, destination.size(), cudaMemcpyDeviceToHost, "reading");
  }

  Status Write(uint64_t offset, std::span<const std::byte> source) override {
    WEFT_RETURN_IF_ERROR(CheckWindow(offset, source.size()));
    if (source.empty()) return Status::Ok();
    return Copy(data_ + offset, source.data(), source.size(), cudaMemcpyHostToDevice, "writing");
  }

 private:
  Status CheckWindow(uint64_t offset, size_t size) const {
    if (offset > byte_size_ || size > byte_size_ - offset) {
      return InvalidArgument("bytes [" + std::to_string(offset) + ", " + std::to_string(offset) + " + " +
                             std::to_string(size) + ") are outside the CUDA buffer of " + std::to_string(byte_size_) +
                             " bytes");
    }
    return Status::Ok();
  }

  Status Copy(void* to, const void* from, size_t size, cudaMemcpyKind kind, const char* what) const {
    CurrentDevice device(device_id_);
    WEFT_CUDA_RETURN_IF_ERROR(device.status(), "cudaSetDevice");
    WEFT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to, from, size, kind, stream_),
                              std::string("cudaMemcpyAsync ") + what + " CUDA shared memory");
    WEFT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_),
                              std::string("cudaStreamSynchronize ") + what + " CUDA shared memory");
    return Status::Ok();
  }

  const Origin origin_;
  const int device_id_;
  std::byte* const data_;
  const uint64_t byte_size_;
  const std::array<std::byte, kCudaIpcHandleBytes> handle_;
  // Copies go through this stream and are waited for, so they never wait for (or on) the serving streams, and the
  // legacy default stream is never involved.
  cudaStream_t const stream_;
};

static_assert(sizeof(cudaIpcMemHandle_t) == kCudaIpcHandleBytes);

}  // namespace

Result<std::shared_ptr<CudaSharedBuffer>> OpenCudaIpcBuffer(int device_id, std::span<const std::byte> handle) {
  if (handle.size() != kCudaIpcHandleBytes) {
    return InvalidArgument("a CUDA IPC handle has " + std::to_string(kCudaIpcHandleBytes) + " bytes, not " +
                           std::to_string(handle.size()));
  }
  WEFT_RETURN_IF_ERROR(CheckDevice(device_id));
  WEFT_ASSIGN_OR_RETURN(AddressRangeFunction address_range, AddressRange());
  CurrentDevice device(device_id);
  WEFT_CUDA_RETURN_IF_ERROR(device.status(), "cudaSetDevice");

  cudaIpcMemHandle_t ipc;
  std::memcpy(&ipc, handle.data(), kCudaIpcHandleBytes);
  void* data = nullptr;
  if (cudaError_t error = cudaIpcOpenMemHandle(&data, ipc, cudaIpcMemLazyEnablePeerAccess); error != cudaSuccess) {
    cudaGetLastError();  // not sticky; cleared so that the thread's next call does not report it
    return InvalidArgument(std::string("CUDA cannot open the IPC handle on device ") + std::to_string(device_id) +
                           ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
                           "); a handle must come from cudaIpcGetMemHandle in another process, for memory it "
                           "still holds");
  }
  // The handle names a whole allocation; the client says how much of it is the region, and that is checked
  // against what the driver says the allocation holds.
  CUdeviceptr base = 0;
  size_t allocation = 0;
  const auto pointer = reinterpret_cast<CUdeviceptr>(data);
  if (CUresult result = address_range(&base, &allocation, pointer);
      result != CUDA_SUCCESS || pointer < base || pointer - base > allocation) {
    cudaIpcCloseMemHandle(data);
    return Internal("cuMemGetAddressRange failed for an opened CUDA IPC handle (CUresult " +
                    std::to_string(static_cast<int>(result)) + ")");
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); error != cudaSuccess) {
    cudaIpcCloseMemHandle(data);
    return CudaError(error, "cudaStreamCreateWithFlags");
  }
  std::array<std::byte, kCudaIpcHandleBytes> copy;
  std::memcpy(copy.data(), handle.data(), kCudaIpcHandleBytes);
  return std::shared_ptr<CudaSharedBuffer>(std::make_shared<CudaBuffer>(CudaBuffer::Origin::kImported, device_id,
                                                                        static_cast<std::byte*>(data),
                                                                        allocation - (pointer - base), copy, stream));
}

Result<std::shared_ptr<CudaSharedBuffer>> ExportCudaBuffer(int device_id, uint64_t byte_size) {
  if (byte_size == 0) return InvalidArgument("a CUDA buffer to share needs at least one byte");
  WEFT_RETURN_IF_ERROR(CheckDevice(device_id));
  CurrentDevice device(device_id);
  WEFT_CUDA_RETURN_IF_ERROR(device.status(), "cudaSetDevice");
  void* data = nullptr;
  WEFT_CUDA_RETURN_IF_ERROR(cudaMalloc(&data, byte_size), "cudaMalloc of " + std::to_string(byte_size) + " bytes");
  cudaIpcMemHandle_t ipc;
  cudaStream_t stream = nullptr;
  cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (error == cudaSuccess) error = cudaMemsetAsync(data, 0, byte_size, stream);
  if (error == cudaSuccess) error = cudaStreamSynchronize(stream);
  if (error == cudaSuccess) error = cudaIpcGetMemHandle(&ipc, data);
  if (error != cudaSuccess) {
    if (stream != nullptr) cudaStreamDestroy(stream);
    cudaFree(data);
    return CudaError(error, "sharing a CUDA buffer");
  }
  std::array<std::byte, kCudaIpcHandleBytes> handle;
  std::memcpy(handle.data(), &ipc, kCudaIpcHandleBytes);
  return std::shared_ptr<CudaSharedBuffer>(std::make_shared<CudaBuffer>(
      CudaBuffer::Origin::kExported, device_id, static_cast<std::byte*>(data), byte_size, handle, stream));
}

}  // namespace weft
