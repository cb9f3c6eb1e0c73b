#include "loadgen/grpc_transport.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include "grpc_service.pb.h"
#include "loadgen/client_shared_memory.h"
#include "loadgen/run_stats.h"

namespace weft {
namespace {

TEST(GrpcTargetTest, ParsesHostAndPort) {
  EXPECT_EQ(ParseGrpcTarget("127.0.0.1:9001").value(), "127.0.0.1:9001");
  EXPECT_EQ(ParseGrpcTarget("grpc://localhost").value(), "localhost:8001");
  EXPECT_EQ(ParseGrpcTarget("[::1]:7").value(), "[::1]:7");
  EXPECT_EQ(ParseGrpcTarget("[::1]").value(), "[::1]:8001");
  for (const char* bad : {"http://h:1", "h:0", "h:x", "h:1/path", "", "[::1", ":80"}) {
    EXPECT_FALSE(ParseGrpcTarget(bad).ok()) << bad;
  }
}

TEST(GrpcOutcomeTest, NamesGrpcCodes) {
  EXPECT_EQ(OutcomeName(kOutcomeGrpc), "OK");
  EXPECT_EQ(OutcomeName(kOutcomeGrpc + 8), "RESOURCE_EXHAUSTED");
  EXPECT_TRUE(IsSuccess(kOutcomeGrpc));
  EXPECT_FALSE(IsSuccess(kOutcomeGrpc + 4));
  EXPECT_TRUE(IsAnswer(kOutcomeGrpc + 14));
  EXPECT_EQ(OutcomeName(200), "200");
}

GeneratedInput Input(std::string name, std::vector<int64_t> shape, std::string data) {
  return GeneratedInput{std::move(name), DataType::kFp32, std::move(shape), std::move(data)};
}

TEST(GrpcInferRequestTest, RawInputsParametersAndSharedMemory) {
  std::vector<GeneratedInput> inputs = {Input("a", {1, 2}, std::string(8, 'x')), Input("b", {1}, std::string(4, 'y'))};
  InferRequestOptions options{.priority = 2, .timeout_us = 500, .parameters = {{"source", std::string("cam1")}}};
  PreparedRequest raw = BuildGrpcInferRequest("m", "3", inputs, options);
  EXPECT_EQ(raw.target, "/inference.GRPCInferenceService/ModelInfer");
  inference::ModelInferRequest message;
  ASSERT_TRUE(message.ParseFromString(raw.body));
  EXPECT_EQ(message.model_name(), "m");
  EXPECT_EQ(message.model_version(), "3");
  ASSERT_EQ(message.inputs_size(), 2);
  EXPECT_EQ(message.inputs(0).datatype(), "FP32");
  EXPECT_EQ(message.inputs(0).shape_size(), 2);
  ASSERT_EQ(message.raw_input_contents_size(), 2);
  EXPECT_EQ(message.raw_input_contents(1), "yyyy");
  EXPECT_EQ(message.parameters().at("priority").int64_param(), 2);
  EXPECT_EQ(message.parameters().at("timeout").int64_param(), 500);
  EXPECT_EQ(message.parameters().at("source").string_param(), "cam1");

  options.shared_memory_inputs = {{"a", {"in", 0, 8}}, {"b", {"in", 64, 4}}};
  options.shared_memory_outputs = {{"y", {"out", 128, 16}}};
  inference::ModelInferRequest shm;
  ASSERT_TRUE(shm.ParseFromString(BuildGrpcInferRequest("m", "", inputs, options).body));
  EXPECT_EQ(shm.raw_input_contents_size(), 0);  // nothing travels in the request
  EXPECT_EQ(shm.inputs(1).parameters().at("shared_memory_offset").int64_param(), 64);
  ASSERT_EQ(shm.outputs_size(), 1);
  EXPECT_EQ(shm.outputs(0).parameters().at("shared_memory_region").string_param(), "out");
  EXPECT_EQ(shm.outputs(0).parameters().at("shared_memory_byte_size").int64_param(), 16);
}

TEST(HttpInferRequestTest, SharedMemoryPlacementsReplaceData) {
  std::vector<GeneratedInput> inputs = {Input("a", {2}, std::string(8, '\0'))};
  InferRequestOptions options;
  options.shared_memory_inputs = {{"a", {"in", 0, 8}}};
  options.shared_memory_outputs = {{"y", {"out", 64, 8}}};
  PreparedRequest request = BuildInferRequest("/v2/models/m", inputs, options);
  EXPECT_EQ(request.body,
            R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"shared_memory_region":"in",)"
            R"("shared_memory_offset":0,"shared_memory_byte_size":8}}],"outputs":[{"name":"y","parameters":)"
            R"({"shared_memory_region":"out","shared_memory_offset":64,"shared_memory_byte_size":8}}]})");
}

TEST(ClientSharedMemoryTest, LaysOutInputsAndOutputsAndUnlinks) {
  ModelMetadata metadata;
  metadata.outputs = {
      {"fixed", DataType::kFp32, {-1, 16}}, {"open", DataType::kFp32, {-1, -1}}, {"text", DataType::kBytes, {-1}}};
  std::vector<GeneratedInput> inputs = {Input("a", {2, 3}, std::string(24, 'a')), Input("b", {1}, std::string(4, 'b'))};
  std::string input_key;
  {
    auto run = CreateSharedMemoryRun(inputs, metadata, /*batches=*/true, /*batch_size=*/2, /*output_byte_size=*/0);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    EXPECT_EQ(run->input_placements.at("a").offset, 0u);
    EXPECT_EQ(run->input_placements.at("b").offset, 64u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(run->inputs->data() + 64), 4), "bbbb");
    EXPECT_EQ(run->output_placements.at("fixed").byte_size, 2u * 16 * 4);
    EXPECT_EQ(run->output_placements.at("open").byte_size, 100u << 10);  // not fixed by the metadata
    EXPECT_EQ(run->output_placements.at("text").offset % 64, 0u);
    input_key = run->inputs->key();
  }
  EXPECT_LT(shm_open(input_key.c_str(), O_RDONLY, 0), 0);  // unlinked with the run
  auto sized = CreateSharedMemoryRun(inputs, metadata, true, 2, 4096);
  ASSERT_TRUE(sized.ok());
  EXPECT_EQ(sized->output_placements.at("open").byte_size, 4096u);
}

}  // namespace
}  // namespace weft
