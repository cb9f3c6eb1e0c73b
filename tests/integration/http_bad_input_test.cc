// Hostile and broken clients: after each one the server must still answer a good request correctly, on a fresh
// connection and (where the connection survives) on the same one.

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "kserve_test_util.h"
#include "shared_server_test.h"
#include "test_server.h"

namespace weft::testing {
namespace {

namespace http = boost::beast::http;
using namespace std::chrono_literals;

constexpr size_t kMaxBody = 1 << 20;

class HttpBadInputTest : public SharedServerTest<HttpBadInputTest> {
 public:
  static TestServerOptions ServerOptions() {
    TestServerOptions options;
    options.example_models = {"add_sub", "identity", "identity_bytes"};
    options.max_body_bytes = kMaxBody;
    return options;
  }

 protected:
  uint16_t port() const { return server_->port(); }

  // add_sub on inputs 0..15 and 1: checks the numbers, not just the status.
  static std::string GoodBody() {
    std::vector<float> a(16), b(16, 1.0f);
    for (int i = 0; i < 16; ++i) a[i] = static_cast<float>(i);
    return InferJson(
        {JsonInput("INPUT0", "FP32", {1, 16}, FloatArray(a)), JsonInput("INPUT1", "FP32", {1, 16}, FloatArray(b))},
        R"("id":"good")");
  }
  static void ExpectGood(const TestResponse& r) {
    ASSERT_TRUE(r.ok()) << r.error;
    ASSERT_EQ(r.status, 200u) << r.body;
    ParsedInferResponse parsed = ParseInferResponse(r);
    ASSERT_EQ(parsed.error, "");
    EXPECT_EQ(parsed.id, "good");
    const ParsedOutput* sum = parsed.Find("OUTPUT0");
    const ParsedOutput* difference = parsed.Find("OUTPUT1");
    ASSERT_TRUE(sum && difference);
    std::vector<float> s = sum->Floats(), d = difference->Floats();
    ASSERT_EQ(s.size(), 16u);
    ASSERT_EQ(d.size(), 16u);
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(s[i], i + 1.0f);
      EXPECT_EQ(d[i], i - 1.0f);
    }
  }
  // The server answers a good request on a new connection.
  void ExpectHealthy() { ExpectGood(FetchOnce(port(), http::verb::post, "/v2/models/add_sub/infer", GoodBody())); }
};

std::string RawRequest(std::string_view target, std::string_view body, size_t content_length,
                       std::string_view extra_headers = {}) {
  return "POST " + std::string(target) + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(content_length) +
         "\r\n" + std::string(extra_headers) + "\r\n" + std::string(body);
}

TEST_F(HttpBadInputTest, ErrorsKeepTheConnectionUsable) {
  HttpTestClient client(port());
  const std::string target = "/v2/models/add_sub/infer";
  std::vector<std::pair<std::string, HeaderList>> bad = {
      {"{", {}},
      {"", {}},
      {"null", {}},
      {"{\"inputs\": 5}", {}},
      {std::string("{\"inputs\":[]}\0garbage", 21), {}},
      {InferJson({JsonInput("INPUT0", "FP32", {1, 16}, "[\"one\"]")}), {}},
      {InferJson({JsonInput("INPUT0", "FP32", {1, 16}, "[[[[[[1]]]]]]")}), {}},
      {InferJson({"{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":\"16\",\"data\":[1]}"}), {}},
      {InferJson({JsonInput("INPUT0", "UINT8", {1}, "[300]")}), {}},
      {InferJson({JsonInput("INPUT0", "FP32", {99999999999}, "[1]")}), {}},
      {std::string(10000, '[') + std::string(10000, ']'), {}},
      {"{\"inputs\":[]}", {{"Inference-Header-Content-Length", "18446744073709551615"}}},
      {"{\"inputs\":[]}", {{"Inference-Header-Content-Length", "-1"}}},
      {"\xff\xfe\xfd", {}},
  };
  for (const auto& [body, headers] : bad) {
    TestResponse r = client.Post(target, body, headers);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 400u) << body.substr(0, 80) << " -> " << r.body;
    EXPECT_NE(r.body.find("\"error\""), std::string::npos) << r.body;
    ExpectGood(client.Post(target, GoodBody()));
  }
  ExpectHealthy();
}

// Hardening issue, item 1, as reported: binary data for a model with a -1 dimension, shape [2^62 + 2] FP32 and 8
// bytes. 4 * (2^62 + 2) wrapped to 8, the size check passed, and the response encoder read 2^62 elements (SIGSEGV).
TEST_F(HttpBadInputTest, ShapeWhoseByteSizeWrapsIsRejected) {
  HttpTestClient client(port());
  // FP16's 2 * (2^62 + 2) does not wrap: it is simply far more than 8 bytes.
  for (std::string datatype : {"FP32", "INT64", "FP16"}) {
    BinaryBody body =
        MakeBinaryBody(InferJson({BinaryInput("INPUT0", datatype, {4611686018427387906}, 8)}), {std::string(8, 'x')});
    TestResponse r = client.Post("/v2/models/identity/infer", body.body, body.headers);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 400u) << r.body;
    EXPECT_NE(ErrorMessage(r).find(datatype == "FP16" ? "needs 9223372036854775812 bytes" : "larger than 2^64 bytes"),
              std::string::npos)
        << r.body;
  }
  // The raw binary form of the same model: the body decides the -1 dimension, so nothing can wrap.
  TestResponse raw =
      client.Post("/v2/models/identity/infer", std::string(8, 'x'), {{"Inference-Header-Content-Length", "0"}});
  ASSERT_TRUE(raw.ok()) << raw.error;
  EXPECT_EQ(raw.status, 200u) << raw.body;
  ExpectHealthy();
}

TEST_F(HttpBadInputTest, TruncatedBodyThenClose) {
  for (size_t sent : {0, 1, 100}) {
    HttpTestClient client(port());
    std::string body = GoodBody();
    ASSERT_EQ(client.WriteRaw(RawRequest("/v2/models/add_sub/infer", body.substr(0, sent), body.size() + 1000)), "");
    std::this_thread::sleep_for(10ms);
    client.Close();
    ExpectHealthy();
  }
}

TEST_F(HttpBadInputTest, DisconnectMidBodyOfALargeRequest) {
  for (int i = 0; i < 3; ++i) {
    HttpTestClient client(port());
    ASSERT_EQ(client.WriteRaw(RawRequest("/v2/models/identity/infer", std::string(300000, '['), 900000)), "");
    client.Close();
  }
  ExpectHealthy();
}

TEST_F(HttpBadInputTest, OversizedBodies) {
  {
    // Declared too large: refused before the body is read.
    HttpTestClient client(port());
    ASSERT_EQ(client.WriteRaw(RawRequest("/v2/models/add_sub/infer", std::string(1000, ' '), kMaxBody + 1)), "");
    TestResponse r = client.ReadResponse();
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 413u);
    EXPECT_TRUE(client.WaitForClose());
  }
  {
    // Sent in full: the client still reads the 413.
    HttpTestClient client(port());
    TestResponse r = client.Post("/v2/models/add_sub/infer", std::string(kMaxBody + 4096, ' '));
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 413u);
  }
  {
    // Chunked, with no length declared.
    HttpTestClient client(port());
    std::string chunk(256 * 1024, 'x');
    std::string raw = "POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 5; ++i) raw += "40000\r\n" + chunk + "\r\n";
    raw += "0\r\n\r\n";
    client.WriteRaw(raw);  // may fail part way once the server has answered and closed
    TestResponse r = client.ReadResponse();
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 413u);
  }
  ExpectHealthy();
}

TEST_F(HttpBadInputTest, MalformedHttp) {
  for (std::string raw : {std::string("GARBAGE\r\n\r\n"), std::string("POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n"),
                          std::string("GET /v2 HTTP/9.9\r\n\r\n"), std::string("\0\0\0\0\r\n\r\n", 8),
                          std::string("POST /v2 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")}) {
    HttpTestClient client(port());
    ASSERT_EQ(client.WriteRaw(raw), "");
    TestResponse r = client.ReadResponse();
    if (r.ok()) {
      EXPECT_EQ(r.status, 400u) << raw;
    }  // else the server just closed: both are fine
    EXPECT_TRUE(client.WaitForClose());
    ExpectHealthy();
  }
}

TEST_F(HttpBadInputTest, MistypedRequestsOnOtherEndpoints) {
  HttpTestClient client(port());
  EXPECT_EQ(client.Send(http::verb::delete_, "/v2/models/add_sub").status, 405u);
  EXPECT_EQ(client.Send(http::verb::put, "/v2/models/add_sub/infer", GoodBody()).status, 405u);
  EXPECT_EQ(client.Get("/v2/models/%ff%fe/ready").status, 404u);
  EXPECT_EQ(client.Get("/v2/models//ready").status, 404u);
  EXPECT_EQ(client.Get("/v2/models/add_sub/versions/99999999999999999999999/ready").status, 404u);
  EXPECT_EQ(client.Get("/v2/models/add_sub/versions/-1").status, 404u);
  EXPECT_EQ(client.Get(std::string(4000, '/')).status, 404u);
  ExpectGood(client.Post("/v2/models/add_sub/infer", GoodBody()));
}

// Random corruptions of a good request: every answer is a 2xx or a 4xx, never a crash or a 5xx.
TEST_F(HttpBadInputTest, FuzzedBodies) {
  std::mt19937 random(12345);
  const std::string good = GoodBody();
  std::vector<float> a(16, 2.0f);
  std::string a_bytes(reinterpret_cast<const char*>(a.data()), 64);
  BinaryBody binary = MakeBinaryBody(
      InferJson({BinaryInput("INPUT0", "FP32", {1, 16}, 64), BinaryInput("INPUT1", "FP32", {1, 16}, 64)}),
      {a_bytes, a_bytes});
  HttpTestClient client(port());
  for (int i = 0; i < 300; ++i) {
    bool use_binary = i % 2 == 1;
    std::string body = use_binary ? binary.body : good;
    int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits && !body.empty(); ++e) {
      size_t at = random() % body.size();
      switch (random() % 3) {
        case 0: body[at] = static_cast<char>(random() % 256); break;
        case 1: body.erase(at, 1 + random() % 8); break;
        case 2: body.insert(at, 1, "{}[]\",:0-e"[random() % 10]); break;
      }
    }
    TestResponse r = client.Post("/v2/models/add_sub/infer", body, use_binary ? binary.headers : HeaderList{});
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_LT(r.status, 500u) << body << " -> " << r.body;
  }
  ExpectGood(client.Post("/v2/models/add_sub/infer", good));
  ExpectHealthy();
}

TEST_F(HttpBadInputTest, ManyConnectionsAtOnce) {
  std::vector<std::jthread> clients;
  std::atomic<int> good{0};
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      HttpTestClient client(port());
      for (int j = 0; j < 10; ++j) {
        if (i % 4 == 0) client.Post("/v2/models/add_sub/infer", "{broken");
        TestResponse r = client.Post("/v2/models/add_sub/infer", GoodBody());
        if (r.ok() && r.status == 200) ++good;
      }
    });
  }
  clients.clear();
  EXPECT_EQ(good.load(), 160);
  ExpectHealthy();
}

}  // namespace
}  // namespace weft::testing
