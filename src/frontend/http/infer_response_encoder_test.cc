#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <cstring>

#include "frontend/http/float16.h"
#include "frontend/http/infer_codec.h"

namespace weft {
namespace {

template <typename T>
Tensor Make(std::string name, DataType type, Shape shape, std::vector<T> values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return Tensor::FromBytes(std::move(name), type, std::move(shape), std::move(bytes));
}

Tensor Strings(std::string name, std::vector<std::string> values) {
  Shape shape{static_cast<int64_t>(values.size())};
  return Tensor::FromBytes(std::move(name), DataType::kBytes, shape, JoinBytesElements(values));
}

InferenceResponse Response(std::vector<Tensor> outputs) {
  InferenceResponse r;
  r.model_name = "m";
  r.model_version = 3;
  r.outputs = std::move(outputs);
  return r;
}

TEST(InferResponseEncoderTest, EveryDatatypeAsJson) {
  InferenceResponse response = Response({
      Make<uint8_t>("bool", DataType::kBool, {2}, {1, 0}),
      Make<uint8_t>("u8", DataType::kUint8, {1}, {255}),
      Make<uint16_t>("u16", DataType::kUint16, {1}, {65535}),
      Make<uint32_t>("u32", DataType::kUint32, {1}, {4294967295u}),
      Make<uint64_t>("u64", DataType::kUint64, {1}, {18446744073709551615ull}),
      Make<int8_t>("i8", DataType::kInt8, {1}, {-128}),
      Make<int16_t>("i16", DataType::kInt16, {1}, {-32768}),
      Make<int32_t>("i32", DataType::kInt32, {1}, {-7}),
      Make<int64_t>("i64", DataType::kInt64, {1}, {-9223372036854775807ll}),
      Make<uint16_t>("f16", DataType::kFp16, {2}, {FloatToHalf(1.5f), FloatToHalf(0.1f)}),
      Make<float>("f32", DataType::kFp32, {2, 1}, {0.1f, -3.0f}),
      Make<double>("f64", DataType::kFp64, {1}, {0.1}),
      Make<uint16_t>("bf16", DataType::kBf16, {1}, {FloatToBfloat16(-2.5f)}),
      Strings("s", {"a\"b", ""}),
  });
  response.id = "id-1";
  auto encoded = EncodeInferResponse(response, OutputFormat());
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  EXPECT_TRUE(encoded->binary.empty());
  EXPECT_EQ(encoded->json, R"({"model_name":"m","model_version":"3","id":"id-1","outputs":[)"
                           R"({"name":"bool","datatype":"BOOL","shape":[2],"data":[true,false]},)"
                           R"({"name":"u8","datatype":"UINT8","shape":[1],"data":[255]},)"
                           R"({"name":"u16","datatype":"UINT16","shape":[1],"data":[65535]},)"
                           R"({"name":"u32","datatype":"UINT32","shape":[1],"data":[4294967295]},)"
                           R"({"name":"u64","datatype":"UINT64","shape":[1],"data":[18446744073709551615]},)"
                           R"({"name":"i8","datatype":"INT8","shape":[1],"data":[-128]},)"
                           R"({"name":"i16","datatype":"INT16","shape":[1],"data":[-32768]},)"
                           R"({"name":"i32","datatype":"INT32","shape":[1],"data":[-7]},)"
                           R"({"name":"i64","datatype":"INT64","shape":[1],"data":[-9223372036854775807]},)"
                           R"({"name":"f16","datatype":"FP16","shape":[2],"data":[1.5,0.099975586]},)"
                           R"({"name":"f32","datatype":"FP32","shape":[2,1],"data":[0.1,-3]},)"
                           R"({"name":"f64","datatype":"FP64","shape":[1],"data":[0.1]},)"
                           R"({"name":"bf16","datatype":"BF16","shape":[1],"data":[-2.5]},)"
                           R"({"name":"s","datatype":"BYTES","shape":[2],"data":["a\"b",""]}]})");
}

TEST(InferResponseEncoderTest, ResponseParametersAreAnObjectOfStrings) {
  InferenceResponse response = Response({Make<int32_t>("y", DataType::kInt32, {1}, {5})});
  response.parameters = {{"weft_fallback_from", "det/2"}, {"weft_fallback_reason", "circuit_open"}};
  auto encoded = EncodeInferResponse(response, OutputFormat());
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  EXPECT_EQ(encoded->json, R"({"model_name":"m","model_version":"3","parameters":)"
                           R"({"weft_fallback_from":"det/2","weft_fallback_reason":"circuit_open"},"outputs":[)"
                           R"({"name":"y","datatype":"INT32","shape":[1],"data":[5]}]})");
}

TEST(InferResponseEncoderTest, RequestedSubsetInRequestOrderWithBinaryOutputs) {
  InferenceResponse response = Response({Make<float>("a", DataType::kFp32, {1}, {1.0f}),
                                         Make<float>("b", DataType::kFp32, {2}, {2.0f, 3.0f}), Strings("c", {"xyz"})});
  OutputFormat format;
  format.requested = {"c", "b"};
  format.binary_by_default = true;
  format.binary["b"] = false;
  auto encoded = EncodeInferResponse(response, format);
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  EXPECT_EQ(encoded->json, R"({"model_name":"m","model_version":"3","outputs":[)"
                           R"({"name":"c","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":7}},)"
                           R"({"name":"b","datatype":"FP32","shape":[2],"data":[2,3]}]})");
  ASSERT_EQ(encoded->binary.size(), 1u);
  EXPECT_EQ(encoded->binary[0].name(), "c");
  EXPECT_EQ(encoded->binary[0].byte_size(), 7u);
}

TEST(InferResponseEncoderTest, NonUtf8BytesNeedBinary) {
  InferenceResponse response = Response({Strings("s", {std::string("\xff\xfe", 2)})});
  auto json = EncodeInferResponse(response, OutputFormat());
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), StatusCode::kInvalidArgument);
  OutputFormat binary;
  binary.binary_by_default = true;
  EXPECT_TRUE(EncodeInferResponse(response, binary).ok());
}

TEST(InferResponseEncoderTest, MissingOrBrokenOutputsAreInternalErrors) {
  InferenceResponse response = Response({Make<float>("a", DataType::kFp32, {2}, {1.0f})});  // 4 bytes for 2
  auto broken = EncodeInferResponse(response, OutputFormat());
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), StatusCode::kInternal);
  OutputFormat missing;
  missing.requested = {"zzz"};
  auto absent = EncodeInferResponse(Response({}), missing);
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), StatusCode::kInternal);
}

// Hardening issue, item 6: bare NaN and Infinity are not JSON, and strict parsers rejected the whole answer.
TEST(InferResponseEncoderTest, NonFiniteFloatsAreStrings) {
  auto encoded = EncodeInferResponse(Response({Make<float>("f", DataType::kFp32, {3}, {NAN, INFINITY, -INFINITY}),
                                               Make<double>("d", DataType::kFp64, {1}, {NAN})}),
                                     OutputFormat());
  ASSERT_TRUE(encoded.ok());
  EXPECT_NE(encoded->json.find(R"(["NaN","Infinity","-Infinity"])"), std::string::npos) << encoded->json;
  EXPECT_NE(encoded->json.find(R"(["NaN"])"), std::string::npos) << encoded->json;
  simdjson::dom::parser parser;
  simdjson::padded_string json(encoded->json);
  EXPECT_EQ(parser.parse(json).error(), simdjson::SUCCESS) << encoded->json;
}

}  // namespace
}  // namespace weft
