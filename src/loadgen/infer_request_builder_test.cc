#include "loadgen/infer_request_builder.h"

#include <gtest/gtest.h>
#include <simdjson.h>

namespace weft {
namespace {

std::string Header(const PreparedRequest& r, const std::string& name) {
  for (const auto& [key, value] : r.headers) {
    if (key == name) return value;
  }
  return "";
}

std::vector<GeneratedInput> TwoInputs() {
  ModelMetadata m{.name = "m", .inputs = {{"INPUT0", DataType::kFp32, {-1, 3}}, {"TEXT", DataType::kBytes, {-1, 2}}}};
  return *GenerateInputs(m, {.batch_size = 2, .max_batch_size = 8, .string_length = 4});
}

TEST(InferRequestBuilderTest, Paths) {
  EXPECT_EQ(ModelPath("", "sleep", ""), "/v2/models/sleep");
  EXPECT_EQ(ModelPath("/gw", "sleep", "3"), "/gw/v2/models/sleep/versions/3");
}

TEST(InferRequestBuilderTest, JsonBodyCarriesTheGeneratedValues) {
  std::vector<GeneratedInput> inputs = TwoInputs();
  PreparedRequest r =
      BuildInferRequest("/v2/models/m", inputs,
                        {.priority = 2, .timeout_us = 5000, .parameters = {{"source", "cam1"}, {"n", int64_t{7}}}});
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v2/models/m/infer");
  EXPECT_EQ(Header(r, "Content-Type"), "application/json");
  EXPECT_EQ(Header(r, "Inference-Header-Content-Length"), "");

  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.body);
  simdjson::dom::array json_inputs = doc["inputs"];
  ASSERT_EQ(json_inputs.size(), 2u);
  simdjson::dom::element first = json_inputs.at(0);
  EXPECT_EQ(std::string_view(first["name"]), "INPUT0");
  EXPECT_EQ(std::string_view(first["datatype"]), "FP32");
  simdjson::dom::array shape = first["shape"];
  EXPECT_EQ(int64_t(shape.at(0)), 2);
  EXPECT_EQ(int64_t(shape.at(1)), 3);
  simdjson::dom::array data = first["data"];
  ASSERT_EQ(data.size(), 6u);
  // The JSON numbers are the generated floats exactly (shortest round-trip form).
  for (size_t i = 0; i < 6; ++i) {
    float generated;
    std::memcpy(&generated, inputs[0].data.data() + 4 * i, 4);
    EXPECT_EQ(static_cast<float>(double(data.at(i))), generated) << i;
  }
  simdjson::dom::array text = json_inputs.at(1)["data"];
  ASSERT_EQ(text.size(), 4u);
  EXPECT_EQ(std::string_view(text.at(0)), inputs[1].data.substr(4, 4));
  simdjson::dom::element parameters = doc["parameters"];
  EXPECT_EQ(int64_t(parameters["priority"]), 2);
  EXPECT_EQ(int64_t(parameters["timeout"]), 5000);
  EXPECT_EQ(std::string_view(parameters["source"]), "cam1");
  EXPECT_EQ(int64_t(parameters["n"]), 7);
  EXPECT_TRUE(parameters["binary_data_output"].error());
}

TEST(InferRequestBuilderTest, BinaryBodyIsHeaderThenTensorsInOrder) {
  std::vector<GeneratedInput> inputs = TwoInputs();
  PreparedRequest r = BuildInferRequest("/v2/models/m", inputs, {.binary = true});
  EXPECT_EQ(Header(r, "Content-Type"), "application/octet-stream");
  size_t header = std::stoul(Header(r, "Inference-Header-Content-Length"));
  ASSERT_EQ(r.body.size(), header + inputs[0].data.size() + inputs[1].data.size());
  EXPECT_EQ(r.body.substr(header, inputs[0].data.size()), inputs[0].data);
  EXPECT_EQ(r.body.substr(header + inputs[0].data.size()), inputs[1].data);

  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.body.substr(0, header));
  simdjson::dom::array json_inputs = doc["inputs"];
  EXPECT_EQ(int64_t(json_inputs.at(0)["parameters"]["binary_data_size"]), 24);           // 2x3 FP32
  EXPECT_EQ(int64_t(json_inputs.at(1)["parameters"]["binary_data_size"]), 4 * (4 + 4));  // 2x2 BYTES of 4
  EXPECT_TRUE(json_inputs.at(0)["data"].error()) << "binary inputs carry no JSON data";
  EXPECT_TRUE(bool(doc["parameters"]["binary_data_output"]));
}

TEST(InferRequestBuilderTest, JsonRendersEveryDatatype) {
  auto one = [](DataType type, std::string bytes) {
    GeneratedInput input{.name = "x", .datatype = type, .shape = {1}, .data = std::move(bytes)};
    std::string out;
    AppendJsonTensorData(input, &out);
    return out;
  };
  EXPECT_EQ(one(DataType::kBool, std::string("\x01", 1)), "[true]");
  EXPECT_EQ(one(DataType::kInt8, "\xff"), "[-1]");
  EXPECT_EQ(one(DataType::kInt16, "\xfe\xff"), "[-2]");
  EXPECT_EQ(one(DataType::kUint16, "\xfe\xff"), "[65534]");
  EXPECT_EQ(one(DataType::kInt64, std::string("\x05\0\0\0\0\0\0\0", 8)), "[5]");
  EXPECT_EQ(one(DataType::kFp16, std::string("\x00\x3c", 2)), "[1]");
  EXPECT_EQ(one(DataType::kBf16, std::string("\x00\xbf", 2)), "[-0.5]");
  EXPECT_EQ(one(DataType::kFp64, std::string("\0\0\0\0\0\0\xe0\x3f", 8)), "[0.5]");
  EXPECT_EQ(one(DataType::kBytes, std::string("\x02\0\0\0a\"", 6)), "[\"a\\\"\"]");
}

TEST(InferRequestBuilderTest, RawBodyMustBeAJsonObject) {
  auto ok = RawInferRequest("/v2/models/m", R"({"inputs":[]})");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->body, R"({"inputs":[]})");
  EXPECT_EQ(ok->target, "/v2/models/m/infer");
  EXPECT_FALSE(RawInferRequest("/v2/models/m", "{oops").ok());
  EXPECT_FALSE(RawInferRequest("/v2/models/m", "[1]").ok());
}

}  // namespace
}  // namespace weft
