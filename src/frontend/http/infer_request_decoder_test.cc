#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "frontend/http/float16.h"
#include "frontend/http/infer_codec.h"
#include "frontend/http/request_body.h"

namespace weft {
namespace {

// A body laid out as the server lays it out: padded, and with `json_size` aligned when given.
struct PaddedBody {
  std::shared_ptr<RequestBody> body = std::make_shared<RequestBody>();
  std::optional<size_t> json_size;

  InferBody view() const { return {body->bytes(), body, json_size}; }
};

PaddedBody MakeBody(std::string_view json, std::string_view binary = {}, bool binary_header = false) {
  PaddedBody out;
  std::string all = std::string(json) + std::string(binary);
  if (binary_header || !binary.empty()) out.json_size = json.size();
  out.body->Prepare(all.size(), out.json_size.value_or(0));
  std::memcpy(out.body->Append(all.size()), all.data(), all.size());
  return out;
}

const SteadyTime kArrival = SteadyTime() + std::chrono::seconds(100);

Result<DecodedInferRequest> Decode(std::string_view json) {
  return DecodeInferRequest(MakeBody(json).view(), kArrival);
}

std::string OneInput(std::string_view datatype, std::string_view shape, std::string_view data) {
  return R"({"inputs":[{"name":"x","datatype":")" + std::string(datatype) + R"(","shape":)" + std::string(shape) +
         R"(,"data":)" + std::string(data) + "}]}";
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> out(t.byte_size() / sizeof(T));
  std::memcpy(out.data(), t.data(), t.byte_size());
  return out;
}

void ExpectError(std::string_view json, StatusCode code, std::string_view needle) {
  auto decoded = Decode(json);
  ASSERT_FALSE(decoded.ok()) << json;
  EXPECT_EQ(decoded.status().code(), code) << decoded.status().ToString();
  EXPECT_NE(decoded.status().message().find(needle), std::string::npos)
      << "'" << needle << "' not in: " << decoded.status().message();
}

TEST(InferRequestDecoderTest, EveryDatatypeFromJson) {
  auto one = [](std::string_view type, std::string_view data) -> Tensor {
    auto decoded = Decode(OneInput(type, "[2]", data));
    EXPECT_TRUE(decoded.ok()) << type << ": " << decoded.status().ToString();
    if (!decoded.ok()) return Tensor();
    EXPECT_EQ(DataTypeName(decoded->request->inputs[0].type()), type);
    return decoded->request->inputs[0];
  };
  EXPECT_EQ(Values<uint8_t>(one("BOOL", "[true,false]")), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(Values<uint8_t>(one("UINT8", "[0,255]")), (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ(Values<uint16_t>(one("UINT16", "[0,65535]")), (std::vector<uint16_t>{0, 65535}));
  EXPECT_EQ(Values<uint32_t>(one("UINT32", "[1,4294967295]")), (std::vector<uint32_t>{1, 4294967295u}));
  EXPECT_EQ(Values<uint64_t>(one("UINT64", "[0,18446744073709551615]")),
            (std::vector<uint64_t>{0, std::numeric_limits<uint64_t>::max()}));
  EXPECT_EQ(Values<int8_t>(one("INT8", "[-128,127]")), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(Values<int16_t>(one("INT16", "[-32768,32767]")), (std::vector<int16_t>{-32768, 32767}));
  EXPECT_EQ(Values<int32_t>(one("INT32", "[-2147483648,2147483647]")),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()}));
  EXPECT_EQ(Values<int64_t>(one("INT64", "[-9223372036854775808,9223372036854775807]")),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(Values<uint16_t>(one("FP16", "[1.5,-2]")), (std::vector<uint16_t>{FloatToHalf(1.5f), 0xc000}));
  EXPECT_EQ(Values<float>(one("FP32", "[0.1,3]")), (std::vector<float>{0.1f, 3.0f}));
  EXPECT_EQ(Values<double>(one("FP64", "[0.1,-1e300]")), (std::vector<double>{0.1, -1e300}));
  EXPECT_EQ(Values<uint16_t>(one("BF16", "[1,-2.5]")), (std::vector<uint16_t>{0x3f80, FloatToBfloat16(-2.5f)}));
  Tensor bytes = one("BYTES", R"(["ab",""])");
  EXPECT_EQ(bytes.byte_size(), 4u + 2 + 4);
  auto elements = SplitBytesElements(bytes.bytes());
  ASSERT_EQ(elements.size(), 2u);
  EXPECT_EQ(elements[0], "ab");
  EXPECT_EQ(elements[1], "");
}

TEST(InferRequestDecoderTest, NestedAndFlatDataFillTheShape) {
  auto nested = Decode(OneInput("INT32", "[2,3]", "[[1,2,3],[4,5,6]]"));
  ASSERT_TRUE(nested.ok()) << nested.status().ToString();
  const Tensor& t = nested->request->inputs[0];
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(Values<int32_t>(t), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  auto flat = Decode(OneInput("INT32", "[2,3]", "[1,2,3,4,5,6]"));
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(Values<int32_t>(flat->request->inputs[0]), Values<int32_t>(t));
  auto empty = Decode(OneInput("FP32", "[0,4]", "[]"));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->request->inputs[0].byte_size(), 0u);
}

TEST(InferRequestDecoderTest, IntegersOutOfRangeOrMistypedAreRejected) {
  ExpectError(OneInput("UINT8", "[1]", "[256]"), StatusCode::kInvalidArgument, "256 is out of range for UINT8");
  ExpectError(OneInput("INT8", "[1]", "[-129]"), StatusCode::kInvalidArgument, "out of range for INT8");
  ExpectError(OneInput("UINT16", "[1]", "[-1]"), StatusCode::kInvalidArgument, "out of range for UINT16");
  ExpectError(OneInput("UINT32", "[1]", "[4294967296]"), StatusCode::kInvalidArgument, "out of range for UINT32");
  ExpectError(OneInput("INT32", "[1]", "[2147483648]"), StatusCode::kInvalidArgument, "out of range for INT32");
  ExpectError(OneInput("INT64", "[1]", "[9223372036854775808]"), StatusCode::kInvalidArgument,
              "out of range for INT64");
  ExpectError(OneInput("UINT64", "[1]", "[-1]"), StatusCode::kInvalidArgument, "out of range for UINT64");
  ExpectError(OneInput("INT32", "[2]", "[1,2.5]"), StatusCode::kInvalidArgument, "element 1: expected an integer");
  ExpectError(OneInput("INT32", "[1]", "[\"1\"]"), StatusCode::kInvalidArgument, "expected an integer");
  ExpectError(OneInput("BOOL", "[1]", "[1]"), StatusCode::kInvalidArgument, "expected true or false");
  ExpectError(OneInput("BYTES", "[1]", "[1]"), StatusCode::kInvalidArgument, "expected a string");
  ExpectError(OneInput("FP32", "[1]", "[true]"), StatusCode::kInvalidArgument, "expected a number");
}

TEST(InferRequestDecoderTest, FloatsOutOfRangeAreRejected) {
  ExpectError(OneInput("FP32", "[1]", "[1e39]"), StatusCode::kInvalidArgument, "out of range for FP32");
  ExpectError(OneInput("FP16", "[1]", "[70000]"), StatusCode::kInvalidArgument, "out of range for FP16");
  ExpectError(OneInput("BF16", "[1]", "[-1e39]"), StatusCode::kInvalidArgument, "out of range for BF16");
  auto max_half = Decode(OneInput("FP16", "[1]", "[65504]"));
  ASSERT_TRUE(max_half.ok());
  EXPECT_EQ(Values<uint16_t>(max_half->request->inputs[0])[0], 0x7bff);
  auto max_float = Decode(OneInput("FP32", "[1]", "[3.4028235e38]"));  // FLT_MAX as printed: rounds to it
  ASSERT_TRUE(max_float.ok()) << max_float.status().ToString();
  EXPECT_EQ(Values<float>(max_float->request->inputs[0])[0], std::numeric_limits<float>::max());
}

// The strings the encoder writes for non-finite values read back as those values.
TEST(InferRequestDecoderTest, NonFiniteFloatsAsStrings) {
  auto fp32 = Decode(OneInput("FP32", "[3]", R"(["NaN", "Infinity", "-Infinity"])"));
  ASSERT_TRUE(fp32.ok()) << fp32.status().ToString();
  std::vector<float> f = Values<float>(fp32->request->inputs[0]);
  EXPECT_TRUE(std::isnan(f[0]));
  EXPECT_EQ(f[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(f[2], -std::numeric_limits<float>::infinity());
  auto fp64 = Decode(OneInput("FP64", "[1]", R"(["-Infinity"])"));
  ASSERT_TRUE(fp64.ok());
  EXPECT_EQ(Values<double>(fp64->request->inputs[0])[0], -std::numeric_limits<double>::infinity());
  auto fp16 = Decode(OneInput("FP16", "[1]", R"(["Infinity"])"));
  ASSERT_TRUE(fp16.ok());
  EXPECT_EQ(Values<uint16_t>(fp16->request->inputs[0])[0], 0x7c00);
  ExpectError(OneInput("FP32", "[1]", R"(["nan"])"), StatusCode::kInvalidArgument, "expected a number");
  ExpectError(OneInput("INT32", "[1]", R"(["NaN"])"), StatusCode::kInvalidArgument, "expected an integer");
}

// FP32 in a flat array takes a one-pass path; whatever it cannot take (a string, an overflow, nesting) goes the
// general way, from the first element again, with the same values and errors.
TEST(InferRequestDecoderTest, FlatFp32DataThatLeavesTheFastPathDecodesTheSame) {
  auto plain = Decode(OneInput("FP32", "[4]", "[1.5, -2, 18446744073709551615, 0.1]"));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(Values<float>(plain->request->inputs[0]), (std::vector<float>{1.5f, -2.0f, 18446744073709551615.0f, 0.1f}));
  auto mixed = Decode(OneInput("FP32", "[4]", R"([1.5, 2, "Infinity", 4])"));
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ(Values<float>(mixed->request->inputs[0]),
            (std::vector<float>{1.5f, 2.0f, std::numeric_limits<float>::infinity(), 4.0f}));
  auto nested = Decode(OneInput("FP32", "[2,2]", "[[1, 2], [3, 4]]"));
  ASSERT_TRUE(nested.ok()) << nested.status().ToString();
  EXPECT_EQ(Values<float>(nested->request->inputs[0]), (std::vector<float>{1, 2, 3, 4}));
  ExpectError(OneInput("FP32", "[3]", "[1, 2, 1e39]"), StatusCode::kInvalidArgument, "element 2: ");
  ExpectError(OneInput("FP32", "[3]", "[1, true, 3]"), StatusCode::kInvalidArgument, "element 1: expected a number");
  ExpectError(OneInput("FP32", "[2]", "[1, 2, 3]"), StatusCode::kInvalidArgument, "more elements than the shape");
  ExpectError(OneInput("FP32", "[4]", "[1, 2, 3]"), StatusCode::kInvalidArgument, "data has 3 elements");
}

TEST(InferRequestDecoderTest, DataThatDoesNotFillTheShapeIsRejected) {
  ExpectError(OneInput("FP32", "[2,2]", "[1,2,3]"), StatusCode::kInvalidArgument, "data has 3 elements");
  ExpectError(OneInput("FP32", "[2]", "[1,2,3]"), StatusCode::kInvalidArgument, "more elements than the shape");
  ExpectError(OneInput("FP32", "[1000000000000]", "[1]"), StatusCode::kInvalidArgument, "more elements than");
  ExpectError(OneInput("FP32", "[4611686018427387904,4]", "[1]"), StatusCode::kInvalidArgument, "too large");
  ExpectError(OneInput("FP32", "[-1]", "[1]"), StatusCode::kInvalidArgument, "non-negative integers");
  ExpectError(OneInput("FP32", "3", "[1,2,3]"), StatusCode::kInvalidArgument, "'shape' must be an array");
  ExpectError(OneInput("FP32", "[1]", "1"), StatusCode::kInvalidArgument, "'data' must be an array");
}

TEST(InferRequestDecoderTest, MalformedOrIncompleteRequestsAreRejected) {
  ExpectError("{\"inputs\":[", StatusCode::kInvalidArgument, "malformed JSON");
  ExpectError("", StatusCode::kInvalidArgument, "malformed JSON");
  ExpectError("[1,2]", StatusCode::kInvalidArgument, "must be a JSON object");
  ExpectError("{}", StatusCode::kInvalidArgument, "no 'inputs'");
  ExpectError(R"({"inputs":{}})", StatusCode::kInvalidArgument, "'inputs' must be an array");
  ExpectError(R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", StatusCode::kInvalidArgument, "no 'name'");
  ExpectError(R"({"inputs":[{"name":"x","shape":[1],"data":[1]}]})", StatusCode::kInvalidArgument,
              "missing 'datatype'");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","data":[1]}]})", StatusCode::kInvalidArgument,
              "missing 'shape'");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})", StatusCode::kInvalidArgument,
              "missing 'data'");
  ExpectError(OneInput("FLOAT", "[1]", "[1]"), StatusCode::kInvalidArgument, "unknown datatype 'FLOAT'");
  ExpectError(OneInput("fp32", "[1]", "[1]"), StatusCode::kInvalidArgument, "unknown datatype");
  ExpectError(R"({"id":5,"inputs":[]})", StatusCode::kInvalidArgument, "'id' must be a string");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},)"
              R"({"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})",
              StatusCode::kInvalidArgument, "appears twice");
}

TEST(InferRequestDecoderTest, AShapeOfMoreThan64DimensionsIsRefused) {
  std::string ones = "[1";
  for (size_t i = 1; i < kMaxTensorRank; ++i) ones += ",1";
  EXPECT_TRUE(Decode(OneInput("FP32", ones + "]", "[1]")).ok());
  ExpectError(OneInput("FP32", ones + ",1]", "[1]"), StatusCode::kInvalidArgument,
              "'shape' has more than the 64 dimensions allowed");
}

TEST(InferRequestDecoderTest, IdParametersAndOutputs) {
  auto decoded = Decode(R"({"id":"req-7","parameters":{"priority":2,"timeout":1500,"binary_data_output":true,)"
                        R"("flag":true,"count":-3,"ratio":0.5,"name":"n","huge":18446744073709551615},)"
                        R"("inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],)"
                        R"("outputs":[{"name":"b"},{"name":"a","parameters":{"binary_data":false}}]})");
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const InferenceRequest& r = *decoded->request;
  EXPECT_EQ(r.id, "req-7");
  EXPECT_EQ(r.priority, 2u);
  ASSERT_TRUE(r.deadline.has_value());
  EXPECT_EQ(*r.deadline - kArrival, std::chrono::microseconds(1500));
  EXPECT_EQ(r.arrival, kArrival);
  EXPECT_EQ(r.parameters.count("priority"), 0u);
  EXPECT_EQ(r.parameters.count("binary_data_output"), 0u);
  EXPECT_EQ(std::get<bool>(r.parameters.at("flag")), true);
  EXPECT_EQ(std::get<int64_t>(r.parameters.at("count")), -3);
  EXPECT_EQ(std::get<double>(r.parameters.at("ratio")), 0.5);
  EXPECT_EQ(std::get<std::string>(r.parameters.at("name")), "n");
  EXPECT_GT(std::get<double>(r.parameters.at("huge")), 1.8e19);
  EXPECT_EQ(r.requested_outputs, (std::vector<std::string>{"b", "a"}));
  const OutputFormat& f = decoded->output_format;
  EXPECT_EQ(f.requested, r.requested_outputs);
  EXPECT_TRUE(f.IsBinary("b"));
  EXPECT_FALSE(f.IsBinary("a"));

  ExpectError(R"({"parameters":{"priority":-1},"inputs":[]})", StatusCode::kInvalidArgument, "'priority'");
  ExpectError(R"({"parameters":{"timeout":"soon"},"inputs":[]})", StatusCode::kInvalidArgument, "'timeout'");
  ExpectError(R"({"parameters":{"nested":{"a":1}},"inputs":[]})", StatusCode::kInvalidArgument,
              "must be a string, a number or a boolean");
  ExpectError(R"({"inputs":[],"outputs":[{"name":"a"},{"name":"a"}]})", StatusCode::kInvalidArgument,
              "requested twice");
  ExpectError(R"({"inputs":[],"outputs":[{"name":"a","parameters":{"classification":-3}}]})",
              StatusCode::kInvalidArgument, "'classification'");
  ExpectError(R"({"inputs":[],"outputs":[{"name":"a","parameters":{"classification":4294967296}}]})",
              StatusCode::kInvalidArgument, "'classification'");
  auto classification = Decode(R"({"inputs":[],"outputs":[{"name":"a","parameters":{"classification":3}},)"
                               R"({"name":"b","parameters":{"classification":0}}]})");
  ASSERT_TRUE(classification.ok()) << classification.status().ToString();
  EXPECT_EQ(classification->request->class_counts, (std::map<std::string, uint32_t>{{"a", 3}}));
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":)"
              R"({"shared_memory_region":"r"}}]})",
              StatusCode::kUnimplemented, "shared memory");
  auto no_timeout = Decode(R"({"parameters":{"timeout":0},"inputs":[]})");
  ASSERT_TRUE(no_timeout.ok());
  EXPECT_FALSE(no_timeout->request->deadline.has_value());
}

TEST(InferRequestDecoderTest, BinaryInputsViewTheBodyInPlace) {
  std::vector<float> values = {1.5f, -2.0f, 3.25f, 4.0f};
  std::string binary(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  std::string bytes_element("\x03\x00\x00\x00xyz", 7);
  std::string json = R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2,2],"parameters":{"binary_data_size":16}},)"
                     R"({"name":"s","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":7}}]})";
  PaddedBody body = MakeBody(json, binary + bytes_element);
  auto decoded = DecodeInferRequest(body.view(), kArrival);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const Tensor& a = decoded->request->inputs[0];
  EXPECT_EQ(a.data(), body.body->data() + json.size());  // zero-copy
  EXPECT_EQ(a.owner().get(), body.body.get());
  EXPECT_EQ(Values<float>(a), values);
  const Tensor& s = decoded->request->inputs[1];
  EXPECT_EQ(SplitBytesElements(s.bytes())[0], "xyz");
}

TEST(InferRequestDecoderTest, MisalignedBinaryInputIsCopiedAligned) {
  std::string binary = std::string("\x01\x02\x03", 3) + std::string(8, '\0');
  double one = 1.0;
  std::memcpy(binary.data() + 3, &one, 8);
  std::string json = R"({"inputs":[{"name":"a","datatype":"UINT8","shape":[3],"parameters":{"binary_data_size":3}},)"
                     R"({"name":"d","datatype":"FP64","shape":[1],"parameters":{"binary_data_size":8}}]})";
  PaddedBody body = MakeBody(json, binary);
  auto decoded = DecodeInferRequest(body.view(), kArrival);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const Tensor& d = decoded->request->inputs[1];
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d.data()) % alignof(double), 0u);
  EXPECT_EQ(d.as<double>()[0], 1.0);
}

TEST(InferRequestDecoderTest, BinarySizesThatDoNotAddUpAreRejected) {
  auto decode = [](std::string_view json, std::string_view binary) {
    return DecodeInferRequest(MakeBody(json, binary, true).view(), kArrival);
  };
  auto expect = [&](std::string_view json, std::string_view binary, std::string_view needle) {
    auto decoded = decode(json, binary);
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(decoded.status().message().find(needle), std::string::npos) << decoded.status().message();
  };
  std::string input = R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":)";
  expect(input + "8}}]}", std::string(4, 'x'), "exceeds the 4 bytes left");
  expect(input + "8}}]}", std::string(12, 'x'), "binary section has 12 bytes");
  expect(input + "4}}]}", std::string(4, 'x'), "needs 8 bytes, got 4");
  expect(input + "-8}}]}", std::string(8, 'x'), "binary_data_size");
  expect(R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"data":[1,2],)"
         R"("parameters":{"binary_data_size":8}}]})",
         std::string(8, 'x'), "both 'data' and 'binary_data_size'");
  expect(R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]})",
         std::string("\x09\0\0\0"
                     "ab",
                     6),
         "overruns");

  // Hardening issue, item 1, as reported: 4 * (2^62 + 2) bytes wrap to 8.
  expect(R"({"inputs":[{"name":"a","datatype":"FP32","shape":[4611686018427387906],)"
         R"("parameters":{"binary_data_size":8}}]})",
         std::string(8, 'x'), "larger than 2^64 bytes");

  PaddedBody body = MakeBody(R"({"inputs":[]})");
  body.json_size = 1000;
  auto too_long = DecodeInferRequest(body.view(), kArrival);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("exceeds the body size"), std::string::npos);
}

TEST(InferRequestDecoderTest, RawBinaryRequestFillsTheVariableDimension) {
  ModelConfig config;
  config.name = "m";
  config.max_batch_size = 8;
  TensorConfig input;
  input.name = "in";
  input.data_type = DataType::kFp32;
  input.dims = {-1, 2};
  config.inputs.push_back(input);
  std::vector<float> values = {1, 2, 3, 4, 5, 6};
  PaddedBody body = MakeBody(std::string_view(reinterpret_cast<const char*>(values.data()), 24), {}, true);
  body.json_size = 0;
  auto decoded = DecodeRawInferRequest(body.view(), config, kArrival);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const Tensor& t = decoded->request->inputs[0];
  EXPECT_EQ(t.shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(t.data(), body.body->data());
  EXPECT_TRUE(decoded->output_format.binary_by_default);

  PaddedBody odd = MakeBody("12345", {}, true);
  EXPECT_FALSE(DecodeRawInferRequest(odd.view(), config, kArrival).ok());
  config.inputs.push_back(config.inputs[0]);
  EXPECT_FALSE(DecodeRawInferRequest(body.view(), config, kArrival).ok());

  // Fixed dims whose product overflows cannot describe any body.
  config.inputs.resize(1);
  config.inputs[0].dims = {-1, 4611686018427387904};
  auto overflow = DecodeRawInferRequest(body.view(), config, kArrival);
  ASSERT_FALSE(overflow.ok());
  EXPECT_EQ(overflow.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace weft
