// Large tensors over HTTP end to end: the real server in-process (tests/integration's TestServer), the builtin
// identity model, the binary tensor data extension both ways. The body is read in place and the output goes back
// as a view of it, so what comes back must be the bytes that were sent, at every size up to the body limit.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "kserve_test_util.h"
#include "shared_server_test.h"
#include "test_server.h"

namespace weft::testing {
namespace {

constexpr size_t kElements = size_t{4} << 20;  // 16 MiB of FP32
constexpr size_t kLimit = kElements * 4 + 4096;

std::string PatternFloats(size_t elements) {
  std::string bytes(elements * 4, '\0');
  for (size_t i = 0; i < elements; ++i) {
    float v = static_cast<float>(i % 100003) * 0.5f - 7.0f;
    std::memcpy(bytes.data() + i * 4, &v, 4);
  }
  return bytes;
}

// The identity request with `padding` spaces at the end of its JSON (valid JSON whitespace), so that a test can
// size the body to the byte.
BinaryBody IdentityRequest(const std::string& data, size_t padding) {
  std::string json = InferJson({BinaryInput("INPUT0", "FP32", {static_cast<int64_t>(data.size() / 4)}, data.size())},
                               R"("parameters":{"binary_data_output":true})");
  json.append(padding, ' ');
  return MakeBinaryBody(json, {data});
}

class LargeTensorTest : public SharedServerTest<LargeTensorTest> {
 public:
  static TestServerOptions ServerOptions() {
    TestServerOptions options;
    options.example_models = {"identity"};
    options.max_body_bytes = kLimit;
    return options;
  }
};

TEST_F(LargeTensorTest, SixteenMegabytesRoundTripByteExact) {
  HttpTestClient client(server_->port());
  std::string data = PatternFloats(kElements);
  BinaryBody request = IdentityRequest(data, 0);
  for (int i = 0; i < 2; ++i) {  // twice on one connection: the second reuses it
    TestResponse r = client.Post("/v2/models/identity/infer", request.body, request.headers);
    ASSERT_TRUE(r.ok()) << r.error;
    ASSERT_EQ(r.status, 200u) << ErrorMessage(r);
    EXPECT_TRUE(r.keep_alive);
    ParsedInferResponse parsed = ParseInferResponse(r);
    ASSERT_EQ(parsed.error, "");
    const ParsedOutput* out = parsed.Find("OUTPUT0");
    ASSERT_NE(out, nullptr);
    EXPECT_TRUE(out->binary);
    EXPECT_EQ(out->shape, Shape({static_cast<int64_t>(kElements)}));
    ASSERT_EQ(out->bytes.size(), data.size());
    EXPECT_TRUE(out->bytes == data) << "the output differs from the input";
  }
}

TEST_F(LargeTensorTest, BodyExactlyAtTheLimitIsServedAndOneByteOverGets413) {
  std::string data = PatternFloats(kElements);
  BinaryBody unpadded = IdentityRequest(data, 0);
  ASSERT_LT(unpadded.body.size(), kLimit);
  size_t padding = kLimit - unpadded.body.size();

  BinaryBody at_limit = IdentityRequest(data, padding);
  ASSERT_EQ(at_limit.body.size(), kLimit);
  TestResponse ok = FetchOnce(server_->port(), boost::beast::http::verb::post, "/v2/models/identity/infer",
                              at_limit.body, at_limit.headers);
  ASSERT_TRUE(ok.ok()) << ok.error;
  ASSERT_EQ(ok.status, 200u) << ErrorMessage(ok);
  ParsedInferResponse parsed = ParseInferResponse(ok);
  ASSERT_EQ(parsed.error, "");
  ASSERT_NE(parsed.Find("OUTPUT0"), nullptr);
  EXPECT_TRUE(parsed.Find("OUTPUT0")->bytes == data);

  BinaryBody over = IdentityRequest(data, padding + 1);
  ASSERT_EQ(over.body.size(), kLimit + 1);
  TestResponse rejected =
      FetchOnce(server_->port(), boost::beast::http::verb::post, "/v2/models/identity/infer", over.body, over.headers);
  ASSERT_TRUE(rejected.ok()) << rejected.error;
  EXPECT_EQ(rejected.status, 413u);
  EXPECT_FALSE(rejected.keep_alive);
}

TEST_F(LargeTensorTest, ClientLeavingMidBodyLeavesTheServerServing) {
  std::string data = PatternFloats(kElements);
  BinaryBody request = IdentityRequest(data, 0);
  std::string head = "POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: " +
                     request.headers[0].second + "\r\nContent-Length: " + std::to_string(request.body.size()) +
                     "\r\n\r\n";
  ASSERT_EQ(request.headers[0].first, "Inference-Header-Content-Length");
  {
    HttpTestClient client(server_->port());
    ASSERT_EQ(client.WriteRaw(head + request.body.substr(0, request.body.size() / 2)), "");
    client.Close();
  }
  HttpTestClient client(server_->port());
  TestResponse r = client.Post("/v2/models/identity/infer", request.body, request.headers);
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(r.status, 200u) << ErrorMessage(r);
  ParsedInferResponse parsed = ParseInferResponse(r);
  ASSERT_NE(parsed.Find("OUTPUT0"), nullptr);
  EXPECT_TRUE(parsed.Find("OUTPUT0")->bytes == data);
}

}  // namespace
}  // namespace weft::testing
