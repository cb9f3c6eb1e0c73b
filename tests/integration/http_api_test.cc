// The KServe v2 HTTP API end to end: a real server on a real socket, the example repository, references from
// examples/reference. One server for the suite; every test uses its own keep-alive connection.

#include <gtest/gtest.h>

#include <cstring>

#include "kserve_test_util.h"
#include "shared_server_test.h"
#include "test_server.h"

namespace weft::testing {
namespace {

namespace http = boost::beast::http;

// Identity over every datatype: IN_<TYPE> -> OUT_<TYPE>.
const std::vector<std::string> kAllTypes = {"BOOL",  "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
                                            "INT32", "INT64", "FP16",   "FP32",   "FP64",   "BF16", "BYTES"};

std::string IdentityAllConfig() {
  std::string inputs, outputs;
  for (const std::string& type : kAllTypes) {
    std::string config_type = type == "BYTES" ? "TYPE_STRING" : "TYPE_" + type;
    inputs +=
        (inputs.empty() ? "" : ",") + ("{ name: \"IN_" + type + "\" data_type: " + config_type + " dims: [ -1 ] }");
    outputs +=
        (outputs.empty() ? "" : ",") + ("{ name: \"OUT_" + type + "\" data_type: " + config_type + " dims: [ -1 ] }");
  }
  return "name: \"identity_all\"\nbackend: \"weft_builtin\"\nmax_batch_size: 0\ninput [" + inputs + "]\noutput [" +
         outputs + "]\nparameters { key: \"builtin\" value: { string_value: \"identity\" } }\n";
}

class HttpApiTest : public SharedServerTest<HttpApiTest> {
 public:
  static TestServerOptions ServerOptions() {
    TestServerOptions options;
    options.extra_configs["identity_all"] = IdentityAllConfig();
    return options;
  }

 protected:
  void SetUp() override {
    SharedServerTest::SetUp();
    client_ = std::make_unique<HttpTestClient>(server_->port());
    ASSERT_EQ(client_->connect_error(), "");
  }

  TestResponse Get(std::string_view target) { return client_->Get(target); }
  TestResponse Post(std::string_view target, std::string body, const HeaderList& headers = {}) {
    return client_->Post(target, std::move(body), headers);
  }
  void SkipUnlessReady(const std::string& model) {
    if (!server_->ModelReady(model)) GTEST_SKIP() << "model '" << model << "' did not load in this build";
  }

  std::unique_ptr<HttpTestClient> client_;
};

void ExpectError(const TestResponse& r, unsigned status, std::string_view needle) {
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_NE(ErrorMessage(r).find(needle), std::string::npos) << "'" << needle << "' not in " << r.body;
  EXPECT_EQ(r.header("Content-Type"), "application/json");
}

// ---- health, metadata, config, readiness

TEST_F(HttpApiTest, HealthLiveAndReady) {
  TestResponse live = Get("/v2/health/live");
  ASSERT_TRUE(live.ok()) << live.error;
  EXPECT_EQ(live.status, 200u);
  TestResponse ready = Get("/v2/health/ready");
  ASSERT_TRUE(ready.ok()) << ready.error;
  EXPECT_EQ(ready.status, server_->engine().Ready() ? 200u : 503u) << ready.body;
}

TEST_F(HttpApiTest, ServerMetadata) {
  TestResponse r = Get("/v2");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_NE(r.body.find("\"name\":\"weft\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"version\":\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"binary_tensor_data\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"model_configuration\""), std::string::npos) << r.body;
}

TEST_F(HttpApiTest, ModelMetadataHasFullShapes) {
  TestResponse add_sub = Get("/v2/models/add_sub");
  ASSERT_TRUE(add_sub.ok()) << add_sub.error;
  EXPECT_EQ(add_sub.status, 200u);
  EXPECT_EQ(
      add_sub.body,
      R"({"name":"add_sub","versions":["1"],"platform":"weft_builtin","inputs":[)"
      R"({"name":"INPUT0","datatype":"FP32","shape":[-1,16]},{"name":"INPUT1","datatype":"FP32","shape":[-1,16]}],)"
      R"("outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[-1,16]},)"
      R"({"name":"OUTPUT1","datatype":"FP32","shape":[-1,16]}]})");
  TestResponse identity = Get("/v2/models/identity/versions/1");
  ASSERT_TRUE(identity.ok()) << identity.error;
  EXPECT_EQ(identity.status, 200u);
  EXPECT_NE(identity.body.find(R"({"name":"INPUT0","datatype":"FP32","shape":[-1]})"), std::string::npos)
      << identity.body;
  TestResponse mlp = Get("/v2/models/mlp");
  ASSERT_TRUE(mlp.ok()) << mlp.error;
  EXPECT_EQ(mlp.status, 200u);
  EXPECT_NE(mlp.body.find("\"platform\":\"pytorch_libtorch\""), std::string::npos) << mlp.body;
  EXPECT_NE(mlp.body.find(R"({"name":"OUTPUT0","datatype":"FP32","shape":[-1,10]})"), std::string::npos) << mlp.body;
  ExpectError(Get("/v2/models/add_sub/versions/7"), 404, "no version 7");
  ExpectError(Get("/v2/models/nope"), 404, "nope");
}

TEST_F(HttpApiTest, ModelReadyAndConfig) {
  TestResponse ready = Get("/v2/models/add_sub/ready");
  ASSERT_TRUE(ready.ok()) << ready.error;
  EXPECT_EQ(ready.status, 200u);
  TestResponse versioned = Get("/v2/models/add_sub/versions/1/ready");
  ASSERT_TRUE(versioned.ok());
  EXPECT_EQ(versioned.status, 200u);
  ExpectError(Get("/v2/models/add_sub/versions/2/ready"), 404, "no version 2");
  ExpectError(Get("/v2/models/nope/ready"), 404, "unknown model 'nope'");

  TestResponse config = Get("/v2/models/add_sub/config");
  ASSERT_TRUE(config.ok()) << config.error;
  EXPECT_EQ(config.status, 200u);
  EXPECT_NE(config.body.find("\"name\":\"add_sub\""), std::string::npos) << config.body;
  EXPECT_NE(config.body.find("\"max_batch_size\":8"), std::string::npos) << config.body;
  TestResponse versioned_config = Get("/v2/models/add_sub/versions/1/config");
  ASSERT_TRUE(versioned_config.ok());
  EXPECT_EQ(versioned_config.body, config.body);
}

// ---- inference against the references

class ReferenceCase {
 public:
  explicit ReferenceCase(const std::string& model) : reference_(ReadReference(model)) {}
  const Reference& reference() const { return reference_; }

  std::string Json(std::string_view extra = {}) const {
    std::vector<std::string> inputs;
    for (const auto& t : reference_.inputs)
      inputs.push_back(JsonInput(t.name, t.datatype, t.shape, FloatArray(t.Floats())));
    return InferJson(inputs, extra);
  }
  BinaryBody Binary(std::string_view extra = {}) const {
    std::vector<std::string> inputs;
    std::vector<std::string_view> blobs;
    for (const auto& t : reference_.inputs) {
      inputs.push_back(BinaryInput(t.name, t.datatype, t.shape, t.bytes.size()));
      blobs.push_back(t.bytes);
    }
    return MakeBinaryBody(InferJson(inputs, extra), blobs);
  }
  void ExpectMatches(const TestResponse& r, bool binary) const {
    ASSERT_TRUE(r.ok()) << r.error;
    ASSERT_EQ(r.status, 200u) << r.body.substr(0, 500);
    ParsedInferResponse parsed = ParseInferResponse(r);
    ASSERT_EQ(parsed.error, "");
    ASSERT_EQ(parsed.outputs.size(), reference_.outputs.size());
    for (const auto& expected : reference_.outputs) {
      const ParsedOutput* got = parsed.Find(expected.name);
      ASSERT_NE(got, nullptr) << expected.name;
      EXPECT_EQ(got->binary, binary) << expected.name;
      EXPECT_EQ(got->datatype, expected.datatype);
      EXPECT_EQ(got->shape, expected.shape) << expected.name;
      EXPECT_LE(MaxAbsDiff(got->Floats(), expected.Floats()), 1e-4f) << expected.name;
    }
  }

 private:
  Reference reference_;
};

void RunReference(HttpApiTest* test, HttpTestClient& client, const std::string& model) {
  ReferenceCase c(model);
  ASSERT_EQ(c.reference().error, "");
  std::string target = "/v2/models/" + model + "/infer";
  c.ExpectMatches(client.Post(target, c.Json()), false);
  BinaryBody binary = c.Binary(R"("parameters":{"binary_data_output":true})");
  c.ExpectMatches(client.Post(target, binary.body, binary.headers), true);
  BinaryBody binary_in_json_out = c.Binary();
  c.ExpectMatches(client.Post(target, binary_in_json_out.body, binary_in_json_out.headers), false);
}

TEST_F(HttpApiTest, AddSubMatchesReference) { RunReference(this, *client_, "add_sub"); }

TEST_F(HttpApiTest, MlpMatchesReference) {
  SkipUnlessReady("mlp");
  RunReference(this, *client_, "mlp");
}

TEST_F(HttpApiTest, PairMatchesReference) {
  SkipUnlessReady("pair");
  RunReference(this, *client_, "pair");
}

TEST_F(HttpApiTest, DetectorMatchesReferenceOverBinary) {
  SkipUnlessReady("detector");
  ReferenceCase c("detector");
  ASSERT_EQ(c.reference().error, "");
  BinaryBody binary = c.Binary(R"("outputs":[{"name":"features","parameters":{"binary_data":true}}])");
  TestResponse r = Post("/v2/models/detector/infer", binary.body, binary.headers);
  c.ExpectMatches(r, true);
  EXPECT_EQ(r.header("Content-Type"), "application/octet-stream");
  EXPECT_FALSE(r.header("Inference-Header-Content-Length").empty());
}

TEST_F(HttpApiTest, IdEchoAndOutputsSubset) {
  SkipUnlessReady("pair");
  ReferenceCase c("pair");
  ASSERT_EQ(c.reference().error, "");
  TestResponse r = Post("/v2/models/pair/infer", c.Json(R"("id":"req-42","outputs":[{"name":"PROD"}])"));
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(r.status, 200u) << r.body;
  ParsedInferResponse parsed = ParseInferResponse(r);
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.id, "req-42");
  EXPECT_EQ(parsed.model_name, "pair");
  EXPECT_EQ(parsed.model_version, "1");
  ASSERT_EQ(parsed.outputs.size(), 1u);
  EXPECT_EQ(parsed.outputs[0].name, "PROD");
  EXPECT_LE(MaxAbsDiff(parsed.outputs[0].Floats(), c.reference().Output("PROD")->Floats()), 1e-4f);

  // binary_data_output for all, overridden per output.
  TestResponse mixed = Post("/v2/models/pair/infer",
                            c.Json(R"("parameters":{"binary_data_output":true},)"
                                   R"("outputs":[{"name":"SUM","parameters":{"binary_data":false}},{"name":"PROD"}])"));
  ASSERT_TRUE(mixed.ok()) << mixed.error;
  ASSERT_EQ(mixed.status, 200u) << mixed.body;
  ParsedInferResponse parsed_mixed = ParseInferResponse(mixed);
  ASSERT_EQ(parsed_mixed.error, "");
  EXPECT_FALSE(parsed_mixed.has_id);
  ASSERT_EQ(parsed_mixed.outputs.size(), 2u);
  EXPECT_EQ(parsed_mixed.outputs[0].name, "SUM");
  EXPECT_FALSE(parsed_mixed.outputs[0].binary);
  EXPECT_TRUE(parsed_mixed.outputs[1].binary);
  EXPECT_LE(MaxAbsDiff(parsed_mixed.outputs[1].Floats(), c.reference().Output("PROD")->Floats()), 1e-4f);
}

// ---- every datatype through identity

// One value list per datatype, written as JSON, with the raw little-endian bytes the server must see.
struct TypeCase {
  std::string type;
  std::string json;
  std::string bytes;
  int64_t count;
};

template <typename T>
std::string Raw(std::vector<T> values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::vector<TypeCase> TypeCases() {
  return {
      {"BOOL", "[true,false,true]", Raw<uint8_t>({1, 0, 1}), 3},
      {"UINT8", "[0,7,255]", Raw<uint8_t>({0, 7, 255}), 3},
      {"UINT16", "[0,65535]", Raw<uint16_t>({0, 65535}), 2},
      {"UINT32", "[4294967295,1]", Raw<uint32_t>({4294967295u, 1}), 2},
      {"UINT64", "[18446744073709551615,0]", Raw<uint64_t>({18446744073709551615ull, 0}), 2},
      {"INT8", "[-128,127]", Raw<int8_t>({-128, 127}), 2},
      {"INT16", "[-32768,32767]", Raw<int16_t>({-32768, 32767}), 2},
      {"INT32", "[-2147483648,2147483647]", Raw<int32_t>({-2147483647 - 1, 2147483647}), 2},
      {"INT64", "[-9223372036854775808,9223372036854775807]", Raw<int64_t>({INT64_MIN, INT64_MAX}), 2},
      {"FP16", "[1.5,-2,65504]", Raw<uint16_t>({0x3e00, 0xc000, 0x7bff}), 3},
      {"FP32", "[0.1,-3.5,1e+30]", Raw<float>({0.1f, -3.5f, 1e30f}), 3},
      {"FP64", "[0.1,-1e+300]", Raw<double>({0.1, -1e300}), 2},
      {"BF16", "[1,-2.5]", Raw<uint16_t>({0x3f80, 0xc020}), 2},
      {"BYTES", "[\"hello\",\"\",\"\xc3\xa9\\\"q\"]", std::string("\x05\0\0\0hello\0\0\0\0\x04\0\0\0\xc3\xa9\"q", 21),
       3},
  };
}

TEST_F(HttpApiTest, EveryDatatypeRoundTripsThroughIdentity) {
  std::vector<TypeCase> cases = TypeCases();
  std::vector<std::string> json_inputs, binary_inputs;
  std::vector<std::string_view> blobs;
  for (const TypeCase& c : cases) {
    json_inputs.push_back(JsonInput("IN_" + c.type, c.type, {c.count}, c.json));
    binary_inputs.push_back(BinaryInput("IN_" + c.type, c.type, {c.count}, c.bytes.size()));
    blobs.push_back(c.bytes);
  }
  // JSON in, JSON out: the output data is the input data, spelled the way the server spells numbers.
  TestResponse json = Post("/v2/models/identity_all/infer", InferJson(json_inputs));
  ASSERT_TRUE(json.ok()) << json.error;
  ASSERT_EQ(json.status, 200u) << json.body;
  for (const TypeCase& c : cases) {
    std::string expected = "{\"name\":\"OUT_" + c.type + "\",\"datatype\":\"" + c.type + "\",\"shape\":[" +
                           std::to_string(c.count) + "],\"data\":" + c.json + "}";
    EXPECT_NE(json.body.find(expected), std::string::npos) << expected << "\nnot in\n" << json.body;
  }
  // JSON in, binary out: the bytes the server decoded.
  TestResponse json_to_binary =
      Post("/v2/models/identity_all/infer", InferJson(json_inputs, R"("parameters":{"binary_data_output":true})"));
  ParsedInferResponse parsed = ParseInferResponse(json_to_binary);
  ASSERT_EQ(parsed.error, "") << json_to_binary.body;
  for (const TypeCase& c : cases) {
    const ParsedOutput* out = parsed.Find("OUT_" + c.type);
    ASSERT_NE(out, nullptr) << c.type;
    EXPECT_TRUE(out->binary);
    EXPECT_EQ(out->bytes, c.bytes) << c.type;
  }
  // Binary in, binary out: byte for byte.
  BinaryBody binary = MakeBinaryBody(InferJson(binary_inputs, R"("parameters":{"binary_data_output":true})"), blobs);
  TestResponse round = Post("/v2/models/identity_all/infer", binary.body, binary.headers);
  ParsedInferResponse parsed_round = ParseInferResponse(round);
  ASSERT_EQ(parsed_round.error, "") << round.body;
  for (const TypeCase& c : cases) {
    const ParsedOutput* out = parsed_round.Find("OUT_" + c.type);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(out->bytes, c.bytes) << c.type;
  }
}

TEST_F(HttpApiTest, BytesThroughIdentityBytes) {
  TestResponse json = Post("/v2/models/identity_bytes/infer",
                           InferJson({JsonInput("INPUT0", "BYTES", {2}, R"(["a b","\n"])")}, R"("id":"s")"));
  ASSERT_TRUE(json.ok()) << json.error;
  ASSERT_EQ(json.status, 200u) << json.body;
  EXPECT_EQ(json.body, R"({"model_name":"identity_bytes","model_version":"1","id":"s","outputs":[)"
                       R"({"name":"OUTPUT0","datatype":"BYTES","shape":[2],"data":["a b","\n"]}]})");
  // Not UTF-8: fine in binary, refused as JSON.
  std::string element("\x02\0\0\0\xff\xfe", 6);
  BinaryBody binary = MakeBinaryBody(
      InferJson({BinaryInput("INPUT0", "BYTES", {1}, element.size())}, R"("parameters":{"binary_data_output":true})"),
      {element});
  TestResponse round = Post("/v2/models/identity_bytes/infer", binary.body, binary.headers);
  ParsedInferResponse parsed = ParseInferResponse(round);
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.outputs[0].bytes, element);
  BinaryBody as_json = MakeBinaryBody(InferJson({BinaryInput("INPUT0", "BYTES", {1}, element.size())}), {element});
  ExpectError(Post("/v2/models/identity_bytes/infer", as_json.body, as_json.headers), 400, "not UTF-8");
}

TEST_F(HttpApiTest, RawBinaryRequest) {
  std::string floats = Raw<float>({1.0f, 2.0f, 3.0f});
  TestResponse r = Post("/v2/models/identity/infer", floats, {{"Inference-Header-Content-Length", "0"}});
  ParsedInferResponse parsed = ParseInferResponse(r);
  ASSERT_EQ(parsed.error, "") << r.body;
  ASSERT_EQ(parsed.outputs.size(), 1u);
  EXPECT_EQ(parsed.outputs[0].shape, (Shape{3}));
  EXPECT_EQ(parsed.outputs[0].bytes, floats);
}

// ---- errors

TEST_F(HttpApiTest, WireFormatErrorsAre400) {
  const std::string target = "/v2/models/add_sub/infer";
  std::string row = FloatArray(std::vector<float>(16, 1.0f));
  ExpectError(Post(target, "{\"inputs\": [ {"), 400, "malformed JSON");
  ExpectError(Post(target, InferJson({JsonInput("INPUT0", "FP32", {1, 15}, FloatArray(std::vector<float>(15, 1))),
                                      JsonInput("INPUT1", "FP32", {1, 15}, FloatArray(std::vector<float>(15, 1)))})),
              400, "shape");
  ExpectError(
      Post(target, InferJson({JsonInput("INPUT0", "FP64", {1, 16}, row), JsonInput("INPUT1", "FP64", {1, 16}, row)})),
      400, "FP64");
  ExpectError(Post(target, InferJson({JsonInput("INPUT0", "FP32", {1, 16}, row)})), 400, "INPUT1");
  ExpectError(Post(target, InferJson({JsonInput("INPUT0", "FP32", {1, 16}, "[1,2]"),
                                      JsonInput("INPUT1", "FP32", {1, 16}, row)})),
              400, "data has 2 elements");
  ExpectError(Post(target, InferJson({JsonInput("INPUT0", "FLOAT32", {1, 16}, row)})), 400, "unknown datatype");
  std::string bytes(64, '\0');
  BinaryBody short_blob = MakeBinaryBody(
      InferJson({BinaryInput("INPUT0", "FP32", {1, 16}, 60), BinaryInput("INPUT1", "FP32", {1, 16}, 4)}), {bytes});
  ExpectError(Post(target, short_blob.body, short_blob.headers), 400, "needs 64 bytes, got 60");
  BinaryBody overrun = MakeBinaryBody(
      InferJson({BinaryInput("INPUT0", "FP32", {1, 16}, 64), BinaryInput("INPUT1", "FP32", {1, 16}, 64)}), {bytes});
  ExpectError(Post(target, overrun.body, overrun.headers), 400, "exceeds the 0 bytes left");
  ExpectError(Post(target, "{}", {{"Inference-Header-Content-Length", "100"}}), 400, "exceeds the body size");
  ExpectError(Post(target, "{}", {{"Inference-Header-Content-Length", "x"}}), 400, "Inference-Header-Content-Length");
  ExpectError(Post(target, "{}", {{"Content-Encoding", "gzip"}}), 400, "not valid gzip data");
  ExpectError(Post(target, "{}", {{"Content-Encoding", "br"}}), 415, "'br' is not supported");
}

TEST_F(HttpApiTest, UnknownModelVersionOrRouteIs404AndWrongMethodIs405) {
  std::string body = InferJson({JsonInput("INPUT0", "FP32", {1}, "[1]")});
  ExpectError(Post("/v2/models/nope/infer", body), 404, "unknown model 'nope'");
  ExpectError(Post("/v2/models/identity/versions/9/infer", body), 404, "no version 9");
  ExpectError(Get("/v2/models/identity/versions/x"), 404, "no route");
  ExpectError(Get("/v3/health/live"), 404, "no route");
  ExpectError(Get("/v2/health/dead"), 404, "no route");
  ExpectError(Get("/"), 404, "no route");

  TestResponse get_infer = Get("/v2/models/identity/infer");
  ExpectError(get_infer, 405, "POST");
  EXPECT_EQ(get_infer.header("Allow"), "POST");
  TestResponse post_health = Post("/v2/health/live", "");
  ExpectError(post_health, 405, "GET");
  EXPECT_EQ(post_health.header("Allow"), "GET");
  // The connection survived every error.
  TestResponse live = Get("/v2/health/live");
  ASSERT_TRUE(live.ok()) << live.error;
  EXPECT_EQ(live.status, 200u);
}

TEST_F(HttpApiTest, MetricsPortServesExposition) {
  ASSERT_TRUE(Get("/v2/health/live").ok());
  HttpTestClient metrics(server_->metrics_port());
  TestResponse r = metrics.Get("/metrics");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.header("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u) << r.header("Content-Type");
  EXPECT_NE(r.body.find("weft_http_requests_total{endpoint=\"health\",code=\"2xx\"}"), std::string::npos) << r.body;
  EXPECT_EQ(metrics.Get("/other").status, 404u);
  EXPECT_EQ(metrics.Post("/metrics", "").status, 405u);
}

// ---- servers with other repositories or limits

TEST(HttpServerLimitsTest, OversizedBodyIs413) {
  TestServerOptions options;
  options.example_models = {"identity"};
  options.max_body_bytes = 1 << 20;
  auto server = TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  HttpTestClient client((*server)->port());
  TestResponse r = client.Post("/v2/models/identity/infer", std::string((1 << 20) + 1, ' '));
  ExpectError(r, 413, "exceeds the limit");
  EXPECT_FALSE(r.keep_alive);
  TestResponse ok = FetchOnce((*server)->port(), http::verb::get, "/v2/health/live");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.status, 200u);
}

TEST(HttpServerLimitsTest, BrokenModelIs503) {
  TestServerOptions options;
  options.example_models = {"identity"};
  options.extra_configs["broken"] =
      "name: \"broken\"\nbackend: \"no_such_backend\"\nmax_batch_size: 0\n"
      "input [{ name: \"x\" data_type: TYPE_FP32 dims: [1] }]\n"
      "output [{ name: \"y\" data_type: TYPE_FP32 dims: [1] }]\n";
  options.extra_configs["garbled"] = "this is { not pbtxt";
  auto server = TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  HttpTestClient client((*server)->port());
  ExpectError(client.Get("/v2/models/broken/ready"), 503, "not ready");
  ExpectError(client.Get("/v2/models/garbled/ready"), 503, "not ready");
  ExpectError(client.Post("/v2/models/broken/infer", InferJson({JsonInput("x", "FP32", {1}, "[1]")})), 503,
              "not ready");
  TestResponse server_ready = client.Get("/v2/health/ready");
  ExpectError(server_ready, 503, "broken");
  TestResponse metadata = client.Get("/v2/models/broken");
  ASSERT_TRUE(metadata.ok());
  EXPECT_EQ(metadata.status, 200u) << metadata.body;  // the config is valid: its metadata is known
  EXPECT_EQ(client.Get("/v2/models/identity/ready").status, 200u);
}

// Hardening issue, item 4: each of these configs took the whole server down (an abort at start, gigabytes
// allocated, a count that wrapped to "-2 instances", a first request never answered). Now each model alone fails
// to load with its reason, and the others serve.
TEST(HttpServerLimitsTest, ConfigsPastTheLimitsFailAloneWithTheirReason) {
  auto model = [](const std::string& name, const std::string& extra) {
    return "name: \"" + name + "\"\nbackend: \"weft_builtin\"\nmax_batch_size: 4\n" +
           "input [{ name: \"INPUT0\" data_type: TYPE_FP32 dims: [-1] }]\n" +
           "output [{ name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [-1] }]\n" +
           "parameters { key: \"builtin\" value: { string_value: \"identity\" } }\n" + extra;
  };
  TestServerOptions options;
  options.example_models = {"identity"};
  options.extra_configs["many_instances"] = model("many_instances", "instance_group { count: 100000 }");
  options.extra_configs["wrapping_groups"] =
      model("wrapping_groups", "instance_group [{ count: 2147483647 }, { count: 2147483647 }]");
  options.extra_configs["many_levels"] =
      model("many_levels", "dynamic_batching { priority_levels: 4294967295 default_priority_level: 1 }");
  options.extra_configs["long_delay"] =
      model("long_delay", "dynamic_batching { max_queue_delay_microseconds: 100000000000000000 }");
  auto server = TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  HttpTestClient client((*server)->port());
  for (const char* name : {"many_instances", "wrapping_groups", "many_levels", "long_delay"}) {
    TestResponse ready = client.Get(std::string("/v2/models/") + name + "/ready");
    ExpectError(ready, 503, "over the limit");
  }
  TestResponse ok = client.Post("/v2/models/identity/infer", InferJson({JsonInput("INPUT0", "FP32", {2}, "[1,2]")}));
  ASSERT_TRUE(ok.ok()) << ok.error;
  EXPECT_EQ(ok.status, 200u) << ok.body;
}

// The config endpoint answers the config as served: a file that leaves out the name and the instance groups shows
// the directory's name and the one instance it runs (bug: "name":"" and "instance_group":[]).
TEST(HttpApiConfigTest, ConfigWithoutNameOrGroupsShowsWhatIsServed) {
  TestServerOptions options;
  options.example_models = {};
  options.extra_configs["plain"] =
      "backend: \"weft_builtin\"\nmax_batch_size: 4\n"
      "input [{ name: \"INPUT0\" data_type: TYPE_FP32 dims: [-1] }]\n"
      "output [{ name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [-1] }]\n"
      "parameters { key: \"builtin\" value: { string_value: \"identity\" } }\n";
  auto server = TestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  HttpTestClient client((*server)->port());
  TestResponse config = client.Get("/v2/models/plain/config");
  ASSERT_TRUE(config.ok()) << config.error;
  EXPECT_EQ(config.status, 200u) << config.body;
  EXPECT_EQ(config.body.rfind("{\"name\":\"plain\",", 0), 0u) << config.body;
  EXPECT_NE(config.body.find("\"instance_group\":[{\"name\":\"plain\",\"count\":1,"), std::string::npos) << config.body;
}

}  // namespace
}  // namespace weft::testing
