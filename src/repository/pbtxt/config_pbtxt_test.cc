#include "repository/pbtxt/config_pbtxt.h"

#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "model_config.pb.h"

namespace weft {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kSource[] = "models/m/config.pbtxt";
constexpr char kJsonSource[] = "parameters.config";

// Every field weft reads, in Triton's syntax (both list styles, comments, nested messages).
constexpr char kFullConfig[] = R"cfg(
# A Triton-style config.
name: "m"
platform: "pytorch_libtorch"
backend: "pytorch"
runtime: "libtorch.so"
max_batch_size: 8
version_policy: { specific: { versions: [1, 3] } }
input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, -1, -1 ]
    allow_ragged_batch: false
    optional: false
  },
  {
    name: "SCALAR"
    data_type: TYPE_INT64
    dims: [ 1 ]
    reshape: { shape: [ ] }
    is_shape_tensor: false
  }
]
input {
  name: "TEXT"
  data_type: TYPE_STRING
  dims: [ 2 ]
}
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP16
    dims: [ 10 ]
    label_filename: "labels.txt"
  },
  { name: "OUTPUT1" data_type: TYPE_BF16 dims: [ 2, 5 ] reshape: { shape: [ 10 ] } }
]
instance_group [
  { name: "gpu_group" count: 2 kind: KIND_GPU gpus: [ 0, 1 ] profile: [ "0" ] passive: false },
  { count: 1 kind: KIND_CPU }
]
default_model_filename: "weights.pt"
cc_model_filenames { key: "8.0" value: "model_a100.pt" }
metric_tags { key: "team" value: "vision" }
parameters { key: "INFERENCE_MODE" value: { string_value: "true" } }
parameters [ { key: "ENABLE_NVFUSER" value: { string_value: "false" } } ]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
  preserve_ordering: true
}
optimization {
  priority: PRIORITY_MAX
  graph: { level: 1 }
  cuda { graphs: true busy_wait_events: false output_copy_stream: false }
  execution_accelerators {
    gpu_execution_accelerator : [ { name : "tensorrt" parameters { key: "precision_mode" value: "FP16" } } ]
  }
  input_pinned_memory { enable: true }
  eager_batching: true
}
model_warmup [
  {
    name: "zeros"
    batch_size: 1
    inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 3, 8, 8 ] zero_data: true } }
    inputs { key: "SCALAR" value: { data_type: TYPE_INT64 dims: [ 1 ] random_data: true } }
    inputs { key: "TEXT" value: { data_type: TYPE_STRING dims: [ 2 ] input_data_file: "text.bin" } }
    count: 2
  }
]
model_transaction_policy { decoupled: false }
response_cache { enable: true }
)cfg";

TEST(ConfigPbtxtTest, ParsesEveryFieldOfATritonConfig) {
  auto parsed = ParseModelConfigText(kFullConfig, kSource);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const ModelConfig& c = *parsed;
  EXPECT_EQ(c.name, "m");
  EXPECT_EQ(c.platform, "pytorch_libtorch");
  EXPECT_EQ(c.backend, "pytorch");
  EXPECT_EQ(c.max_batch_size, 8);
  EXPECT_EQ(c.version_policy.kind, VersionPolicyConfig::Kind::kSpecific);
  EXPECT_EQ(c.version_policy.versions, (std::vector<int64_t>{1, 3}));

  ASSERT_EQ(c.inputs.size(), 3u);
  EXPECT_EQ(c.inputs[0].name, "INPUT0");
  EXPECT_EQ(c.inputs[0].data_type, DataType::kFp32);
  EXPECT_EQ(c.inputs[0].dims, (Shape{3, -1, -1}));
  EXPECT_FALSE(c.inputs[0].reshape.has_value());
  EXPECT_EQ(c.inputs[1].data_type, DataType::kInt64);
  ASSERT_TRUE(c.inputs[1].reshape.has_value());  // reshape to a scalar: present and empty
  EXPECT_TRUE(c.inputs[1].reshape->empty());
  EXPECT_EQ(c.inputs[2].data_type, DataType::kBytes);

  ASSERT_EQ(c.outputs.size(), 2u);
  EXPECT_EQ(c.outputs[0].data_type, DataType::kFp16);
  EXPECT_EQ(c.outputs[1].data_type, DataType::kBf16);
  EXPECT_EQ(c.outputs[1].dims, (Shape{2, 5}));
  EXPECT_EQ(c.outputs[1].reshape, (Shape{10}));

  ASSERT_EQ(c.instance_groups.size(), 2u);
  EXPECT_EQ(c.instance_groups[0].name, "gpu_group");
  EXPECT_EQ(c.instance_groups[0].count, 2);
  EXPECT_EQ(c.instance_groups[0].kind, InstanceKind::kGpu);
  EXPECT_EQ(c.instance_groups[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(c.instance_groups[1].kind, InstanceKind::kCpu);
  EXPECT_EQ(c.InstanceCount(), 5);  // count per listed GPU: 2 x 2, and 1 on the CPU

  EXPECT_EQ(c.default_model_filename, "weights.pt");
  EXPECT_EQ(c.parameters,
            (std::map<std::string, std::string>{{"ENABLE_NVFUSER", "false"}, {"INFERENCE_MODE", "true"}}));
  ASSERT_TRUE(c.dynamic_batching.has_value());
  EXPECT_EQ(c.dynamic_batching->preferred_batch_size, (std::vector<int>{4, 8}));
  EXPECT_EQ(c.dynamic_batching->max_queue_delay_us, 100u);
  EXPECT_TRUE(c.dynamic_batching->preserve_ordering);
  EXPECT_EQ(c.dynamic_batching->priority_levels, 0u);
  EXPECT_EQ(c.priority, ModelPriority::kMax);

  ASSERT_EQ(c.warmup.size(), 1u);
  EXPECT_EQ(c.warmup[0].name, "zeros");
  EXPECT_EQ(c.warmup[0].batch_size, 1u);
  EXPECT_EQ(c.warmup[0].count, 2u);
  using Source = WarmupInputConfig::Source;
  EXPECT_EQ(c.warmup[0].inputs,
            (std::map<std::string, WarmupInputConfig>{
                {"INPUT0", {.data_type = DataType::kFp32, .dims = {3, 8, 8}, .source = Source::kZero}},
                {"SCALAR", {.data_type = DataType::kInt64, .dims = {1}, .source = Source::kRandom}},
                {"TEXT", {.data_type = DataType::kBytes, .dims = {2}, .source = Source::kFile, .file = "text.bin"}}}));
}

TEST(ConfigPbtxtTest, DynamicBatchingWithPriorityQueuePolicies) {
  auto parsed = ParseModelConfigText(R"cfg(
    name: "m" max_batch_size: 4
    input { name: "x" data_type: TYPE_FP32 dims: [1] }
    output { name: "y" data_type: TYPE_FP32 dims: [1] }
    optimization { priority: PRIORITY_MIN }
    dynamic_batching {
      priority_levels: 3
      default_priority_level: 2
      default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5000 allow_timeout_override: true
                             max_queue_size: 64 }
      priority_queue_policy { key: 1 value { max_queue_size: 8 } }
      priority_queue_policy [ { key: 3 value: { timeout_action: REJECT
                                                default_timeout_microseconds: 31536000000000 } } ]
    }
  )cfg",
                                     kSource);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->priority, ModelPriority::kMin);
  const DynamicBatchingConfig& db = *parsed->dynamic_batching;
  EXPECT_EQ(db.priority_levels, 3u);
  EXPECT_EQ(db.default_priority_level, 2u);
  EXPECT_EQ(db.default_queue_policy.timeout_action, QueuePolicyConfig::TimeoutAction::kDelay);
  EXPECT_EQ(db.default_queue_policy.default_timeout_us, 5000u);
  EXPECT_TRUE(db.default_queue_policy.allow_timeout_override);
  EXPECT_EQ(db.default_queue_policy.max_queue_size, 64u);
  ASSERT_EQ(db.priority_queue_policy.size(), 2u);
  EXPECT_EQ(db.priority_queue_policy.at(1).max_queue_size, 8u);
  EXPECT_EQ(db.priority_queue_policy.at(1).timeout_action, QueuePolicyConfig::TimeoutAction::kReject);
  EXPECT_EQ(db.priority_queue_policy.at(3).default_timeout_us, 31536000000000u);  // a year: the limit
  // 64-bit values are JSON numbers, exactly.
  EXPECT_THAT(parsed->json, HasSubstr("\"default_timeout_microseconds\":31536000000000"));
  EXPECT_THAT(parsed->json, HasSubstr("\"priority_queue_policy\":{\"1\":{"));
}

TEST(ConfigPbtxtTest, PriorityQueuePolicyOutsideTheLevelsIsAnError) {
  auto parsed = ParseModelConfigText(R"cfg(
    name: "m" max_batch_size: 4
    input { name: "x" data_type: TYPE_FP32 dims: [1] }
    output { name: "y" data_type: TYPE_FP32 dims: [1] }
    dynamic_batching { priority_levels: 2 default_priority_level: 1 priority_queue_policy { key: 3 value {} } }
  )cfg",
                                     kSource);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), std::string(kSource) +
                                           ": dynamic_batching.priority_queue_policy[3]: priority level is outside "
                                           "[1, priority_levels = 2]");
}

TEST(ConfigPbtxtTest, UnknownFieldsAreSkippedWithAWarningThatNamesThem) {
  ::testing::internal::CaptureStderr();
  auto parsed = ParseModelConfigText(R"cfg(
    name: "m"
    input { name: "x" data_type: TYPE_FP32 dims: [1] future_flag: true }
    output { name: "y" data_type: TYPE_FP32 dims: [1] }
    future_policy { level: 3 nested { a: "b" } list: [ 1, 2 ] }
    future_list: [ { a: 1 }, { a: 2 } ]
  )cfg",
                                     kSource);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_THAT(log, HasSubstr(std::string(kSource) + ":3:"));
  EXPECT_THAT(log, HasSubstr("future_flag"));
  EXPECT_THAT(log, HasSubstr(std::string(kSource) + ":5:"));
  EXPECT_THAT(log, HasSubstr("future_policy"));
  EXPECT_THAT(log, HasSubstr(std::string(kSource) + ":6:"));
  EXPECT_THAT(log, HasSubstr("future_list"));
  EXPECT_THAT(parsed->json, ::testing::Not(HasSubstr("future")));
}

// protobuf's text parser skips an unknown field's value by recursion: nesting is bounded before it parses (a
// 300 KB config of `x: [[[...` overflowed the stack and took the server down).
TEST(ConfigPbtxtTest, DeepNestingIsRefusedBeforeItIsParsed) {
  const std::string io =
      "name: \"m\" input { name: \"x\" data_type: TYPE_FP32 dims: [1] } "
      "output { name: \"y\" data_type: TYPE_FP32 dims: [1] } ";
  auto messages = [](int depth, const char* open, const char* close) {
    std::string text;
    for (int i = 0; i < depth; ++i) text += std::string("future ") + open + " ";
    for (int i = 0; i < depth; ++i) text += close;
    return text;
  };
  ::testing::internal::CaptureStderr();
  auto at_limit = ParseModelConfigText(io + messages(32, "{", "}"), kSource);
  ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(at_limit.ok()) << at_limit.status().ToString();
  const std::string refused = std::string(kSource) + ": messages and lists nest deeper than 32 levels";
  for (const std::string& deep : {messages(33, "{", "}"), messages(200000, "{", "}"), messages(200000, "<", ">"),
                                  "future: " + std::string(200000, '[') + std::string(200000, ']')}) {
    auto parsed = ParseModelConfigText(io + deep, kSource);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().message(), refused);
  }
  // Brackets in strings (either quote, escaped quotes included) and in comments are not nesting.
  const std::string brackets(100, '[');
  auto in_strings = ParseModelConfigText("platform: 'x\\'\"" + brackets + "' # " + brackets + "{<\n" + io, kSource);
  ASSERT_TRUE(in_strings.ok()) << in_strings.status().ToString();
  EXPECT_EQ(in_strings->platform, "x'\"" + brackets);
}

// A config of many unknown fields is logged in a bounded number of lines.
TEST(ConfigPbtxtTest, ManyUnknownFieldsAreCountedAfterTheFirstTwenty) {
  std::string text =
      "name: \"m\" input { name: \"x\" data_type: TYPE_FP32 dims: [1] } "
      "output { name: \"y\" data_type: TYPE_FP32 dims: [1] }\n";
  for (int i = 0; i < 1000; ++i) text += "future_" + std::to_string(i) + ": 1\n";
  ::testing::internal::CaptureStderr();
  auto parsed = ParseModelConfigText(text, kSource);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_THAT(log, HasSubstr("future_19"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("future_20")));
  EXPECT_THAT(log, HasSubstr(std::string(kSource) + ": 980 more unknown fields."));
}

// protobuf's text parser cannot skip an unknown list of messages written without a colon; the error must still
// say where. (This is why proto/model_config.proto declares every such field of the current Triton schema.)
TEST(ConfigPbtxtTest, UnknownListOfMessagesWithoutColonIsAnErrorWithAPosition) {
  auto parsed = ParseModelConfigText("name: \"m\"\nfuture_list [ { a: 1 } ]\n", kSource);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), StartsWith(std::string(kSource) + ":2:"));
}

// Triton features weft rejects or ignores still parse in Triton's own syntax, lists without colons included.
TEST(ConfigPbtxtTest, CurrentTritonFieldsParseInListSyntax) {
  const std::string io = R"cfg(
    name: "m" max_batch_size: 4
    input [ { name: "x" data_type: TYPE_FP32 dims: [1] } ]
    output [ { name: "y" data_type: TYPE_FP32 dims: [1] } ]
  )cfg";
  auto ignored = ParseModelConfigText(io + R"cfg(
    instance_group [ { kind: KIND_GPU secondary_devices [ { kind: KIND_NVDLA device_id: 0 } ]
                       rate_limiter { resources [ { name: "R1" count: 2 } ] priority: 2 } } ]
    optimization { cuda { graphs: true graph_spec [ { batch_size: 4 input [ { key: "x" value { dim: [1] } } ]
                                                      graph_lower_bound { batch_size: 1 } } ] } }
    model_repository_agents { agents [ { name: "checksum" parameters [ { key: "MD5:model.pt" value: "abc" } ] } ] }
    model_metrics { metric_control [ { metric_identifier { family: "nv_inference_first_response_histogram_ms" }
                                       histogram_options { buckets: [ 1, 2.5, 4 ] } } ] }
    model_operations { op_library_filename: [ "libops.so" ] }
  )cfg",
                                      kSource);
  ASSERT_TRUE(ignored.ok()) << ignored.status().ToString();
  EXPECT_THAT(ignored->json, HasSubstr("\"buckets\":[1,2.5,4]"));

  auto sequence = ParseModelConfigText(io + R"cfg(
    sequence_batching {
      max_sequence_idle_microseconds: 5000000
      oldest { max_candidate_sequences: 4 }
      control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] } ]
      state [ { input_name: "s_in" output_name: "s_out" data_type: TYPE_FP32 dims: [ -1 ]
                initial_state [ { name: "zeros" data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } ] } ]
    }
  )cfg",
                                       kSource);
  ASSERT_FALSE(sequence.ok());
  EXPECT_EQ(sequence.status().message(), std::string(kSource) + ": sequence_batching: not supported by weft");

  auto ensemble = ParseModelConfigText(io + R"cfg(
    platform: "ensemble"
    ensemble_scheduling { step [ { model_name: "a" model_version: -1 input_map [ { key: "x" value: "x" } ]
                                   output_map { key: "y" value: "y" } } ] }
  )cfg",
                                       kSource);
  ASSERT_FALSE(ensemble.ok());
  EXPECT_EQ(ensemble.status().message(), std::string(kSource) + ": ensemble_scheduling: not supported by weft");
}

TEST(ConfigPbtxtTest, SyntaxErrorNamesFileLineColumnAndReason) {
  auto parsed = ParseModelConfigText("name: \"m\"\ninput {\n  name: \"x\"\n  data_type TYPE_FP32\n}\n", kSource);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), StartsWith(std::string(kSource) + ":4:13: "));
  EXPECT_THAT(parsed.status().message(), HasSubstr("Expected \":\""));
}

TEST(ConfigPbtxtTest, UnknownEnumValueNamesFileLineAndValue) {
  auto parsed = ParseModelConfigText("name: \"m\"\ninput { name: \"x\" data_type: TYPE_FP128 dims: [1] }\n", kSource);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), StartsWith(std::string(kSource) + ":2:"));
  EXPECT_THAT(parsed.status().message(), HasSubstr("TYPE_FP128"));
}

TEST(ConfigPbtxtTest, MissingDataTypeNamesTheTensorAndTheField) {
  auto parsed = ParseModelConfigText(R"cfg(
    name: "m"
    input { name: "x" dims: [1] }
    output { name: "y" data_type: TYPE_FP32 dims: [1] }
  )cfg",
                                     kSource);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(), std::string(kSource) + ": input 'x': data_type is missing or TYPE_INVALID");
}

TEST(ConfigPbtxtTest, SemanticErrorsNameTheField) {
  const std::string io = R"cfg(input { name: "x" data_type: TYPE_FP32 dims: [1] }
                               output { name: "y" data_type: TYPE_FP32 dims: [1] })cfg";
  struct Case {
    std::string text;
    std::string field;
  };
  const Case cases[] = {
      {"max_batch_size: -1 " + io, "max_batch_size: "},
      {"version_policy { latest {} } " + io, "version_policy.latest.num_versions: "},
      {"instance_group { count: -2 } " + io, "instance_group: "},
      {"instance_group { kind: KIND_CPU gpus: [0] } " + io, "instance_group '': gpus: "},
      {"dynamic_batching { priority_levels: 4294967296 } " + io, "dynamic_batching.priority_levels: "},
      {"sequence_batching { max_sequence_idle_microseconds: 5 } " + io, "sequence_batching: not supported"},
      {"ensemble_scheduling { step [ { model_name: \"a\" } ] } " + io, "ensemble_scheduling: not supported"},
      {"batch_input [ { kind: BATCH_ELEMENT_COUNT } ] " + io, "batch_input: not supported"},
      {"model_transaction_policy { decoupled: true } " + io, "model_transaction_policy.decoupled: not supported"},
  };
  for (const auto& c : cases) {
    auto parsed = ParseModelConfigText(c.text, kSource);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(parsed.status().message(), StartsWith(std::string(kSource) + ": " + c.field)) << c.text;
  }
}

TEST(ConfigPbtxtTest, DefaultsAreFilledAsTritonReportsThem) {
  auto parsed = ParseModelConfigText(R"cfg(
    input { name: "x" data_type: TYPE_FP32 dims: [16] }
    output { name: "y" data_type: TYPE_FP32 dims: [16] }
    instance_group { kind: KIND_CPU }
  )cfg",
                                     kSource);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->name, "");  // the repository names it after its directory
  EXPECT_EQ(parsed->version_policy.kind, VersionPolicyConfig::Kind::kLatest);
  EXPECT_EQ(parsed->version_policy.num_versions, 1);
  EXPECT_EQ(parsed->instance_groups[0].count, 1);
  EXPECT_FALSE(parsed->dynamic_batching.has_value());
  EXPECT_EQ(parsed->priority, ModelPriority::kDefault);
  const std::string& json = parsed->json;
  EXPECT_THAT(json, HasSubstr("\"max_batch_size\":0"));
  EXPECT_THAT(json, HasSubstr("\"version_policy\":{\"latest\":{\"num_versions\":1}}"));
  EXPECT_THAT(json, HasSubstr("\"dims\":[16]"));
  EXPECT_THAT(json, HasSubstr("\"data_type\":\"TYPE_FP32\""));
  EXPECT_THAT(json, HasSubstr("\"count\":1"));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("dynamic_batching")));
}

// The config endpoints answer the config as served: a file without a name or instance groups shows the name and
// the groups the repository gave it (bug: they showed "name":"" and "instance_group":[]).
TEST(ConfigPbtxtTest, ServedConfigShowsTheNameAndGroupsTheRepositoryGave) {
  auto parsed = ParseModelConfigText(R"cfg(
    platform: "pytorch_libtorch"
    input { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }
    output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }
  )cfg",
                                     kSource);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ModelConfig served = *parsed;
  served.name = "convnet";
  auto one = ServedConfigJson(served);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_THAT(*one, StartsWith("{\"name\":\"convnet\","));
  EXPECT_THAT(*one,
              HasSubstr("\"instance_group\":[{\"name\":\"convnet\",\"count\":1,\"gpus\":[],\"kind\":\"KIND_AUTO\","));

  served.instance_groups = {{.name = "", .count = 2, .kind = InstanceKind::kCpu, .gpus = {}}};
  auto two = ServedConfigJson(served);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_THAT(*two,
              HasSubstr("\"instance_group\":[{\"name\":\"convnet\",\"count\":2,\"gpus\":[],\"kind\":\"KIND_CPU\","));

  inference::ModelConfig message;
  ASSERT_TRUE(FillServedConfig(served, &message).ok());
  EXPECT_EQ(message.name(), "convnet");
  ASSERT_EQ(message.instance_group_size(), 1);
  EXPECT_EQ(message.instance_group(0).count(), 2);

  // Groups written in the file stay as written, with the fields weft does not model.
  auto written = ParseModelConfigText(R"cfg(
    name: "m"
    backend: "onnxruntime"
    input { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }
    output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }
    instance_group { name: "pinned" kind: KIND_CPU count: 3 passive: true }
  )cfg",
                                      kSource);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  auto as_written = ServedConfigJson(*written);
  ASSERT_TRUE(as_written.ok()) << as_written.status().ToString();
  EXPECT_THAT(*as_written, HasSubstr("\"name\":\"pinned\""));
  EXPECT_THAT(*as_written, HasSubstr("\"passive\":true"));
  EXPECT_THAT(*as_written, HasSubstr("\"count\":3"));

  served.json = "{not json";
  EXPECT_EQ(ServedConfigJson(served).status().code(), StatusCode::kInternal);
}

// The JSON must be what protobuf's own JSON parser reads back to the same message (it accepts numbers for
// 64-bit fields), so the hand-written printer cannot drift from the schema.
TEST(ConfigPbtxtTest, JsonReadsBackToTheSameMessage) {
  auto parsed = ParseModelConfigText(kFullConfig, kSource);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_THAT(parsed->json, StartsWith("{\"name\":\"m\",\"platform\":\"pytorch_libtorch\""));
  EXPECT_THAT(parsed->json, HasSubstr("\"max_batch_size\":8"));
  EXPECT_THAT(parsed->json, HasSubstr("\"dims\":[3,-1,-1]"));
  EXPECT_THAT(parsed->json, HasSubstr("\"reshape\":{\"shape\":[]}"));
  EXPECT_THAT(parsed->json, HasSubstr("\"parameters\":{\"ENABLE_NVFUSER\":{\"string_value\":\"false\"},"
                                      "\"INFERENCE_MODE\":{\"string_value\":\"true\"}}"));

  inference::ModelConfig from_text;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kFullConfig, &from_text));
  inference::ModelConfig from_json;
  auto status = google::protobuf::util::JsonStringToMessage(parsed->json, &from_json);
  ASSERT_TRUE(status.ok()) << status.ToString() << "\n" << parsed->json;
  std::string diff;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(from_text, from_json)) << diff;
}

TEST(ConfigPbtxtTest, JsonEscapesStrings) {
  auto parsed = ParseModelConfigText(R"cfg(
    name: "m"
    input { name: "x" data_type: TYPE_FP32 dims: [1] }
    output { name: "y" data_type: TYPE_FP32 dims: [1] }
    parameters { key: "k" value { string_value: "a\"b\\c\nd\001" } }
  )cfg",
                                     kSource);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_THAT(parsed->json, HasSubstr(R"("k":{"string_value":"a\"b\\c\nd\u0001"})"));
}

// Found by the config_pbtxt fuzzer: two map keys whose bytes are not UTF-8 both rendered as U+FFFD, and the JSON
// (the config endpoint's answer) then held one key twice and did not load again.
TEST(ConfigPbtxtTest, StringsThatAreNotUtf8AreErrorsThatNameTheField) {
  auto keys = ParseModelConfigText(R"cfg(
    name: "m"
    input { name: "x" data_type: TYPE_FP32 dims: [1] }
    output { name: "y" data_type: TYPE_FP32 dims: [1] }
    parameters { key: "\232" }
    parameters { key: "\252" value { string_value: "2" } }
  )cfg",
                                   kSource);
  ASSERT_FALSE(keys.ok());
  EXPECT_EQ(keys.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(keys.status().message(), HasSubstr("parameters[0].key is not UTF-8"));

  auto value = ParseModelConfigText(R"cfg(
    name: "m"
    input { name: "x\377" data_type: TYPE_FP32 dims: [1] }
    output { name: "y" data_type: TYPE_FP32 dims: [1] }
  )cfg",
                                    kSource);
  ASSERT_FALSE(value.ok());
  EXPECT_THAT(value.status().message(), HasSubstr("input[0].name is not UTF-8"));

  // Escapes that spell well-formed UTF-8 are text like any other.
  auto escaped = ParseModelConfigText(R"cfg(
    name: "m"
    input { name: "x" data_type: TYPE_FP32 dims: [1] }
    output { name: "y" data_type: TYPE_FP32 dims: [1] }
    parameters { key: "caf\303\251" value { string_value: "\360\237\230\200" } }
  )cfg",
                                      kSource);
  ASSERT_TRUE(escaped.ok()) << escaped.status().ToString();
  EXPECT_EQ(escaped->parameters.at("caf\xc3\xa9"), "\xf0\x9f\x98\x80");
}

// Found by the config_pbtxt fuzzer: a repeated map key printed twice, and JSON refuses a repeated key.
TEST(ConfigPbtxtTest, JsonPrintsARepeatedMapKeyOnceWithTheValueThatCounts) {
  auto parsed = ParseModelConfigText(R"cfg(
    name: "m"
    input { name: "x" data_type: TYPE_FP32 dims: [1] }
    output { name: "y" data_type: TYPE_FP32 dims: [1] }
    parameters { key: "k" }
    parameters { key: "k" value { string_value: "second" } }
    parameters { key: "a" value { string_value: "1" } }
  )cfg",
                                     kSource);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->parameters.at("k"), "second");
  EXPECT_THAT(parsed->json, HasSubstr(R"("parameters":{"a":{"string_value":"1"},"k":{"string_value":"second"}})"));
  auto again = ParseModelConfigJson(parsed->json, kJsonSource, "");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->parameters, parsed->parameters);
}

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("weft_config_pbtxt_test_" + std::to_string(getpid()));
    fs::create_directories(dir_ / "resnet");
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ConfigFileTest, UnnamedConfigTakesItsDirectoryName) {
  std::ofstream(dir_ / "resnet" / "config.pbtxt") << R"cfg(
    platform: "pytorch_libtorch"
    input { name: "x" data_type: TYPE_FP32 dims: [1] }
    output { name: "y" data_type: TYPE_FP32 dims: [1] }
  )cfg";
  auto parsed = ParseModelConfigFile(dir_ / "resnet" / "config.pbtxt");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->name, "resnet");
  EXPECT_THAT(parsed->json, StartsWith("{\"name\":\"resnet\""));
}

TEST_F(ConfigFileTest, ErrorsNameTheFile) {
  const fs::path file = dir_ / "resnet" / "config.pbtxt";
  std::ofstream(file) << "name: \"resnet\"\nmax_batch_size: eight\n";
  auto parsed = ParseModelConfigFile(file);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), StartsWith(file.string() + ":2:17: "));

  auto missing = ParseModelConfigFile(dir_ / "absent" / "config.pbtxt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), (dir_ / "absent" / "config.pbtxt").string() + ": not found");
}

// A FIFO would block an open until some writer came: it is refused at once.
TEST_F(ConfigFileTest, AFifoIsRefusedWithoutWaiting) {
  const fs::path file = dir_ / "resnet" / "config.pbtxt";
  ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
  auto parsed = ParseModelConfigFile(file);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), file.string() + ": not a regular file");
}

// A polled repository parses every config at every poll: a config's warnings are logged once per text.
TEST(ConfigPbtxtTest, WarningsAreLoggedOncePerTextOfAConfig) {
  const std::string base =
      "name: \"m\" input { name: \"x\" data_type: TYPE_FP32 dims: [1] } "
      "output { name: \"y\" data_type: TYPE_FP32 dims: [1] }\n";
  const std::string source = "models/once/config.pbtxt";
  auto warnings_of = [&](const std::string& text) {
    ::testing::internal::CaptureStderr();
    EXPECT_TRUE(ParseModelConfigText(text, source).ok());
    return ::testing::internal::GetCapturedStderr();
  };
  EXPECT_THAT(warnings_of(base + "newer_field: 1\n"), HasSubstr("newer_field"));
  EXPECT_EQ(warnings_of(base + "newer_field: 1\n"), "");
  EXPECT_THAT(warnings_of(base + "newer_field: 2\n"), HasSubstr("newer_field"));
}

TEST_F(ConfigFileTest, HugeFilesAreRefusedBeforeTheyAreParsed) {
  const fs::path file = dir_ / "resnet" / "config.pbtxt";
  {
    std::ofstream out(file);
    out << "name: \"resnet\"\n";
    out << std::string(kMaxConfigFileBytes, '#');
  }
  auto parsed = ParseModelConfigFile(file);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("larger than 16 MiB"));
}

// Hardening issue, item 4: configs that took the whole server down (an abort at start, gigabytes allocated, an
// instance count that wrapped negative, a queue delay whose nanoseconds overflowed) now fail to load, alone, with
// the field and the limit named.
TEST(ConfigLimitsTest, CountsAndDurationsPastTheirLimitsAreErrors) {
  const std::string head = R"cfg(name: "m" max_batch_size: 4
    input { name: "x" data_type: TYPE_FP32 dims: [1] }
    output { name: "y" data_type: TYPE_FP32 dims: [1] }
  )cfg";
  struct Case {
    std::string config;
    std::string error;  // a part of the message
  };
  const std::vector<Case> cases = {
      {"instance_group { count: 100000 }", "instance_group: count 100000 is over the limit of 1024"},
      {"instance_group [{ count: 2147483647 }, { count: 2147483647 }]", "over the limit of 1024"},
      {"instance_group [{ count: 1000 }, { count: 1000 }]", "more than 1024 instances"},
      {"instance_group { count: 600 kind: KIND_GPU gpus: [0, 1] }", "more than 1024 instances"},
      {"dynamic_batching { priority_levels: 4294967295 default_priority_level: 1 }",
       "priority_levels: 4294967295 is over the limit of 256"},
      {"dynamic_batching { max_queue_delay_microseconds: 100000000000000000 }",
       "max_queue_delay_microseconds: 100000000000000000 is over the limit"},
      {"dynamic_batching { default_queue_policy { default_timeout_microseconds: 18446744073709551615 } }",
       "default_queue_policy.default_timeout_microseconds: 18446744073709551615 is over the limit"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseModelConfigText(head + c.config, kSource);
    ASSERT_FALSE(parsed.ok()) << c.config;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << c.config;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.error)) << c.config;
  }
  // At the limits, the same fields load.
  auto at_limits = ParseModelConfigText(head + R"cfg(
    instance_group [{ count: 1000 }, { count: 24 }]
    dynamic_batching { priority_levels: 256 default_priority_level: 256 max_queue_delay_microseconds: 3600000000 }
  )cfg",
                                        kSource);
  ASSERT_TRUE(at_limits.ok()) << at_limits.status().ToString();
  EXPECT_EQ(at_limits->InstanceCount(), 1024);
}

TEST(ConfigLimitsTest, ShapesWhoseFullBatchOverflowsAreErrors) {
  auto config = [](const std::string& dims, int max_batch_size) {
    return "name: \"m\" max_batch_size: " + std::to_string(max_batch_size) +
           " input { name: \"x\" data_type: TYPE_FP32 dims: " + dims +
           " } output { name: \"y\" data_type: TYPE_FP32 dims: [1] }";
  };
  // 2^31 * 2^31 elements of 4 bytes overflow int64; so do 2^61 elements of a batch of 4.
  for (auto [dims, batch] : std::vector<std::pair<std::string, int>>{
           {"[2147483648, 2147483648]", 0}, {"[2305843009213693952]", 4}, {"[-1, 4611686018427387904]", 0}}) {
    auto parsed = ParseModelConfigText(config(dims, batch), kSource);
    ASSERT_FALSE(parsed.ok()) << dims;
    EXPECT_THAT(parsed.status().message(), HasSubstr("too large")) << dims;
  }
  auto reshape = ParseModelConfigText(R"cfg(name: "m"
    input { name: "x" data_type: TYPE_FP32 dims: [4] reshape { shape: [4294967296, 4294967296] } }
    output { name: "y" data_type: TYPE_FP32 dims: [1] })cfg",
                                      kSource);
  ASSERT_FALSE(reshape.ok());
  EXPECT_THAT(reshape.status().message(), HasSubstr("reshape"));
  std::string many_dims = "[";
  for (int i = 0; i < 65; ++i) many_dims += i ? ", 1" : "1";
  EXPECT_THAT(ParseModelConfigText(config(many_dims + "]", 0), kSource).status().message(), HasSubstr("at most 64"));
}

// The example repository shipped with the source must always parse.
TEST(ExampleConfigsTest, EveryExampleConfigParses) {
  const char* source_dir = std::getenv("WEFT_SOURCE_DIR");
  if (source_dir == nullptr) GTEST_SKIP() << "WEFT_SOURCE_DIR is not set (run through ctest)";
  const fs::path models = fs::path(source_dir) / "examples" / "models";
  std::error_code ec;
  int parsed_count = 0;
  for (fs::directory_iterator it(models, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path file = it->path() / "config.pbtxt";
    if (!fs::exists(file)) continue;
    auto parsed = ParseModelConfigFile(file);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    if (parsed.ok()) {
      EXPECT_EQ(parsed->name, it->path().filename().string()) << file;
    }
    ++parsed_count;
  }
  if (parsed_count == 0) GTEST_SKIP() << "no config.pbtxt under " << models;
}

// model_warmup, Triton's syntax: which member of the oneof is set is what counts (`zero_data: false` is zeros).
TEST(WarmupConfigTest, SamplesConvertWithEverySource) {
  auto parsed = ParseModelConfigText(R"cfg(
    name: "m" max_batch_size: 4
    input [ { name: "a" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "b" data_type: TYPE_UINT8 dims: [ 2 ] } ]
    output { name: "y" data_type: TYPE_FP32 dims: [ 1 ] }
    model_warmup [
      { name: "first" batch_size: 4 count: 10
        inputs { key: "a" value { data_type: TYPE_FP32 dims: [ 7 ] zero_data: false } }
        inputs [ { key: "b" value { data_type: TYPE_UINT8 dims: [ 2 ] random_data: true } } ] },
      { name: "second"
        inputs { key: "a" value { data_type: TYPE_FP32 dims: 3 input_data_file: "a.bin" } }
        inputs { key: "b" value { data_type: TYPE_UINT8 dims: [ 2 ] input_data_file: "dir/b.bin" } } }
    ]
  )cfg",
                                     kSource);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  using Source = WarmupInputConfig::Source;
  const std::vector<WarmupConfig> expected = {
      {.name = "first",
       .batch_size = 4,
       .inputs = {{"a", {.data_type = DataType::kFp32, .dims = {7}, .source = Source::kZero}},
                  {"b", {.data_type = DataType::kUint8, .dims = {2}, .source = Source::kRandom}}},
       .count = 10},
      // Unset batch_size and count read as 0, as in Triton: the sample is skipped (and would run once).
      {.name = "second",
       .batch_size = 0,
       .inputs = {{"a", {.data_type = DataType::kFp32, .dims = {3}, .source = Source::kFile, .file = "a.bin"}},
                  {"b", {.data_type = DataType::kUint8, .dims = {2}, .source = Source::kFile, .file = "dir/b.bin"}}},
       .count = 0},
  };
  EXPECT_EQ(parsed->warmup, expected);
  EXPECT_THAT(parsed->json, HasSubstr("\"model_warmup\":[{\"name\":\"first\",\"batch_size\":4,\"inputs\":{\"a\":{"));
}

TEST(WarmupConfigTest, ErrorsNameTheFileTheSampleAndTheInput) {
  const std::string head = R"cfg(name: "m" max_batch_size: 2
    input [ { name: "a" data_type: TYPE_FP32 dims: [ -1 ] } ]
    output { name: "y" data_type: TYPE_FP32 dims: [ 1 ] }
  )cfg";
  struct Case {
    std::string warmup;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"(model_warmup { name: "w" batch_size: 1 inputs { key: "a" value { data_type: TYPE_FP32 dims: [ 1 ] } } })",
       "model_warmup[0] 'w': input 'a': one of zero_data, random_data or input_data_file must be set"},
      {R"(model_warmup { name: "w" batch_size: 1 })",
       "model_warmup[0] 'w': input 'a' is missing: a sample gives every input of the model"},
      {R"(model_warmup [ { name: "ok" batch_size: 1 inputs { key: "a" value { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } } },
                         { name: "w" batch_size: 3 inputs { key: "a" value { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } } } ])",
       "model_warmup[1] 'w': batch_size 3 is over max_batch_size 2"},
      {R"(model_warmup { name: "w" batch_size: 1 inputs { key: "a" value { data_type: TYPE_FP32 dims: [ -1 ] zero_data: true } } })",
       "model_warmup[0] 'w': input 'a': dims [-1] do not fit the input's dims [-1]"},
      {R"(model_warmup { name: "w" batch_size: 1 inputs { key: "a" value { data_type: TYPE_FP32 dims: [ 1 ] input_data_file: "../../etc/passwd" } } })",
       "model_warmup[0] 'w': input 'a': input_data_file '../../etc/passwd' must not leave warmup/"},
      {R"(model_warmup { name: "w" batch_size: 1 inputs { key: "a" value { data_type: 99 dims: [ 1 ] zero_data: true } } })",
       "model_warmup[0] 'w': input 'a': data_type: unknown value 99"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseModelConfigText(head + c.warmup, kSource);
    ASSERT_FALSE(parsed.ok()) << c.warmup;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), StartsWith(std::string(kSource) + ": " + c.message));
  }
}

// ---- A config given as JSON (the repository API's load override) ----

// Every config the example repository ships, rendered as the config endpoint renders it, loads back as the same
// ModelConfig (its `json` included).
TEST(ConfigJsonTest, TheConfigEndpointsJsonOfEveryExampleParsesBackToTheSameConfig) {
  const char* source_dir = std::getenv("WEFT_SOURCE_DIR");
  if (source_dir == nullptr) GTEST_SKIP() << "WEFT_SOURCE_DIR is not set (run through ctest)";
  const fs::path models = fs::path(source_dir) / "examples" / "models";
  std::error_code ec;
  int compared = 0;
  for (fs::directory_iterator it(models, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path file = it->path() / "config.pbtxt";
    if (!fs::exists(file)) continue;
    auto from_text = ParseModelConfigFile(file);
    ASSERT_TRUE(from_text.ok()) << from_text.status().ToString();
    auto from_json = ParseModelConfigJson(from_text->json, kJsonSource, "");
    ASSERT_TRUE(from_json.ok()) << from_json.status().ToString() << "\n" << from_text->json;
    EXPECT_TRUE(*from_json == *from_text) << file << "\n" << from_text->json << "\n" << from_json->json;
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "no config.pbtxt under " << models;
}

TEST(ConfigJsonTest, EveryFieldOfATritonConfigRoundTrips) {
  auto from_text = ParseModelConfigText(kFullConfig, kSource);
  ASSERT_TRUE(from_text.ok()) << from_text.status().ToString();
  auto from_json = ParseModelConfigJson(from_text->json, kJsonSource, "other");
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  EXPECT_TRUE(*from_json == *from_text) << from_text->json << "\n" << from_json->json;
  EXPECT_EQ(from_json->warmup.size(), 1u);
}

TEST(ConfigJsonTest, SnakeCaseAndLowerCamelCaseNamesBothWork) {
  const std::string snake = R"({"name": "m", "max_batch_size": 4,
    "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [2], "reshape": {"shape": [2, 1]}}],
    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": ["2"]}],
    "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
    "version_policy": {"specific": {"versions": [1, "2"]}},
    "dynamic_batching": {"max_queue_delay_microseconds": "100", "preferred_batch_size": [2, 4],
                         "priority_levels": 2, "default_priority_level": 1,
                         "priority_queue_policy": {"2": {"timeout_action": "DELAY", "max_queue_size": 8}}},
    "default_model_filename": "m.pt",
    "parameters": {"k": {"string_value": "v"}},
    "optimization": {"priority": "PRIORITY_MAX"},
    "model_warmup": [{"name": "w", "batch_size": 2, "count": 3,
                      "inputs": {"x": {"data_type": "TYPE_FP32", "dims": [2], "input_data_file": "x.bin"}}}]})";
  const std::string camel = R"({"name": "m", "maxBatchSize": 4,
    "input": [{"name": "x", "dataType": "TYPE_FP32", "dims": [2], "reshape": {"shape": [2, 1]}}],
    "output": [{"name": "y", "dataType": "TYPE_FP32", "dims": [2]}],
    "instanceGroup": [{"count": 2, "kind": "KIND_CPU"}],
    "versionPolicy": {"specific": {"versions": [1, 2]}},
    "dynamicBatching": {"maxQueueDelayMicroseconds": 100, "preferredBatchSize": [2, 4],
                        "priorityLevels": 2, "defaultPriorityLevel": 1,
                        "priorityQueuePolicy": {"2": {"timeoutAction": "DELAY", "maxQueueSize": 8}}},
    "defaultModelFilename": "m.pt",
    "parameters": {"k": {"stringValue": "v"}},
    "optimization": {"priority": "PRIORITY_MAX"},
    "modelWarmup": [{"name": "w", "batchSize": 2, "count": 3,
                     "inputs": {"x": {"dataType": "TYPE_FP32", "dims": [2], "inputDataFile": "x.bin"}}}]})";
  ::testing::internal::CaptureStderr();
  auto a = ParseModelConfigJson(snake, kJsonSource, "");
  auto b = ParseModelConfigJson(camel, kJsonSource, "");
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(*a == *b) << a->json << "\n" << b->json;
  EXPECT_EQ(log, "");  // nothing unknown in either
  EXPECT_EQ(a->max_batch_size, 4);
  EXPECT_EQ(a->inputs[0].reshape, (Shape{2, 1}));
  EXPECT_EQ(a->instance_groups[0].count, 2);
  EXPECT_EQ(a->version_policy.versions, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(a->dynamic_batching->max_queue_delay_us, 100u);
  EXPECT_EQ(a->dynamic_batching->priority_queue_policy.at(2).timeout_action, QueuePolicyConfig::TimeoutAction::kDelay);
  EXPECT_EQ(a->parameters.at("k"), "v");
  EXPECT_EQ(a->priority, ModelPriority::kMax);
  ASSERT_EQ(a->warmup.size(), 1u);
  EXPECT_EQ(a->warmup[0].inputs.at("x").file, "x.bin");
  // The JSON it renders is the proto's, in snake_case, whatever the input used.
  EXPECT_EQ(a->json, b->json);
  EXPECT_THAT(a->json, HasSubstr("\"max_batch_size\":4"));
}

TEST(ConfigJsonTest, DefaultsAndTheDefaultNameAreTheTextForms) {
  const std::string io = R"("input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [16]}],
                            "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [16]}],
                            "instance_group": [{"kind": "KIND_CPU"}])";
  auto from_text = ParseModelConfigText(R"cfg(
    input { name: "x" data_type: TYPE_FP32 dims: [16] }
    output { name: "y" data_type: TYPE_FP32 dims: [16] }
    instance_group { kind: KIND_CPU }
  )cfg",
                                        kSource);
  ASSERT_TRUE(from_text.ok());
  auto unnamed = ParseModelConfigJson("{" + io + "}", kJsonSource, "");
  ASSERT_TRUE(unnamed.ok()) << unnamed.status().ToString();
  EXPECT_TRUE(*unnamed == *from_text) << unnamed->json << "\n" << from_text->json;
  auto defaulted = ParseModelConfigJson("{\"name\": \"\", " + io + "}", kJsonSource, "resnet");
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(defaulted->name, "resnet");
  EXPECT_THAT(defaulted->json, StartsWith("{\"name\":\"resnet\""));
  EXPECT_EQ(defaulted->instance_groups[0].count, 1);
  EXPECT_EQ(ParseModelConfigJson("{\"name\": \"given\", " + io + "}", kJsonSource, "resnet")->name, "given");
}

TEST(ConfigJsonTest, ErrorsAreInvalidArgumentAndStartWithTheSource) {
  const std::string io = R"("input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [1]}],
                            "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [1]}])";
  struct Case {
    std::string json;
    std::string message;  // after "parameters.config: "
  };
  const std::vector<Case> cases = {
      // Syntax.
      {"", ""},
      {"{\"name\": \"m\",", ""},
      {"{\"name\": \"m\"} trailing", ""},
      {"[1, 2]", "Root element must be a message."},
      {"name: \"m\"", ""},  // the text form is not JSON
      // Types.
      {"{\"max_batch_size\": \"eight\", " + io + "}", "(max_batch_size): invalid value"},
      {"{\"max_batch_size\": 4.5, " + io + "}", "(max_batch_size): invalid value 4.5"},
      {"{\"max_batch_size\": true, " + io + "}", "(max_batch_size): invalid value true"},
      {"{\"max_batch_size\": 2147483648, " + io + "}", "(max_batch_size): invalid value 2147483648"},
      {"{\"input\": \"x\"}", ""},
      {"{\"name\": [\"m\"]}", ""},
      {"{\"input\": [{\"dims\": [[1]]}]}", ""},
      {"{\"instance_group\": [{\"kind\": \"KIND_FOO\"}], " + io + "}",
       "instance_group[0].kind: unknown value \"KIND_FOO\""},
      {"{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP128\", \"dims\": [1]}]}",
       "input[0].data_type: unknown value \"TYPE_FP128\""},
      {"{\"dynamic_batching\": {\"default_queue_policy\": {\"timeout_action\": \"WAIT\"}}, " + io + "}",
       "dynamic_batching.default_queue_policy.timeout_action: unknown value \"WAIT\""},
      {"{\"model_warmup\": [{\"inputs\": {\"x\": {\"zero_data\": true, \"random_data\": true}}}], " + io + "}", ""},
      // Values, as the text form reports them.
      {"{\"max_batch_size\": -1, " + io + "}", "max_batch_size: must not be negative"},
      {"{\"instance_group\": [{\"count\": 5000}], " + io + "}", "instance_group: count 5000 is over the limit of 1024"},
      {"{\"sequence_batching\": {}, " + io + "}", "sequence_batching: not supported by weft"},
      {"{\"model_warmup\": [{\"name\": \"w\", \"batch_size\": 1}], " + io + "}",
       "model_warmup[0] 'w': input 'x' is missing"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseModelConfigJson(c.json, kJsonSource, "m");
    ASSERT_FALSE(parsed.ok()) << c.json;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(parsed.status().message(), StartsWith(std::string(kJsonSource) + ": " + c.message)) << c.json;
    // protobuf's messages end with the input line and a caret: only the first line is kept.
    EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos) << parsed.status().message();
  }
}

// The same config as text and as JSON fails with the same message, after the source.
TEST(ConfigJsonTest, SemanticErrorsAreTheTextFormsErrors) {
  const std::string io = R"cfg(input { name: "x" data_type: TYPE_FP32 dims: [1] }
                               output { name: "y" data_type: TYPE_FP32 dims: [1] })cfg";
  const std::vector<std::string> configs = {
      "name: \"m\" max_batch_size: -1 " + io,
      "name: \"m\" version_policy { latest {} } " + io,
      "name: \"m\" instance_group { kind: KIND_CPU gpus: [0] } " + io,
      "name: \"m\" dynamic_batching { priority_levels: 4294967296 } " + io,
      "name: \"m\" ensemble_scheduling { step [ { model_name: \"a\" } ] } " + io,
      "name: \"m\" model_transaction_policy { decoupled: true } " + io,
      "name: \"m\" input { name: \"x\" dims: [1] } output { name: \"y\" data_type: TYPE_FP32 dims: [1] }",
      "name: \"m\" max_batch_size: 1 " + io +
          " model_warmup { name: \"w\" batch_size: 2 inputs { key: \"x\" value { data_type: TYPE_FP32 dims: [1] "
          "zero_data: true } } }",
  };
  for (const std::string& text : configs) {
    auto from_text = ParseModelConfigText(text, kSource);
    ASSERT_FALSE(from_text.ok()) << text;
    inference::ModelConfig proto;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &proto)) << text;
    std::string json;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(proto, &json).ok());
    auto from_json = ParseModelConfigJson(json, kJsonSource, "");
    ASSERT_FALSE(from_json.ok()) << json;
    EXPECT_EQ(from_json.status().code(), from_text.status().code());
    EXPECT_EQ(from_json.status().message().substr(std::strlen(kJsonSource)),
              from_text.status().message().substr(std::strlen(kSource)))
        << json;
  }
}

TEST(ConfigJsonTest, UnknownFieldsAreSkippedWithAWarningThatNamesTheirPath) {
  ::testing::internal::CaptureStderr();
  auto parsed = ParseModelConfigJson(R"({"name": "m", "futurePolicy": {"level": 3, "nested": [1, {"a": null}]},
    "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [1], "future_flag": true}],
    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [1]}],
    "dynamic_batching": {"priority_levels": 1, "default_priority_level": 1,
                         "priority_queue_policy": {"1": {"future_limit": 3}}},
    "model_warmup": [{"name": "w", "batch_size": 1,
                      "inputs": {"x": {"data_type": "TYPE_FP32", "dims": [1], "zero_data": true, "future": 1}}}],
    "response_cache": {"enable": true}, "MaxBatchSize": 3})",
                                     kJsonSource, "");
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  for (const char* path :
       {"futurePolicy", "input[0].future_flag", "dynamic_batching.priority_queue_policy[1].future_limit",
        "model_warmup[0].inputs[x].future", "MaxBatchSize"}) {
    EXPECT_THAT(log, HasSubstr(std::string(kJsonSource) + ": no field named " + path + " in the schema. Ignored."));
  }
  EXPECT_THAT(log, ::testing::Not(HasSubstr("response_cache")));
  EXPECT_EQ(parsed->max_batch_size, 0);  // "MaxBatchSize" is neither name of max_batch_size
  EXPECT_THAT(parsed->json, ::testing::Not(HasSubstr("future")));
}

// protobuf's conversion of JSON to a google.protobuf.Value (used to find unknown fields) takes time quadratic in
// the nesting depth: deep nesting is refused before anything is parsed.
TEST(ConfigJsonTest, DeepNestingIsRefusedBeforeItIsParsed) {
  const std::string io = R"("input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [1]}],
                            "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [1]}])";
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  // 32 levels, the root object included, load (an unknown field, skipped).
  ::testing::internal::CaptureStderr();
  auto at_limit =
      ParseModelConfigJson("{\"name\": \"m\", " + io + ", \"future\": " + nested(31) + "}", kJsonSource, "");
  ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(at_limit.ok()) << at_limit.status().ToString();
  for (int depth : {32, 100000}) {
    auto deep =
        ParseModelConfigJson("{\"name\": \"m\", " + io + ", \"future\": " + nested(depth) + "}", kJsonSource, "");
    ASSERT_FALSE(deep.ok());
    EXPECT_EQ(deep.status().message(), std::string(kJsonSource) + ": objects and arrays nest deeper than 32 levels");
  }
  // Brackets in strings (in either quote, escaped quotes included) are not nesting.
  const std::string brackets(100, '[');
  auto in_strings = ParseModelConfigJson(
      "{'name': 'm\\'\"" + brackets + "', \"platform\": \"\\\"'" + brackets + "\", " + io + "}", kJsonSource, "");
  ASSERT_TRUE(in_strings.ok()) << in_strings.status().ToString();
  EXPECT_EQ(in_strings->name, "m'\"" + brackets);
  EXPECT_EQ(in_strings->platform, "\"'" + brackets);
}

TEST(ConfigJsonTest, LargerThanAConfigFileIsRefusedBeforeItIsParsed) {
  std::string json = "{\"name\": \"m\"}";
  json.append(kMaxConfigFileBytes, ' ');
  auto parsed = ParseModelConfigJson(json, kJsonSource, "");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(), std::string(kJsonSource) + ": larger than 16 MiB, the limit for a config");
}

}  // namespace
}  // namespace weft
