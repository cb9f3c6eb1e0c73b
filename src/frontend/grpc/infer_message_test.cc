#include "frontend/grpc/infer_message.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <limits>

namespace weft {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

const SteadyTime kArrival = SteadyTime() + std::chrono::seconds(100);

std::shared_ptr<ModelInferRequest> NewRequest() {
  auto m = std::make_shared<ModelInferRequest>();
  m->set_model_name("m");
  return m;
}

ModelInferRequest::InferInputTensor* AddInput(ModelInferRequest* m, const std::string& name,
                                              const std::string& datatype, std::vector<int64_t> shape) {
  auto* t = m->add_inputs();
  t->set_name(name);
  t->set_datatype(datatype);
  for (int64_t d : shape) t->add_shape(d);
  return t;
}

Result<DecodedModelInfer> Decode(std::shared_ptr<ModelInferRequest> m, const SharedMemoryRegistry* shm = nullptr) {
  return DecodeModelInferRequest(std::move(m), kArrival, shm);
}

void ExpectError(std::shared_ptr<ModelInferRequest> m, StatusCode code, const std::string& substring) {
  auto decoded = Decode(std::move(m));
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), code) << decoded.status().ToString();
  EXPECT_NE(decoded.status().message().find(substring), std::string::npos) << decoded.status().message();
}

template <typename T>
void Fill(google::protobuf::RepeatedField<T>* field, std::initializer_list<T> values) {
  for (T v : values) field->Add(v);
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> out(t.byte_size() / sizeof(T));
  std::memcpy(out.data(), t.data(), t.byte_size());
  return out;
}

TEST(InferMessageTest, TypedContentsOfEveryDatatype) {
  auto m = NewRequest();
  Fill(AddInput(m.get(), "b", "BOOL", {3})->mutable_contents()->mutable_bool_contents(), {true, false, true});
  Fill(AddInput(m.get(), "i8", "INT8", {2})->mutable_contents()->mutable_int_contents(), {-128, 127});
  AddInput(m.get(), "i16", "INT16", {1})->mutable_contents()->mutable_int_contents()->Add(-300);
  AddInput(m.get(), "i32", "INT32", {1})->mutable_contents()->mutable_int_contents()->Add(-70000);
  AddInput(m.get(), "i64", "INT64", {1})->mutable_contents()->mutable_int64_contents()->Add(int64_t{1} << 40);
  AddInput(m.get(), "u8", "UINT8", {1})->mutable_contents()->mutable_uint_contents()->Add(255);
  AddInput(m.get(), "u16", "UINT16", {1})->mutable_contents()->mutable_uint_contents()->Add(65535);
  AddInput(m.get(), "u32", "UINT32", {1})->mutable_contents()->mutable_uint_contents()->Add(4000000000u);
  AddInput(m.get(), "u64", "UINT64", {1})->mutable_contents()->mutable_uint64_contents()->Add(uint64_t{1} << 63);
  Fill(AddInput(m.get(), "f32", "FP32", {2, 1})->mutable_contents()->mutable_fp32_contents(), {1.5f, -2.0f});
  AddInput(m.get(), "f64", "FP64", {1})->mutable_contents()->mutable_fp64_contents()->Add(0.1);
  auto* s = AddInput(m.get(), "s", "BYTES", {2})->mutable_contents()->mutable_bytes_contents();
  s->Add("hi");
  s->Add(std::string("\0x", 2));
  AddInput(m.get(), "empty", "FP32", {0});  // no elements, no contents

  auto decoded = Decode(m);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const auto& in = decoded->request->inputs;
  ASSERT_EQ(in.size(), 13u);
  EXPECT_EQ(Values<uint8_t>(in[0]), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(Values<int8_t>(in[1]), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(Values<int16_t>(in[2]), (std::vector<int16_t>{-300}));
  EXPECT_EQ(Values<int32_t>(in[3]), (std::vector<int32_t>{-70000}));
  EXPECT_EQ(Values<int64_t>(in[4]), (std::vector<int64_t>{int64_t{1} << 40}));
  EXPECT_EQ(Values<uint8_t>(in[5]), (std::vector<uint8_t>{255}));
  EXPECT_EQ(Values<uint16_t>(in[6]), (std::vector<uint16_t>{65535}));
  EXPECT_EQ(Values<uint32_t>(in[7]), (std::vector<uint32_t>{4000000000u}));
  EXPECT_EQ(Values<uint64_t>(in[8]), (std::vector<uint64_t>{uint64_t{1} << 63}));
  EXPECT_EQ(Values<float>(in[9]), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(in[9].shape(), (Shape{2, 1}));
  EXPECT_EQ(Values<double>(in[10]), (std::vector<double>{0.1}));
  auto words = SplitBytesElements(in[11].bytes());
  ASSERT_EQ(words.size(), 2u);
  EXPECT_EQ(words[0], "hi");
  EXPECT_EQ(words[1], std::string_view("\0x", 2));
  EXPECT_EQ(in[12].byte_size(), 0u);
}

TEST(InferMessageTest, TypedContentsAreChecked) {
  auto out_of_range = NewRequest();
  AddInput(out_of_range.get(), "x", "INT8", {1})->mutable_contents()->add_int_contents(200);
  ExpectError(out_of_range, StatusCode::kInvalidArgument, "out of range for INT8");

  auto u16 = NewRequest();
  AddInput(u16.get(), "x", "UINT16", {1})->mutable_contents()->add_uint_contents(70000);
  ExpectError(u16, StatusCode::kInvalidArgument, "out of range for UINT16");

  auto wrong_field = NewRequest();
  AddInput(wrong_field.get(), "x", "FP32", {1})->mutable_contents()->add_fp64_contents(1.0);
  ExpectError(wrong_field, StatusCode::kInvalidArgument, "'fp32_contents' only");

  auto count = NewRequest();
  AddInput(count.get(), "x", "FP32", {3})->mutable_contents()->add_fp32_contents(1.0f);
  ExpectError(count, StatusCode::kInvalidArgument, "needs 3");

  auto fp16 = NewRequest();
  AddInput(fp16.get(), "x", "FP16", {1})->mutable_contents()->add_fp32_contents(1.0f);
  ExpectError(fp16, StatusCode::kInvalidArgument, "raw_input_contents");

  auto no_data = NewRequest();
  AddInput(no_data.get(), "x", "FP32", {2});
  ExpectError(no_data, StatusCode::kInvalidArgument, "has no data");

  auto unknown_type = NewRequest();
  AddInput(unknown_type.get(), "x", "FLOAT", {1});
  ExpectError(unknown_type, StatusCode::kInvalidArgument, "unknown datatype 'FLOAT'");

  auto negative = NewRequest();
  AddInput(negative.get(), "x", "FP32", {-1});
  ExpectError(negative, StatusCode::kInvalidArgument, "non-negative");

  auto twice = NewRequest();
  AddInput(twice.get(), "x", "FP32", {1})->mutable_contents()->add_fp32_contents(1);
  AddInput(twice.get(), "x", "FP32", {1})->mutable_contents()->add_fp32_contents(1);
  ExpectError(twice, StatusCode::kInvalidArgument, "appears twice");
}

TEST(InferMessageTest, RawInputsViewTheMessageAndKeepItAlive) {
  auto m = NewRequest();
  AddInput(m.get(), "a", "FP32", {4});
  AddInput(m.get(), "h", "FP16", {2});
  std::vector<float> values = {1, 2, 3, 4};
  std::string* raw = m->add_raw_input_contents();
  raw->resize(256);  // long enough to live on the heap (aligned); shrinking keeps the buffer
  std::memcpy(raw->data(), values.data(), 16);
  raw->resize(16);
  m->add_raw_input_contents(std::string("\x00\x3c\x00\x40", 4));  // FP16 1.0, 2.0
  auto decoded = Decode(m);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const Tensor& a = decoded->request->inputs[0];
  EXPECT_EQ(reinterpret_cast<const char*>(a.data()), m->raw_input_contents(0).data());  // zero-copy
  EXPECT_EQ(Values<float>(a), values);
  EXPECT_EQ(decoded->request->inputs[1].type(), DataType::kFp16);
  const ModelInferRequest* raw_message = m.get();
  m.reset();  // the tensor is now the message's only owner
  EXPECT_EQ(a.owner().get(), raw_message);
  EXPECT_EQ(Values<float>(a), values);
}

TEST(InferMessageTest, RawInputsAreChecked) {
  auto size = NewRequest();
  AddInput(size.get(), "a", "FP32", {4});
  size->add_raw_input_contents(std::string(12, '\0'));
  ExpectError(size, StatusCode::kInvalidArgument, "input 'a'");

  auto count = NewRequest();
  AddInput(count.get(), "a", "FP32", {1});
  AddInput(count.get(), "b", "FP32", {1});
  count->add_raw_input_contents(std::string(4, '\0'));
  ExpectError(count, StatusCode::kInvalidArgument, "one per input");

  auto mixed = NewRequest();
  AddInput(mixed.get(), "a", "FP32", {1});
  AddInput(mixed.get(), "b", "FP32", {1})->mutable_contents()->add_fp32_contents(1);
  mixed->add_raw_input_contents(std::string(4, '\0'));
  mixed->add_raw_input_contents(std::string(4, '\0'));
  ExpectError(mixed, StatusCode::kInvalidArgument, "one or the other");

  auto bytes = NewRequest();
  AddInput(bytes.get(), "s", "BYTES", {1});
  bytes->add_raw_input_contents(std::string("\x05\x00\x00\x00hi", 6));
  ExpectError(bytes, StatusCode::kInvalidArgument, "overruns");

  // Hardening issue, item 1: the raw path answered OK for [2^62 + 2] FP32 over 8 bytes (4 * (2^62 + 2) wraps to 8).
  auto wrapped = NewRequest();
  AddInput(wrapped.get(), "a", "FP32", {4611686018427387906});
  wrapped->add_raw_input_contents(std::string(8, '\0'));
  ExpectError(wrapped, StatusCode::kInvalidArgument, "larger than 2^64 bytes");
}

// A shape's dimensions are copied and printed: tens of millions of them in one message cost gigabytes. The rank is
// bounded before anything is copied.
TEST(InferMessageTest, AShapeOfMoreThan64DimensionsIsRefused) {
  auto at_limit = NewRequest();
  AddInput(at_limit.get(), "a", "FP32", std::vector<int64_t>(kMaxTensorRank, 1))
      ->mutable_contents()
      ->add_fp32_contents(1);
  EXPECT_TRUE(Decode(at_limit).ok());
  auto over = NewRequest();
  AddInput(over.get(), "a", "FP32", std::vector<int64_t>(1000000, 0));
  ExpectError(over, StatusCode::kInvalidArgument, "'shape' has 1000000 dimensions, more than the 64 allowed");
}

TEST(InferMessageTest, ParametersVersionAndOutputs) {
  auto m = NewRequest();
  m->set_model_version("3");
  m->set_id("req-1");
  auto& p = *m->mutable_parameters();
  p["priority"].set_int64_param(2);
  p["timeout"].set_uint64_param(1500);
  p["binary_data_output"].set_bool_param(true);
  p["flag"].set_bool_param(true);
  p["name"].set_string_param("cam1");
  p["ratio"].set_double_param(0.5);
  p["big"].set_uint64_param(std::numeric_limits<uint64_t>::max());
  p["small"].set_uint64_param(7);
  m->add_outputs()->set_name("y");
  m->add_outputs()->set_name("x");
  auto decoded = Decode(m);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const InferenceRequest& r = *decoded->request;
  EXPECT_EQ(r.model_name, "m");
  EXPECT_EQ(r.model_version, 3);
  EXPECT_EQ(r.id, "req-1");
  EXPECT_EQ(r.priority, 2u);
  ASSERT_TRUE(r.deadline.has_value());
  EXPECT_EQ(*r.deadline - kArrival, std::chrono::microseconds(1500));
  EXPECT_EQ(r.parameters.count("priority") + r.parameters.count("timeout") + r.parameters.count("binary_data_output"),
            0u);
  EXPECT_EQ(std::get<bool>(r.parameters.at("flag")), true);
  EXPECT_EQ(std::get<std::string>(r.parameters.at("name")), "cam1");
  EXPECT_EQ(std::get<double>(r.parameters.at("ratio")), 0.5);
  EXPECT_GT(std::get<double>(r.parameters.at("big")), 1.8e19);
  EXPECT_EQ(std::get<int64_t>(r.parameters.at("small")), 7);
  EXPECT_EQ(r.requested_outputs, (std::vector<std::string>{"y", "x"}));

  EXPECT_EQ(ParseModelVersion("m", "").value(), 0);
  EXPECT_EQ(ParseModelVersion("m", "12").value(), 12);
  for (const char* bad : {"0", "-1", "1.5", "one", "1 "}) {
    EXPECT_EQ(ParseModelVersion("m", bad).status().code(), StatusCode::kNotFound) << bad;
  }

  auto negative_priority = NewRequest();
  (*negative_priority->mutable_parameters())["priority"].set_int64_param(-1);
  ExpectError(negative_priority, StatusCode::kInvalidArgument, "'priority'");
  auto twice = NewRequest();
  twice->add_outputs()->set_name("y");
  twice->add_outputs()->set_name("y");
  ExpectError(twice, StatusCode::kInvalidArgument, "requested twice");
  for (bool as_string : {false, true}) {
    auto classification = NewRequest();
    auto* out = classification->add_outputs();
    out->set_name("y");
    if (as_string) {
      (*out->mutable_parameters())["classification"].set_string_param("3");
    } else {
      (*out->mutable_parameters())["classification"].set_int64_param(-3);
    }
    ExpectError(classification, StatusCode::kInvalidArgument, "'classification'");
  }
}

TEST(InferMessageTest, ClassificationAsksForTopClasses) {
  auto m = NewRequest();
  AddInput(m.get(), "x", "FP32", {1});
  m->add_raw_input_contents(std::string(4, '\0'));
  for (auto [name, count] : {std::pair{"a", 3}, std::pair{"b", 0}}) {
    auto* out = m->add_outputs();
    out->set_name(name);
    (*out->mutable_parameters())["classification"].set_int64_param(count);
  }
  auto decoded = Decode(m);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->request->requested_outputs, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(decoded->request->class_counts, (std::map<std::string, uint32_t>{{"a", 3}}));
}

TEST(InferMessageTest, SharedMemoryIsUnimplementedWhenOff) {
  auto m = NewRequest();
  auto* t = AddInput(m.get(), "x", "FP32", {1});
  (*t->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*t->mutable_parameters())["shared_memory_byte_size"].set_int64_param(4);
  ExpectError(m, StatusCode::kUnimplemented, "--allow-shared-memory");
}

// A POSIX shared memory object for one test, unlinked at the end.
struct ShmObject {
  explicit ShmObject(size_t size) : key("/weft_infer_message_test_" + std::to_string(getpid())), size(size) {
    int fd = shm_open(key.c_str(), O_CREAT | O_RDWR, 0600);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    data = static_cast<std::byte*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
  }
  ~ShmObject() {
    munmap(data, size);
    shm_unlink(key.c_str());
  }
  std::string key;
  size_t size;
  std::byte* data;
};

TEST(InferMessageTest, SharedMemoryInputsAndOutputs) {
  ShmObject object(1024);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key, 256, 512).ok());
  float values[2] = {3, 4};
  std::memcpy(object.data + 256 + 64, values, 8);

  auto m = NewRequest();
  auto* t = AddInput(m.get(), "x", "FP32", {2});
  (*t->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*t->mutable_parameters())["shared_memory_offset"].set_int64_param(64);
  (*t->mutable_parameters())["shared_memory_byte_size"].set_uint64_param(8);
  auto* out = m->add_outputs();
  out->set_name("y");
  (*out->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*out->mutable_parameters())["shared_memory_offset"].set_int64_param(128);
  (*out->mutable_parameters())["shared_memory_byte_size"].set_int64_param(8);
  m->add_outputs()->set_name("z");
  auto decoded = Decode(m, &registry);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(Values<float>(decoded->request->inputs[0]), (std::vector<float>{3, 4}));
  ASSERT_EQ(decoded->shared_memory_outputs.count("y"), 1u);

  InferenceResponse response{.model_name = "m", .model_version = 1, .id = "i"};
  response.outputs.push_back(decoded->request->inputs[0]);
  response.outputs.back().set_name("y");
  response.outputs.push_back(Tensor::FromBytes("z", DataType::kInt32, {1}, std::vector<std::byte>(4, std::byte{1})));
  ModelInferResponse encoded;
  ASSERT_TRUE(EncodeModelInferResponse(response, {"y", "z"}, decoded->shared_memory_outputs,
                                       decoded->shared_memory_inputs, &encoded)
                  .ok());
  ASSERT_EQ(encoded.outputs_size(), 2);
  ASSERT_EQ(encoded.raw_output_contents_size(), 2);
  EXPECT_EQ(encoded.raw_output_contents(0), "");  // in shared memory
  EXPECT_EQ(encoded.outputs(0).parameters().at("shared_memory_byte_size").int64_param(), 8);
  EXPECT_EQ(encoded.raw_output_contents(1).size(), 4u);
  float back[2];
  std::memcpy(back, object.data + 256 + 128, 8);
  EXPECT_EQ(back[1], 4.0f);

  auto outside = NewRequest();
  auto* o = AddInput(outside.get(), "x", "FP32", {2});
  (*o->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*o->mutable_parameters())["shared_memory_offset"].set_int64_param(508);
  (*o->mutable_parameters())["shared_memory_byte_size"].set_int64_param(8);
  auto rejected = Decode(outside, &registry);
  EXPECT_EQ(rejected.status().code(), StatusCode::kInvalidArgument) << rejected.status().ToString();

  auto no_size = NewRequest();
  auto* n = AddInput(no_size.get(), "x", "FP32", {2});
  (*n->mutable_parameters())["shared_memory_region"].set_string_param("r");
  EXPECT_EQ(Decode(no_size, &registry).status().code(), StatusCode::kInvalidArgument);

  // Hardening issue, item 1, through shared memory: [2^62 + 2] FP32 over an 8-byte window.
  auto wrapped = NewRequest();
  auto* w = AddInput(wrapped.get(), "x", "FP32", {4611686018427387906});
  (*w->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*w->mutable_parameters())["shared_memory_byte_size"].set_int64_param(8);
  auto overflow = Decode(wrapped, &registry);
  EXPECT_EQ(overflow.status().code(), StatusCode::kInvalidArgument) << overflow.status().ToString();
}

// GPU memory that says it holds more than a vector can: copying it to the host throws.
class HugeCudaBuffer final : public CudaSharedBuffer {
 public:
  static constexpr uint64_t kSize = (uint64_t{1} << 63) + 64;
  int device_id() const override { return 0; }
  uint64_t byte_size() const override { return kSize; }
  std::span<const std::byte, kCudaIpcHandleBytes> handle() const override { return handle_; }
  Status Read(uint64_t, std::span<std::byte>) const override { return Internal("not to be read"); }
  Status Write(uint64_t, std::span<const std::byte>) override { return Internal("not to be written"); }

 private:
  std::array<std::byte, kCudaIpcHandleBytes> handle_{};
};

// A copy that cannot be allocated answers the request: the exception once escaped into gRPC, whose stream handler
// swallowed it and left the stream waiting for an answer that never came.
TEST(InferMessageTest, AnInputTooLargeToCopyIsAnErrorNotAnException) {
  SharedMemoryRegistry::Options options;
  options.open_cuda_buffer = [](int, std::span<const std::byte>) -> Result<std::shared_ptr<CudaSharedBuffer>> {
    return std::shared_ptr<CudaSharedBuffer>(std::make_shared<HugeCudaBuffer>());
  };
  SharedMemoryRegistry registry(options);
  const std::array<std::byte, kCudaIpcHandleBytes> handle{};
  ASSERT_TRUE(registry.RegisterCuda("huge", handle, 0, HugeCudaBuffer::kSize).ok());
  auto m = NewRequest();
  auto* t = AddInput(m.get(), "s", "BYTES", {1});
  (*t->mutable_parameters())["shared_memory_region"].set_string_param("huge");
  (*t->mutable_parameters())["shared_memory_byte_size"].set_uint64_param(HugeCudaBuffer::kSize);
  Result<DecodedModelInfer> decoded = Decode(m, &registry);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kResourceExhausted) << decoded.status().ToString();
}

TEST(InferMessageTest, ResponseParametersAreStringParameters) {
  InferenceResponse response{.model_name = "det_small", .model_version = 1};
  response.parameters["weft_fallback_from"] = "det/2";
  response.outputs.push_back(Tensor::FromBytes("a", DataType::kInt32, {1}, std::vector<std::byte>(4)));
  ModelInferResponse encoded;
  ASSERT_TRUE(EncodeModelInferResponse(response, {}, {}, {}, &encoded).ok());
  ASSERT_EQ(encoded.parameters().count("weft_fallback_from"), 1u);
  EXPECT_EQ(encoded.parameters().at("weft_fallback_from").string_param(), "det/2");
}

TEST(InferMessageTest, EncodesEveryOutputInOrderOrTheRequestedOnes) {
  InferenceResponse response{.model_name = "m", .model_version = 2, .id = "abc"};
  response.outputs.push_back(Tensor::FromBytes("a", DataType::kFp16, {1, 2}, std::vector<std::byte>(4)));
  response.outputs.push_back(
      Tensor::FromBytes("b", DataType::kBytes, {1}, JoinBytesElements(std::vector<std::string>{"q"})));
  ModelInferResponse all;
  ASSERT_TRUE(EncodeModelInferResponse(response, {}, {}, {}, &all).ok());
  EXPECT_EQ(all.model_name(), "m");
  EXPECT_EQ(all.model_version(), "2");
  EXPECT_EQ(all.id(), "abc");
  EXPECT_TRUE(all.parameters().empty());
  ASSERT_EQ(all.outputs_size(), 2);
  EXPECT_EQ(all.outputs(0).datatype(), "FP16");
  EXPECT_EQ(std::vector<int64_t>(all.outputs(0).shape().begin(), all.outputs(0).shape().end()),
            (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(all.raw_output_contents(1), std::string("\x01\x00\x00\x00q", 5));

  ModelInferResponse one;
  ASSERT_TRUE(EncodeModelInferResponse(response, {"b"}, {}, {}, &one).ok());
  ASSERT_EQ(one.outputs_size(), 1);
  EXPECT_EQ(one.outputs(0).name(), "b");

  ModelInferResponse missing;
  EXPECT_EQ(EncodeModelInferResponse(response, {"c"}, {}, {}, &missing).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace weft
