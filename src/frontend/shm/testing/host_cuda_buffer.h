#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "device/cuda/cuda_ipc.h"

namespace weft::testing {

// Host memory standing in for another process's GPU allocation, for tests and fuzz targets of the code above the
// CUDA layer (the registry, the codecs, the frontends) on machines without a GPU. It keeps the contract that
// matters there: bounds-checked copies in and out, never a pointer. The real one is tested on a GPU
// (device/cuda/cuda_ipc_test.cc).
class HostCudaBuffer final : public CudaSharedBuffer {
 public:
  HostCudaBuffer(int device_id, std::span<const std::byte, kCudaIpcHandleBytes> handle, size_t byte_size)
      : device_id_(device_id), bytes_(byte_size) {
    std::copy(handle.begin(), handle.end(), handle_.begin());
  }

  int device_id() const override { return device_id_; }
  uint64_t byte_size() const override { return bytes_.size(); }
  std::span<const std::byte, kCudaIpcHandleBytes> handle() const override { return handle_; }

  Status Read(uint64_t offset, std::span<std::byte> destination) const override {
    std::lock_guard lock(mu_);
    WEFT_RETURN_IF_ERROR(Check(offset, destination.size()));
    std::copy_n(bytes_.begin() + static_cast<ptrdiff_t>(offset), destination.size(), destination.begin());
    return Status::Ok();
  }
  Status Write(uint64_t offset, std::span<const std::byte> source) override {
    std::lock_guard lock(mu_);
    WEFT_RETURN_IF_ERROR(Check(offset, source.size()));
    std::copy(source.begin(), source.end(), bytes_.begin() + static_cast<ptrdiff_t>(offset));
    return Status::Ok();
  }

  // The whole allocation, as the exporting process would see it.
  std::vector<std::byte> Contents() const {
    std::lock_guard lock(mu_);
    return bytes_;
  }

 private:
  Status Check(uint64_t offset, size_t size) const {
    if (offset > bytes_.size() || size > bytes_.size() - offset) return InvalidArgument("outside the buffer");
    return Status::Ok();
  }

  const int device_id_;
  std::array<std::byte, kCudaIpcHandleBytes> handle_{};
  mutable std::mutex mu_;
  std::vector<std::byte> bytes_;
};

}  // namespace weft::testing
