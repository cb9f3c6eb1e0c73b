// CUDA regions on a real GPU: the registry opens a handle that another process (cuda_ipc_exporter) exported, reads
// inputs from it and writes outputs into it. Skipped without a GPU (shared_memory_test covers the registry's logic
// there with host memory standing in).
#include <gtest/gtest.h>

#include "device/cuda/cuda_device.h"
#include "device/cuda/testing/exporter_process.h"
#include "frontend/shm/shared_memory.h"

namespace weft {
namespace {

TEST(SharedMemoryCudaTest, RegionsOfAnotherProcessesGpuMemoryServeInputsAndOutputs) {
  if (std::string why = CudaUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
  testing::ExporterProcess exporter(WEFT_CUDA_IPC_EXPORTER, 0, 1 << 16);
  std::vector<std::byte> handle = exporter.Handle();
  ASSERT_EQ(handle.size(), kCudaIpcHandleBytes) << "the exporter failed";
  ASSERT_TRUE(SharedMemoryRegistry::CudaAvailable());

  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.RegisterCuda("gpu", handle, 0, 1 << 16).ok());
  EXPECT_EQ(registry.RegisterCuda("too_large", handle, 0, uint64_t{1} << 40).code(), StatusCode::kInvalidArgument);
  auto regions = registry.CudaRegions("");
  ASSERT_TRUE(regions.ok());
  ASSERT_EQ(regions->size(), 1u);

  auto input = SharedMemoryInput(registry, {"gpu", 256, 64}, "x", DataType::kUint8, {64});
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(input->bytes()[i], testing::Pattern(256 + i)) << i;

  std::vector<std::byte> values(32, std::byte{0x5a});
  Tensor output = Tensor::FromBytes("y", DataType::kUint8, {32}, values);
  auto slice = registry.Slice({"gpu", 4096, 32});
  ASSERT_TRUE(slice.ok()) << slice.status().ToString();
  ASSERT_TRUE(WriteSharedMemoryOutput(output, *slice).ok());
  EXPECT_EQ(exporter.Read(4096, 32), values);
  EXPECT_EQ(exporter.Read(4128, 1)[0], testing::Pattern(4128));

  registry.UnregisterAllCuda();
  // The slice still holds the opened handle.
  ASSERT_TRUE(WriteSharedMemoryOutput(output, *slice).ok());
}

}  // namespace
}  // namespace weft
