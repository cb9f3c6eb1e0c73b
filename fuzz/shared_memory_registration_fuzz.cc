// Fuzzes the system shared memory extension from a client's calls: the registration body
// (DecodeSharedMemoryRegistration, frontend/http/shared_memory_codec.cc), the key check and the registration
// (CheckSharedMemoryKey, SharedMemoryRegistry::Register, frontend/shm/shared_memory.cc) against a real object,
// then an inference request whose inputs and outputs name the region (SharedMemoryRegistry::Slice,
// SharedMemoryInput), each input checked with CheckTensor and each output slice read.
//
// Input framing:
//   line 1: the body of POST v2/systemsharedmemory/region/r/register: {"key", "offset", "byte_size"}
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
#include "fuzz/fuzz_target.h"
#include "fuzz/shm_fixture.h"

namespace weft {
namespace {

void Serve(SharedMemoryRegistry* registry, std::string_view registration, std::string_view request) {
  Result<SharedMemoryRegistration> body = DecodeSharedMemoryRegistration(std::as_bytes(std::span(registration)));
  if (!body.ok()) return;
  if (!registry->Register("r", body->key, body->offset, body->byte_size).ok()) return;
  Result<std::vector<SharedMemoryRegionStatus>> regions = registry->Regions("r");
  WEFT_CHECK(regions.ok() && regions->size() == 1) << "a registered region is not listed";

  std::shared_ptr<RequestBody> request_body = MakeRequestBody(request, 0);
  Result<DecodedInferRequest> decoded =
      DecodeInferRequest({request_body->bytes(), request_body, std::nullopt, registry}, SteadyTime());
  if (!decoded.ok()) return;
  for (const Tensor& input : decoded->request->inputs) CheckTensor(input);
  for (const auto& [name, slice] : decoded->output_format.shared_memory) {
    ReadEveryByte(std::span<const std::byte>(slice.data, slice.byte_size));
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
  object.Fill(std::as_bytes(std::span(input.Rest())));
  weft::SharedMemoryRegistry registry;
  weft::Serve(&registry, registration, request);
  return 0;
}
