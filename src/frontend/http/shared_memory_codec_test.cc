#include "frontend/http/shared_memory_codec.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "frontend/http/infer_codec.h"
#include "frontend/http/request_body.h"
#include "frontend/http/testing/bytes.h"

namespace weft {
namespace {

using weft::testing::Bytes;

TEST(SharedMemoryCodecTest, DecodesRegistrations) {
  auto r = DecodeSharedMemoryRegistration(Bytes(R"({"key":"/in","offset":64,"byte_size":1024})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->key, "/in");
  EXPECT_EQ(r->offset, 64u);
  EXPECT_EQ(r->byte_size, 1024u);
  auto no_offset = DecodeSharedMemoryRegistration(Bytes(R"({"key":"k","byte_size":8})"));
  ASSERT_TRUE(no_offset.ok());
  EXPECT_EQ(no_offset->offset, 0u);
  for (const char* bad : {R"({"byte_size":8})", R"({"key":"k"})", R"({"key":1,"byte_size":8})",
                          R"({"key":"k","byte_size":-8})", R"({"key":"k","byte_size":8,"offset":1.5})", "[]", "{"}) {
    EXPECT_EQ(DecodeSharedMemoryRegistration(Bytes(bad)).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SharedMemoryCodecTest, EncodesStatus) {
  EXPECT_EQ(EncodeSharedMemoryStatus({}), "[]");
  EXPECT_EQ(EncodeSharedMemoryStatus({{"a", "/k", 8, 16}}), R"([{"name":"a","key":"/k","offset":8,"byte_size":16}])");
}

// A request body as the server lays it out (padded), decoded with a registry.
Result<DecodedInferRequest> DecodeWith(std::string_view json, const SharedMemoryRegistry* registry) {
  auto body = std::make_shared<RequestBody>();
  body->Prepare(json.size(), 0);
  std::memcpy(body->Append(json.size()), json.data(), json.size());
  InferBody view{body->bytes(), body, std::nullopt, registry};
  return DecodeInferRequest(view, SteadyTime());
}

class HttpSharedMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = "/weft_http_shm_test_" + std::to_string(getpid());
    int fd = shm_open(key_.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 4096), 0);
    data_ = static_cast<std::byte*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
    ASSERT_TRUE(registry_.Register("r", key_, 0, 4096).ok());
  }
  void TearDown() override {
    munmap(data_, 4096);
    shm_unlink(key_.c_str());
  }
  std::string key_;
  std::byte* data_ = nullptr;
  SharedMemoryRegistry registry_;
};

TEST_F(HttpSharedMemoryTest, InputsComeFromAndOutputsGoToTheRegion) {
  float values[3] = {1, 2, 3};
  std::memcpy(data_ + 128, values, sizeof(values));
  auto decoded =
      DecodeWith(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3],"parameters":{"shared_memory_region":"r",)"
                 R"("shared_memory_offset":128,"shared_memory_byte_size":12}}],)"
                 R"("outputs":[{"name":"y","parameters":{"shared_memory_region":"r","shared_memory_offset":1024,)"
                 R"("shared_memory_byte_size":64}},{"name":"z"}]})",
                 &registry_);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const Tensor& x = decoded->request->inputs[0];
  EXPECT_EQ(x.as<float>()[2], 3.0f);
  ASSERT_EQ(decoded->output_format.shared_memory.count("y"), 1u);

  InferenceResponse response{.model_name = "m", .model_version = 1};
  response.outputs.push_back(x);
  response.outputs.back().set_name("y");
  response.outputs.push_back(x);
  response.outputs.back().set_name("z");
  auto encoded = EncodeInferResponse(response, decoded->output_format);
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  // Listed as Triton lists it: no data and no parameters.
  EXPECT_NE(encoded->json.find(R"({"name":"y","datatype":"FP32","shape":[3]})"), std::string::npos) << encoded->json;
  EXPECT_NE(encoded->json.find(R"("name":"z","datatype":"FP32","shape":[3],"data":[1,2,3])"), std::string::npos)
      << encoded->json;
  float back[3];
  std::memcpy(back, data_ + 1024, sizeof(back));
  EXPECT_EQ(back[1], 2.0f);
}

TEST_F(HttpSharedMemoryTest, BadReferencesAreErrors) {
  auto expect = [&](std::string_view parameters, StatusCode code, std::string_view substring) {
    std::string json =
        R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":)" + std::string(parameters) + "}]}";
    auto decoded = DecodeWith(json, &registry_);
    ASSERT_FALSE(decoded.ok()) << parameters;
    EXPECT_EQ(decoded.status().code(), code) << decoded.status().ToString();
    EXPECT_NE(decoded.status().message().find(substring), std::string::npos) << decoded.status().message();
  };
  expect(R"({"shared_memory_region":"r","shared_memory_offset":4093,"shared_memory_byte_size":4})",
         StatusCode::kInvalidArgument, "exceeds");
  expect(R"({"shared_memory_region":"nope","shared_memory_byte_size":4})", StatusCode::kNotFound, "nope");
  expect(R"({"shared_memory_region":"r"})", StatusCode::kInvalidArgument, "shared_memory_byte_size");
  expect(R"({"shared_memory_region":"r","shared_memory_byte_size":-4})", StatusCode::kInvalidArgument, "non-negative");
  expect(R"({"shared_memory_region":"r","shared_memory_byte_size":4,"binary_data_size":4})",
         StatusCode::kInvalidArgument, "also carries data");
  expect(R"({"shared_memory_region":"r","shared_memory_byte_size":4,"shared_memory_typo":1})",
         StatusCode::kInvalidArgument, "shared_memory_typo");
  auto off = DecodeWith(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"shared_memory_region":"r",)"
                        R"("shared_memory_byte_size":4}}]})",
                        nullptr);
  EXPECT_EQ(off.status().code(), StatusCode::kUnimplemented);
}

TEST(CudaSharedMemoryCodecTest, DecodesRegistrationsWithBase64Handles) {
  // base64 of the bytes 0, 1, ..., 63, as Triton's clients send a cudaIpcMemHandle_t.
  const std::string b64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw==";
  auto r = DecodeCudaSharedMemoryRegistration(
      Bytes(R"({"raw_handle":{"b64":")" + b64 + R"("},"device_id":1,"byte_size":4096})"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->raw_handle.size(), 64u);
  EXPECT_EQ(r->raw_handle[63], std::byte{63});
  EXPECT_EQ(r->device_id, 1);
  EXPECT_EQ(r->byte_size, 4096u);
  // Padding of one and of none.
  auto one = DecodeCudaSharedMemoryRegistration(Bytes(R"({"raw_handle":{"b64":"YWI="},"device_id":0,"byte_size":1})"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->raw_handle.size(), 2u);
  auto none = DecodeCudaSharedMemoryRegistration(Bytes(R"({"raw_handle":{"b64":"YWJj"},"device_id":0,"byte_size":1})"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->raw_handle.size(), 3u);

  for (const char* bad :
       {R"({"device_id":0,"byte_size":1})", R"({"raw_handle":{"b64":"YWJj"},"byte_size":1})",
        R"({"raw_handle":{"b64":"YWJj"},"device_id":0})", R"({"raw_handle":"YWJj","device_id":0,"byte_size":1})",
        R"({"raw_handle":{"b64":7},"device_id":0,"byte_size":1})",
        R"({"raw_handle":{"b64":"YWJ"},"device_id":0,"byte_size":1})",
        R"({"raw_handle":{"b64":"Y!Jj"},"device_id":0,"byte_size":1})",
        R"({"raw_handle":{"b64":" YWJj"},"device_id":0,"byte_size":1})",
        R"({"raw_handle":{"b64":"YWJj"},"device_id":-1,"byte_size":1})",
        R"({"raw_handle":{"b64":"YWJj"},"device_id":0,"byte_size":-1})",
        R"({"raw_handle":{"b64":"YWJj"},"device_id":"0","byte_size":1})", "[]", "{"}) {
    auto decoded = DecodeCudaSharedMemoryRegistration(Bytes(bad));
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(CudaSharedMemoryCodecTest, EncodesStatus) {
  EXPECT_EQ(EncodeCudaSharedMemoryStatus({{"in", 0, 64}, {"out\"", 1, 8}}),
            R"([{"name":"in","device_id":0,"byte_size":64},{"name":"out\"","device_id":1,"byte_size":8}])");
  EXPECT_EQ(EncodeCudaSharedMemoryStatus({}), "[]");
}

}  // namespace
}  // namespace weft
