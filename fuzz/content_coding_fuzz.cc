// Fuzzes HTTP content codings (frontend/http/content_coding.cc): ParseContentEncoding and DecodeContent on a request
// body as the inference route inflates it (a limit of 64 KiB, an anchor taken from the input), ChooseResponseCoding
// on an Accept-Encoding header, and EncodeContent. Besides the sanitizers it checks that an inflated body never
// passes the limit and keeps its anchor aligned, that what inflates encodes and inflates back to the same bytes, and
// that every body encoded in the chosen coding inflates back to itself.
//
// Input: line 1: the Content-Encoding header; line 2: the Accept-Encoding header; the rest: the body as sent.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "frontend/http/content_coding.h"
#include "fuzz/fuzz_target.h"

namespace weft {
namespace {

constexpr size_t kLimit = size_t{64} << 10;

// `bytes` encoded in `coding` (split into a body and a segment, as an infer response is) must inflate back to them.
void CheckRoundTrip(std::span<const std::byte> bytes, ContentCoding coding) {
  auto owner = std::make_shared<std::string>(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  HttpResponse response;
  const size_t split = owner->size() / 3;
  response.body = owner->substr(0, split);
  response.segments.push_back({owner, std::span<const std::byte>(bytes).subspan(split)});
  EncodeContent(coding, &response);
  if (coding == ContentCoding::kIdentity) return;
  WEFT_CHECK(response.segments.empty()) << "segments left after encoding";
  auto back = DecodeContent({reinterpret_cast<const std::byte*>(response.body.data()), response.body.size()}, coding,
                            bytes.size(), 0);
  WEFT_CHECK(back.ok()) << "an encoded body does not inflate: " << back.status().ToString();
  WEFT_CHECK(back->view() == *owner) << "an encoded body inflates to other bytes";
}

void Run(FramedInput input) {
  const std::string_view content_encoding = input.Line();
  const std::string_view accept_encoding = input.Line();
  const std::string_view rest = input.Rest();
  const std::span<const std::byte> body(reinterpret_cast<const std::byte*>(rest.data()), rest.size());
  const ContentCoding answer = ChooseResponseCoding(accept_encoding);
  std::optional<ContentCoding> coding = ParseContentEncoding(content_encoding);
  if (!coding) return CheckRoundTrip(body, answer);
  const size_t anchor = content_encoding.size();
  Result<RequestBody> inflated = DecodeContent(body, *coding, kLimit, anchor);
  if (!inflated.ok()) {
    const StatusCode code = inflated.status().code();
    WEFT_CHECK(code == StatusCode::kInvalidArgument || code == StatusCode::kResourceExhausted)
        << "unexpected error " << inflated.status().ToString();
    return CheckRoundTrip(body, answer);
  }
  WEFT_CHECK(inflated->size() <= kLimit) << inflated->size() << " bytes, over the limit";
  WEFT_CHECK(reinterpret_cast<uintptr_t>(inflated->data() + anchor) % kRequestBodyAlignment == 0)
      << "the anchor is not aligned";
  ReadEveryByte(inflated->bytes());
  CheckRoundTrip(inflated->bytes(), answer == ContentCoding::kIdentity ? *coding : answer);
}

}  // namespace
}  // namespace weft

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::SetLogLevel(weft::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::Run(weft::FramedInput(data, size));
  return 0;
}
