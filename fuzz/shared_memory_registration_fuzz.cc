// Fuzzes the system and CUDA shared memory extensions from a client's calls: the registration body
// (DecodeSharedMemoryRegistration or DecodeCudaSharedMemoryRegistration, frontend/http/shared_memory_codec.cc),
// the key check and the registration (CheckSharedMemoryKey, SharedMemoryRegistry::Register and RegisterCuda,
// frontend/shm/shared_memory.cc) against a real object (a CUDA region: host memory standing in for the GPU's,
// testing::HostCudaBuffer), then an inference request whose inputs and outputs name the region
// (SharedMemoryRegistry::Slice, SharedMemoryInput), each input checked with CheckTensor and each output slice read.
//
// Input framing:
//   line 1: the body of POST v2/systemsharedmemory/region/r/register: {"key", "offset", "byte_size"}, or, when it
//           holds "raw_handle", of POST v2/cudasharedmemory/region/r/register: {"raw_handle": {"b64"},
//           "device_id", "byte_size"} (device 0 exists; any 64-byte handle opens ShmObject::kBytes of memory)
//   line 2: an inference request body (JSON) whose inputs and outputs may name region "r"
//   the rest: what the client wrote into the object "/weft_fuzz_shm" (ShmObject::kBytes bytes, zeros past
//             what is given) before registering it
// Keys other than "/weft_fuzz_shm" are opened as the server would open them (most do not exist); the target only
// reads through them. The object's name is fixed so that seeds and the dictionary can name it: run one instance
// at a time (not -jobs or -fork), or they rewrite each other's contents.

#include <string>

#include "base/log.h"
#include "frontend/http/infer_codec.h"
#include "frontend/http/shared_memory_codec.h"
#include "frontend/shm/testing/host_cuda_buffer.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/shm_fixture.h"

namespace weft {
namespace {

// Registers line 1 as region "r": true when it took.
bool Register(SharedMemoryRegistry* registry, std::string_view registration) {
  if (registration.find("raw_handle") != std::string_view::npos) {
    Result<CudaSharedMemoryRegistration> body =
        DecodeCudaSharedMemoryRegistration(std::as_bytes(std::span(registration)));
    if (!body.ok() || !registry->RegisterCuda("r", body->raw_handle, body->device_id, body->byte_size).ok()) {
      return false;
    }
    Result<std::vector<CudaSharedMemoryRegionStatus>> regions = registry->CudaRegions("r");
    WEFT_CHECK(regions.ok() && regions->size() == 1) << "a registered CUDA region is not listed";
    return true;
  }
  Result<SharedMemoryRegistration> body = DecodeSharedMemoryRegistration(std::as_bytes(std::span(registration)));
  if (!body.ok() || !registry->Register("r", body->key, body->offset, body->byte_size).ok()) return false;
  Result<std::vector<SharedMemoryRegionStatus>> regions = registry->Regions("r");
  WEFT_CHECK(regions.ok() && regions->size() == 1) << "a registered region is not listed";
  return true;
}

void Serve(SharedMemoryRegistry* registry, std::string_view registration, std::string_view request) {
  if (!Register(registry, registration)) return;

  std::shared_ptr<RequestBody> request_body = MakeRequestBody(request, 0);
  Result<DecodedInferRequest> decoded =
      DecodeInferRequest({request_body->bytes(), request_body, std::nullopt, registry}, SteadyTime());
  if (!decoded.ok()) return;
  for (const Tensor& input : decoded->request->inputs) CheckTensor(input);
  for (const auto& [name, slice] : decoded->output_format.shared_memory) {
    if (slice.cuda) {
      std::vector<std::byte> copy(slice.byte_size);
      WEFT_CHECK(slice.cuda->Read(slice.cuda_offset, copy).ok()) << "a checked CUDA slice cannot be read";
      ReadEveryByte(copy);
    } else {
      ReadEveryByte(std::span<const std::byte>(slice.data, slice.byte_size));
    }
  }
}

}  // namespace
}  // namespace weft

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::SetLogLevel(weft::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static weft::ShmObject object("/weft_fuzz_shm");  // destroyed, and unlinked, at exit
  weft::FramedInput input(data, size);
  std::string_view registration = input.Line();
  std::string_view request = input.Line();
  const std::span<const std::byte> contents = std::as_bytes(std::span(input.Rest()));
  object.Fill(contents);
  weft::SharedMemoryRegistry::Options options;
  options.open_cuda_buffer =
      [contents](int device_id,
                 std::span<const std::byte> handle) -> weft::Result<std::shared_ptr<weft::CudaSharedBuffer>> {
    if (device_id != 0) return weft::InvalidArgument("no CUDA device " + std::to_string(device_id));
    auto buffer = std::make_shared<weft::testing::HostCudaBuffer>(device_id, handle.first<weft::kCudaIpcHandleBytes>(),
                                                                  weft::ShmObject::kBytes);
    WEFT_CHECK(buffer->Write(0, contents.first(std::min(contents.size(), weft::ShmObject::kBytes))).ok());
    return std::shared_ptr<weft::CudaSharedBuffer>(std::move(buffer));
  };
  weft::SharedMemoryRegistry registry(std::move(options));
  weft::Serve(&registry, registration, request);
  return 0;
}
