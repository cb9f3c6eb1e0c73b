#include "repository/warmup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "repository/testing/fake_backend.h"

namespace weft {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// What one Execute received.
struct Call {
  std::string sample_marker;  // the first input's first byte, to tell samples apart
  std::vector<std::string> names;
  std::vector<DataType> types;
  std::vector<Shape> shapes;
  std::vector<std::vector<std::byte>> bytes;
};

// An instance that records its inputs and answers with one tensor per configured output, or with `fail`.
class RecordingInstance : public ModelInstance {
 public:
  explicit RecordingInstance(size_t outputs) : outputs_(outputs) {}

  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    Call call;
    for (const Tensor& t : inputs) {
      call.names.push_back(t.name());
      call.types.push_back(t.type());
      call.shapes.push_back(t.shape());
      call.bytes.emplace_back(t.bytes().begin(), t.bytes().end());
    }
    calls.push_back(std::move(call));
    if (!fail.ok()) return fail;
    std::vector<Tensor> out;
    for (size_t i = 0; i < outputs_; ++i) {
      std::byte* unused = nullptr;
      out.push_back(Tensor::Allocate("out" + std::to_string(i), DataType::kFp32, {1}, &unused));
    }
    return out;
  }

  std::vector<Call> calls;
  Status fail;

 private:
  size_t outputs_;
};

std::vector<std::byte> Bytes(std::string_view text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::vector<std::byte> Repeat(const std::vector<std::byte>& item, size_t times) {
  std::vector<std::byte> out;
  for (size_t i = 0; i < times; ++i) out.insert(out.end(), item.begin(), item.end());
  return out;
}

bool AllZero(const std::vector<std::byte>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

WarmupInputConfig Input(DataType type, Shape dims, WarmupInputConfig::Source source = WarmupInputConfig::Source::kZero,
                        std::string file = "") {
  return {.data_type = type, .dims = std::move(dims), .source = source, .file = std::move(file)};
}

class WarmupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_dir_ = fs::temp_directory_path() / ("weft_warmup_test_" + std::to_string(getpid())) / "m";
    fs::create_directories(model_dir_ / "1");
    fs::create_directories(model_dir_ / "warmup");
  }
  void TearDown() override { fs::remove_all(model_dir_.parent_path()); }

  void WriteFile(const std::string& name, const std::vector<std::byte>& bytes) {
    std::ofstream(model_dir_ / "warmup" / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }

  // A version of `config` with `instances` recording instances; the config must validate.
  LoadedVersion Version(ModelConfig config, int instances = 1) {
    EXPECT_TRUE(ValidateModelConfig(config).ok()) << ValidateModelConfig(config).ToString();
    LoadedVersion v;
    v.version = 1;
    v.dir = model_dir_ / "1";
    recorders_.clear();
    for (int i = 0; i < instances; ++i) {
      auto instance = std::make_unique<RecordingInstance>(config.outputs.size());
      recorders_.push_back(instance.get());
      v.instances.push_back(std::move(instance));
    }
    v.config = std::move(config);
    return v;
  }

  // Model "m": batching (max_batch_size 8) when `batching`, inputs x FP32 [-1, 3] and y INT64 [2], one output.
  static ModelConfig TwoInputs(bool batching = true) {
    ModelConfig c;
    c.name = "m";
    c.max_batch_size = batching ? 8 : 0;
    c.inputs = {{"x", DataType::kFp32, {-1, 3}, std::nullopt}, {"y", DataType::kInt64, {2}, std::nullopt}};
    c.outputs = {{"z", DataType::kFp32, {1}, std::nullopt}};
    return c;
  }

  fs::path model_dir_;
  std::vector<RecordingInstance*> recorders_;  // owned by the version
};

TEST_F(WarmupTest, NoSamplesIsOkAndRunsNothing) {
  LoadedVersion v = Version(TwoInputs());
  EXPECT_TRUE(WarmUpVersion(v).ok());
  EXPECT_TRUE(recorders_[0]->calls.empty());
}

TEST_F(WarmupTest, ZeroInputsArriveInConfigOrderWithTheBatchDimensionFirst) {
  ModelConfig c = TwoInputs();
  // The sample names y first; Execute still gets x first, as the config lists it.
  c.warmup = {{.name = "zeros",
               .batch_size = 4,
               .inputs = {{"y", Input(DataType::kInt64, {2})}, {"x", Input(DataType::kFp32, {2, 3})}}}};
  LoadedVersion v = Version(c);
  ASSERT_TRUE(WarmUpVersion(v).ok());
  ASSERT_EQ(recorders_[0]->calls.size(), 1u);
  const Call& call = recorders_[0]->calls[0];
  EXPECT_THAT(call.names, ElementsAre("x", "y"));
  EXPECT_THAT(call.types, ElementsAre(DataType::kFp32, DataType::kInt64));
  EXPECT_THAT(call.shapes, ElementsAre(Shape{4, 2, 3}, Shape{4, 2}));
  EXPECT_EQ(call.bytes[0].size(), 4u * 2 * 3 * 4);
  EXPECT_EQ(call.bytes[1].size(), 4u * 2 * 8);
  EXPECT_TRUE(AllZero(call.bytes[0]));
  EXPECT_TRUE(AllZero(call.bytes[1]));
}

TEST_F(WarmupTest, AModelThatDoesNotBatchGetsNoBatchDimension) {
  ModelConfig c = TwoInputs(/*batching=*/false);
  c.warmup = {{.name = "s",
               .batch_size = 1,
               .inputs = {{"x", Input(DataType::kFp32, {5, 3})}, {"y", Input(DataType::kInt64, {2})}}}};
  LoadedVersion v = Version(c);
  ASSERT_TRUE(WarmUpVersion(v).ok());
  ASSERT_EQ(recorders_[0]->calls.size(), 1u);
  EXPECT_THAT(recorders_[0]->calls[0].shapes, ElementsAre(Shape{5, 3}, Shape{2}));
}

TEST_F(WarmupTest, RandomDataIsSeededPerSampleAndInputAndRepeatedAlongTheBatch) {
  ModelConfig c;
  c.name = "m";
  c.max_batch_size = 4;
  c.inputs = {{"a", DataType::kUint8, {64}, std::nullopt},
              {"b", DataType::kUint8, {64}, std::nullopt},
              {"flags", DataType::kBool, {256}, std::nullopt}};
  c.outputs = {{"z", DataType::kFp32, {1}, std::nullopt}};
  const std::map<std::string, WarmupInputConfig> random = {
      {"a", Input(DataType::kUint8, {64}, WarmupInputConfig::Source::kRandom)},
      {"b", Input(DataType::kUint8, {64}, WarmupInputConfig::Source::kRandom)},
      {"flags", Input(DataType::kBool, {256}, WarmupInputConfig::Source::kRandom)}};
  c.warmup = {{.name = "r1", .batch_size = 2, .inputs = random}, {.name = "r2", .batch_size = 2, .inputs = random}};
  LoadedVersion v = Version(c);
  ASSERT_TRUE(WarmUpVersion(v).ok());
  ASSERT_TRUE(WarmUpVersion(v).ok());
  const std::vector<Call>& calls = recorders_[0]->calls;
  ASSERT_EQ(calls.size(), 4u);  // r1, r2, then both again
  const std::vector<std::byte>& a = calls[0].bytes[0];
  ASSERT_EQ(a.size(), 128u);
  EXPECT_FALSE(AllZero(a));
  // The batch repeats one item.
  EXPECT_EQ(std::vector<std::byte>(a.begin(), a.begin() + 64), std::vector<std::byte>(a.begin() + 64, a.end()));
  EXPECT_NE(calls[0].bytes[0], calls[0].bytes[1]);  // each input its own data
  EXPECT_NE(calls[0].bytes[0], calls[1].bytes[0]);  // each sample its own seed
  EXPECT_EQ(calls[0].bytes, calls[2].bytes);        // and the same data every time
  EXPECT_EQ(calls[1].bytes, calls[3].bytes);
  // BOOL elements are 0 or 1, and both occur.
  const std::vector<std::byte>& flags = calls[0].bytes[2];
  EXPECT_TRUE(
      std::all_of(flags.begin(), flags.end(), [](std::byte b) { return b == std::byte{0} || b == std::byte{1}; }));
  EXPECT_NE(std::count(flags.begin(), flags.end(), std::byte{1}), 0);
  EXPECT_NE(std::count(flags.begin(), flags.end(), std::byte{0}), 0);
}

TEST_F(WarmupTest, FileInputsArriveAsWrittenRepeatedAlongTheBatch) {
  ModelConfig c;
  c.name = "m";
  c.max_batch_size = 4;
  c.inputs = {{"x", DataType::kUint8, {-1}, std::nullopt}};
  c.outputs = {{"z", DataType::kFp32, {1}, std::nullopt}};
  c.warmup = {{.name = "f",
               .batch_size = 3,
               .inputs = {{"x", Input(DataType::kUint8, {5}, WarmupInputConfig::Source::kFile, "sub/x.bin")}}}};
  fs::create_directories(model_dir_ / "warmup" / "sub");
  WriteFile("sub/x.bin", Bytes("hello"));
  LoadedVersion v = Version(c);
  ASSERT_TRUE(WarmUpVersion(v).ok());
  ASSERT_EQ(recorders_[0]->calls.size(), 1u);
  EXPECT_THAT(recorders_[0]->calls[0].shapes, ElementsAre(Shape{3, 5}));
  EXPECT_EQ(recorders_[0]->calls[0].bytes[0], Repeat(Bytes("hello"), 3));
}

TEST_F(WarmupTest, InputsAreReshapedAsForARequest) {
  ModelConfig c;
  c.name = "m";
  c.max_batch_size = 2;
  c.inputs = {{"flat", DataType::kFp32, {-1, 3}, Shape{-1}}, {"scalar", DataType::kInt32, {1}, Shape{}}};
  c.outputs = {{"z", DataType::kFp32, {1}, std::nullopt}};
  c.warmup = {{.name = "r",
               .batch_size = 2,
               .inputs = {{"flat", Input(DataType::kFp32, {4, 3})}, {"scalar", Input(DataType::kInt32, {1})}}}};
  LoadedVersion v = Version(c);
  ASSERT_TRUE(WarmUpVersion(v).ok());
  ASSERT_EQ(recorders_[0]->calls.size(), 1u);
  EXPECT_THAT(recorders_[0]->calls[0].shapes, ElementsAre(Shape{2, 12}, Shape{2}));
  EXPECT_EQ(recorders_[0]->calls[0].bytes[0].size(), 2u * 12 * 4);
}

TEST_F(WarmupTest, EachSampleRunsCountTimesOnEveryInstanceInConfigOrder) {
  ModelConfig c = TwoInputs();
  c.max_batch_size = 8;
  auto inputs = [](int first_dim) {
    return std::map<std::string, WarmupInputConfig>{{"x", Input(DataType::kFp32, {first_dim, 3})},
                                                    {"y", Input(DataType::kInt64, {2})}};
  };
  // The sample's x dims tell the samples apart: 1 for "once" (count 0 runs once), 2 for "thrice".
  c.warmup = {{.name = "once", .batch_size = 1, .inputs = inputs(1), .count = 0},
              {.name = "thrice", .batch_size = 1, .inputs = inputs(2), .count = 3}};
  LoadedVersion v = Version(c, /*instances=*/3);
  ASSERT_TRUE(WarmUpVersion(v).ok());
  for (RecordingInstance* instance : recorders_) {
    std::vector<int64_t> order;
    for (const Call& call : instance->calls) order.push_back(call.shapes[0][1]);
    EXPECT_THAT(order, ElementsAre(1, 2, 2, 2));
  }
}

TEST_F(WarmupTest, ASampleOfBatchSizeZeroIsSkipped) {
  ModelConfig c = TwoInputs();
  c.warmup = {{.name = "skipped",
               .batch_size = 0,
               .inputs = {{"x", Input(DataType::kFp32, {1, 3})}, {"y", Input(DataType::kInt64, {2})}}}};
  LoadedVersion v = Version(c);
  EXPECT_TRUE(WarmUpVersion(v).ok());
  EXPECT_TRUE(recorders_[0]->calls.empty());
}

TEST_F(WarmupTest, AFailingInstanceIsReportedWithTheSampleAndItsCode) {
  ModelConfig c = TwoInputs();
  c.warmup = {{.name = "sample0",
               .batch_size = 2,
               .inputs = {{"x", Input(DataType::kFp32, {1, 3})}, {"y", Input(DataType::kInt64, {2})}}}};
  LoadedVersion v = Version(c, /*instances=*/3);
  recorders_[1]->fail = InvalidArgument("model 'm' rejected its inputs: boom");
  Status status = WarmUpVersion(v);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "warm-up 'sample0' on instance 1: model 'm' rejected its inputs: boom");
  EXPECT_EQ(recorders_[0]->calls.size(), 1u);
  EXPECT_EQ(recorders_[1]->calls.size(), 1u);
  EXPECT_TRUE(recorders_[2]->calls.empty());  // the warm-up stops at the first failure
}

TEST_F(WarmupTest, AnExecutionWithTheWrongNumberOfOutputsIsAnError) {
  ModelConfig c = TwoInputs();
  c.outputs.push_back({"z2", DataType::kFp32, {1}, std::nullopt});
  c.warmup = {{.name = "s",
               .batch_size = 1,
               .inputs = {{"x", Input(DataType::kFp32, {1, 3})}, {"y", Input(DataType::kInt64, {2})}}}};
  LoadedVersion v = Version(c);
  v.instances[0] = std::make_unique<RecordingInstance>(1);  // answers with one output for two
  Status status = WarmUpVersion(v);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_EQ(status.message(), "warm-up 's' on instance 0: the backend returned 1 outputs, the config declares 2");
}

// Every file is measured before the first execution: a bad file in the last sample fails the warm-up before the
// first sample has run.
TEST_F(WarmupTest, BadFilesAreRefusedBeforeAnyExecution) {
  ModelConfig c;
  c.name = "m";
  c.max_batch_size = 4;
  c.inputs = {{"x", DataType::kFp32, {2}, std::nullopt}};
  c.outputs = {{"z", DataType::kFp32, {1}, std::nullopt}};
  const WarmupConfig first = {.name = "first", .batch_size = 1, .inputs = {{"x", Input(DataType::kFp32, {2})}}};
  auto from_file = [](const std::string& file) {
    return WarmupConfig{.name = "second",
                        .batch_size = 1,
                        .inputs = {{"x", Input(DataType::kFp32, {2}, WarmupInputConfig::Source::kFile, file)}}};
  };
  WriteFile("short.bin", Bytes("1234567"));   // 7 bytes for 8
  WriteFile("long.bin", Bytes("123456789"));  // 9 bytes for 8
  fs::create_directories(model_dir_ / "warmup" / "dir.bin");
  struct Case {
    std::string file;
    StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"short.bin", StatusCode::kInvalidArgument,
       "warm-up 'second': input 'x': warmup/short.bin has 7 bytes, dims [2] of TYPE_FP32 take 8"},
      {"long.bin", StatusCode::kInvalidArgument,
       "warm-up 'second': input 'x': warmup/long.bin has 9 bytes, dims [2] of TYPE_FP32 take 8"},
      {"absent.bin", StatusCode::kNotFound, "warm-up 'second': input 'x': warmup/absent.bin: not found"},
      {"dir.bin", StatusCode::kInvalidArgument, "warm-up 'second': input 'x': warmup/dir.bin: not a regular file"},
  };
  for (const Case& k : cases) {
    ModelConfig with = c;
    with.warmup = {first, from_file(k.file)};
    LoadedVersion v = Version(with);
    Status status = WarmUpVersion(v);
    ASSERT_FALSE(status.ok()) << k.file;
    EXPECT_EQ(status.code(), k.code) << k.file;
    EXPECT_EQ(status.message(), k.message);
    EXPECT_TRUE(recorders_[0]->calls.empty()) << k.file;
  }
}

TEST_F(WarmupTest, BytesSamplesFromZerosRandomAndFiles) {
  ModelConfig c;
  c.name = "m";
  c.max_batch_size = 2;
  c.inputs = {{"text", DataType::kBytes, {-1}, std::nullopt}};
  c.outputs = {{"z", DataType::kFp32, {1}, std::nullopt}};
  auto sample = [](const std::string& name, WarmupInputConfig::Source source, std::string file = "") {
    return WarmupConfig{
        .name = name, .batch_size = 2, .inputs = {{"text", Input(DataType::kBytes, {3}, source, std::move(file))}}};
  };
  const std::vector<std::string> strings = {"a", "", "longer one"};
  WriteFile("text.bin", JoinBytesElements(strings));
  c.warmup = {sample("zeros", WarmupInputConfig::Source::kZero), sample("random", WarmupInputConfig::Source::kRandom),
              sample("file", WarmupInputConfig::Source::kFile, "text.bin")};
  LoadedVersion v = Version(c);
  ASSERT_TRUE(WarmUpVersion(v).ok());
  const std::vector<Call>& calls = recorders_[0]->calls;
  ASSERT_EQ(calls.size(), 3u);
  // Zeros and random data (as in Triton) are empty elements: a zero length each.
  const std::vector<std::byte> empty(2 * 3 * 4, std::byte{0});
  EXPECT_EQ(calls[0].bytes[0], empty);
  EXPECT_EQ(calls[1].bytes[0], empty);
  for (const Call& call : calls) {
    EXPECT_EQ(call.types[0], DataType::kBytes);
    EXPECT_EQ(call.shapes[0], (Shape{2, 3}));
    EXPECT_TRUE(ValidateTensorBytes(DataType::kBytes, call.shapes[0], call.bytes[0]).ok());
  }
  EXPECT_EQ(calls[2].bytes[0], Repeat(JoinBytesElements(strings), 2));
}

TEST_F(WarmupTest, BytesFilesWithTheWrongElementsAreRefusedBeforeAnyExecution) {
  ModelConfig c;
  c.name = "m";
  c.inputs = {{"text", DataType::kBytes, {2}, std::nullopt}};
  c.outputs = {{"z", DataType::kFp32, {1}, std::nullopt}};
  const std::vector<std::string> three = {"a", "b", "c"};
  WriteFile("three.bin", JoinBytesElements(three));
  std::vector<std::byte> overrun = JoinBytesElements(std::vector<std::string>{"ab", "cd"});
  overrun.pop_back();
  WriteFile("overrun.bin", overrun);
  for (const std::string file : {"three.bin", "overrun.bin"}) {
    c.warmup = {{.name = "ok", .batch_size = 1, .inputs = {{"text", Input(DataType::kBytes, {2})}}},
                {.name = "bad",
                 .batch_size = 1,
                 .inputs = {{"text", Input(DataType::kBytes, {2}, WarmupInputConfig::Source::kFile, file)}}}};
    LoadedVersion v = Version(c);
    Status status = WarmUpVersion(v);
    ASSERT_FALSE(status.ok()) << file;
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), StartsWith("warm-up 'bad': input 'text': warmup/" + file + ": BYTES tensor "));
    EXPECT_TRUE(recorders_[0]->calls.empty()) << file;
  }
}

// The repository's fake backend (an echo instance) warms up too: nothing here depends on the recorder.
TEST_F(WarmupTest, WarmsUpTheFakeBackendsInstances) {
  ModelConfig c = TwoInputs();
  c.outputs = {{"x_out", DataType::kFp32, {-1, 3}, std::nullopt}, {"y_out", DataType::kInt64, {2}, std::nullopt}};
  c.warmup = {{.name = "echo",
               .batch_size = 8,
               .inputs = {{"x", Input(DataType::kFp32, {7, 3}, WarmupInputConfig::Source::kRandom)},
                          {"y", Input(DataType::kInt64, {2})}},
               .count = 2}};
  fakes::FakeBackend backend({});
  LoadedVersion v;
  v.config = c;
  v.dir = model_dir_ / "1";
  for (int i = 0; i < 2; ++i) {
    auto instance = backend.CreateInstance(c, v.dir, i);
    ASSERT_TRUE(instance.ok());
    v.instances.push_back(std::move(*instance));
  }
  EXPECT_TRUE(WarmUpVersion(v).ok());
}

}  // namespace
}  // namespace weft
