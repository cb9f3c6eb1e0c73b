// CUDA shared memory over HTTP end to end, on a GPU: the real server in-process, a client process
// (cuda_ipc_exporter) that owns GPU memory and shares it by its IPC handle, and the identity model reading its input
// from that memory and writing its output back into it. Skipped without a GPU.

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <string>

#include "device/cuda/cuda_device.h"
#include "device/cuda/testing/exporter_process.h"
#include "frontend/http/testing/http_test_client.h"
#include "test_server.h"

namespace weft::testing {
namespace {

std::string Base64(std::span<const std::byte> bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

TEST(HttpCudaSharedMemoryTest, TheIdentityModelReadsAndWritesAnotherProcessesGpuMemory) {
  if (std::string why = CudaUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
  TestServerOptions options;
  options.example_models = {"identity"};
  options.allow_shared_memory = true;
  auto server = TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ExporterProcess exporter(WEFT_CUDA_IPC_EXPORTER, 0, 1 << 16);
  std::vector<std::byte> handle = exporter.Handle();
  ASSERT_EQ(handle.size(), kCudaIpcHandleBytes) << "the exporter failed";
  HttpTestClient client((*server)->port());

  EXPECT_NE(client.Get("/v2").body.find("cuda_shared_memory"), std::string::npos);
  TestResponse registered =
      client.Post("/v2/cudasharedmemory/region/gpu/register",
                  R"({"raw_handle":{"b64":")" + Base64(handle) + R"("},"device_id":0,"byte_size":65536})");
  ASSERT_EQ(registered.status, 200u) << registered.body;
  TestResponse status = client.Get("/v2/cudasharedmemory/status");
  EXPECT_EQ(status.body, R"([{"name":"gpu","device_id":0,"byte_size":65536}])");
  EXPECT_EQ(client
                .Post("/v2/cudasharedmemory/region/big/register",
                      R"({"raw_handle":{"b64":")" + Base64(handle) + R"("},"device_id":0,"byte_size":1099511627776})")
                .status,
            400u);

  // 16 floats of the exporter's pattern at offset 0 in; out at offset 1024.
  TestResponse inferred = client.Post("/v2/models/identity/infer", R"({
      "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [16],
                  "parameters": {"shared_memory_region": "gpu", "shared_memory_byte_size": 64}}],
      "outputs": [{"name": "OUTPUT0", "parameters": {"shared_memory_region": "gpu", "shared_memory_offset": 1024,
                                                     "shared_memory_byte_size": 64}}]})");
  ASSERT_EQ(inferred.status, 200u) << inferred.body;
  EXPECT_EQ(inferred.body.find("\"data\""), std::string::npos) << "the output travelled in the response";
  std::vector<std::byte> in = exporter.Read(0, 64);
  ASSERT_EQ(in.size(), 64u);
  EXPECT_EQ(exporter.Read(1024, 64), in);

  // Out of the region's bounds: refused before anything is copied.
  TestResponse outside = client.Post("/v2/models/identity/infer", R"({
      "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [16],
                  "parameters": {"shared_memory_region": "gpu", "shared_memory_offset": 65500,
                                 "shared_memory_byte_size": 64}}]})");
  EXPECT_EQ(outside.status, 400u) << outside.body;

  EXPECT_EQ(client.Post("/v2/cudasharedmemory/region/gpu/unregister", "").status, 200u);
  EXPECT_EQ(client.Get("/v2/cudasharedmemory/status").body, "[]");
}

}  // namespace
}  // namespace weft::testing
