#include "device/cuda/cuda_ipc.h"

#include <gtest/gtest.h>

#include "device/cuda/cuda_device.h"
#include "device/cuda/testing/exporter_process.h"

namespace weft {
namespace {

using testing::ExporterProcess;
using testing::Pattern;

constexpr uint64_t kBytes = 1 << 20;

class CudaIpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = CudaUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
  }
};

TEST_F(CudaIpcTest, AnotherProcessesMemoryIsReadAndWrittenThroughItsHandle) {
  ExporterProcess exporter(WEFT_CUDA_IPC_EXPORTER, 0, kBytes);
  std::vector<std::byte> handle = exporter.Handle();
  ASSERT_EQ(handle.size(), kCudaIpcHandleBytes) << "the exporter failed";
  auto buffer = OpenCudaIpcBuffer(0, handle);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  // The driver reports the allocation, which may be rounded up; never less than was asked for.
  EXPECT_GE((*buffer)->byte_size(), kBytes);
  EXPECT_EQ((*buffer)->device_id(), 0);

  std::vector<std::byte> read(4096);
  ASSERT_TRUE((*buffer)->Read(kBytes - read.size(), read).ok());
  for (size_t i = 0; i < read.size(); ++i) ASSERT_EQ(read[i], Pattern(kBytes - read.size() + i)) << i;

  std::vector<std::byte> written = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{250}};
  ASSERT_TRUE((*buffer)->Write(1000, written).ok());
  EXPECT_EQ(exporter.Read(1000, 4), written);
  EXPECT_EQ(exporter.Read(996, 4)[3], Pattern(999));

  const uint64_t size = (*buffer)->byte_size();
  EXPECT_EQ((*buffer)->Read(size - 2, read).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*buffer)->Write(UINT64_MAX, written).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*buffer)->Read(size, std::span<std::byte>()).ok());
}

TEST_F(CudaIpcTest, HandlesThatNameNothingAreRefused) {
  std::vector<std::byte> zeros(kCudaIpcHandleBytes);
  EXPECT_EQ(OpenCudaIpcBuffer(0, zeros).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenCudaIpcBuffer(0, std::span(zeros).first(10)).status().code(), StatusCode::kInvalidArgument);
  ExporterProcess exporter(WEFT_CUDA_IPC_EXPORTER, 0, kBytes);
  std::vector<std::byte> handle = exporter.Handle();
  ASSERT_EQ(handle.size(), kCudaIpcHandleBytes);
  EXPECT_EQ(OpenCudaIpcBuffer(4096, handle).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenCudaIpcBuffer(-1, handle).status().code(), StatusCode::kInvalidArgument);
  // This process's own export cannot be opened here: CUDA's rule, reported rather than crashed on.
  auto own = ExportCudaBuffer(0, 4096);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  Result<std::shared_ptr<CudaSharedBuffer>> reopened = OpenCudaIpcBuffer(0, (*own)->handle());
  if (!reopened.ok()) {
    EXPECT_EQ(reopened.status().code(), StatusCode::kInvalidArgument);
  }
  // The same handle opened twice from here is two references to one mapping; closing one leaves the other.
  auto first = OpenCudaIpcBuffer(0, handle);
  auto second = OpenCudaIpcBuffer(0, handle);
  ASSERT_TRUE(first.ok() && second.ok());
  first->reset();
  std::vector<std::byte> byte(1);
  ASSERT_TRUE((*second)->Read(7, byte).ok());
  EXPECT_EQ(byte[0], Pattern(7));
}

TEST(CudaIpcWithoutGpuTest, SaysWhy) {
  if (CudaUnavailableReason().empty()) GTEST_SKIP() << "this machine has a GPU";
  std::vector<std::byte> handle(kCudaIpcHandleBytes);
  Status open = OpenCudaIpcBuffer(0, handle).status();
  EXPECT_EQ(open.code(), StatusCode::kUnimplemented);
  EXPECT_NE(open.message().find("needs a GPU"), std::string::npos) << open.message();
  EXPECT_EQ(ExportCudaBuffer(0, 16).status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace weft
