#include "backends/onnx/onnx_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <fstream>

#include "backends/testing/reference_data.h"

namespace weft {
namespace {

using ::testing::HasSubstr;

ModelConfig DetectorConfig() {
  ModelConfig config;
  config.name = "detector";
  config.platform = "onnxruntime_onnx";
  config.max_batch_size = 8;
  config.inputs = {{"images", DataType::kFp32, {3, 224, 224}, {}}};
  config.outputs = {{"features", DataType::kFp32, {6, 27, 27}, {}}};
  return config;
}

// Two batch items as one tensor, to check the batch dimension against a single-item reference.
Tensor Stack(const Tensor& a, const Tensor& b) {
  Shape shape = a.shape();
  shape[0] += b.shape()[0];
  std::byte* data;
  Tensor both = Tensor::Allocate(a.name(), a.type(), shape, &data);
  std::memcpy(data, a.data(), a.byte_size());
  std::memcpy(data + a.byte_size(), b.data(), b.byte_size());
  return both;
}

// Item `i` of a batch, as a batch of one.
Tensor Item(const Tensor& batch, int64_t i) {
  Shape shape = batch.shape();
  size_t item_bytes = batch.byte_size() / shape[0];
  shape[0] = 1;
  return Tensor(batch.name(), batch.type(), shape, batch.owner(), batch.data() + i * item_bytes, item_bytes);
}

class OnnxBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "weft_onnx_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto input = examples::ReadReference("detector", "input", "images", DataType::kFp32, {1, 3, 224, 224});
    auto expected = examples::ReadReference("detector", "output", "features", DataType::kFp32, {1, 6, 27, 27});
    ASSERT_TRUE(input.ok()) << input.status().ToString();
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    input_ = *input;
    expected_ = *expected;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Result<std::unique_ptr<ModelInstance>> Load(const ModelConfig& config, const std::filesystem::path& dir) {
    WEFT_RETURN_IF_ERROR(backend_->Validate(config));
    return backend_->CreateInstance(config, dir, 0);
  }

  std::shared_ptr<const Backend> backend_ = MakeOnnxBackend();
  std::filesystem::path dir_;
  Tensor input_;
  Tensor expected_;
};

TEST_F(OnnxBackendTest, DetectorMatchesTorchWithBatchOneAndTwo) {
  auto instance = Load(DetectorConfig(), examples::VersionDir("detector"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();

  auto one = (*instance)->Execute({&input_, 1});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].name(), "features");
  EXPECT_EQ((*one)[0].shape(), Shape({1, 6, 27, 27}));
  EXPECT_LE(examples::MaxAbsDiff((*one)[0], expected_), 1e-4f);

  // Batch 2 with a second, different image: its item must match the same image run alone.
  std::byte* data;
  Tensor other = Tensor::Allocate("images", DataType::kFp32, {1, 3, 224, 224}, &data);
  for (size_t i = 0; i < other.byte_size() / sizeof(float); ++i) {
    float v = static_cast<float>((i * 2654435761u) % 1000) / 1000.f;
    std::memcpy(data + i * sizeof(float), &v, sizeof(v));
  }
  auto other_alone = (*instance)->Execute({&other, 1});
  ASSERT_TRUE(other_alone.ok()) << other_alone.status().ToString();

  Tensor pair = Stack(input_, other);
  auto two = (*instance)->Execute({&pair, 1});
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ((*two)[0].shape(), Shape({2, 6, 27, 27}));
  EXPECT_LE(examples::MaxAbsDiff(Item((*two)[0], 0), expected_), 1e-4f);
  EXPECT_LE(examples::MaxAbsDiff(Item((*two)[0], 1), (*other_alone)[0]), 1e-4f);
  EXPECT_GT(examples::MaxAbsDiff(Item((*two)[0], 1), expected_), 1e-2f);  // the items really differ

  // And back to batch 1: the Net reshapes again.
  one = (*instance)->Execute({&input_, 1});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_LE(examples::MaxAbsDiff((*one)[0], expected_), 1e-4f);
}

TEST_F(OnnxBackendTest, OutputsAreOwnedCopies) {
  auto instance = Load(DetectorConfig(), examples::VersionDir("detector"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  auto first = (*instance)->Execute({&input_, 1});
  ASSERT_TRUE(first.ok());
  std::byte* data;
  Tensor zeros = Tensor::Allocate("images", DataType::kFp32, {1, 3, 224, 224}, &data);
  ASSERT_TRUE((*instance)->Execute({&zeros, 1}).ok());  // reuses the Net's buffers
  instance->reset();
  EXPECT_LE(examples::MaxAbsDiff((*first)[0], expected_), 1e-4f);
}

TEST_F(OnnxBackendTest, WrongShapeIsAnErrorNotACrash) {
  auto instance = Load(DetectorConfig(), examples::VersionDir("detector"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  std::byte* data;
  Tensor small = Tensor::Allocate("images", DataType::kFp32, {1, 3, 100, 100}, &data);
  auto out = (*instance)->Execute({&small, 1});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("'images' has shape [1,3,100,100]"));

  // With a config that leaves the dimensions open, OpenCV itself rejects 4 channels: still an error.
  auto open = DetectorConfig();
  open.inputs[0].dims = {-1, -1, -1};
  open.outputs[0].dims = {-1, -1, -1};
  auto relaxed = Load(open, examples::VersionDir("detector"));
  ASSERT_TRUE(relaxed.ok()) << relaxed.status().ToString();
  Tensor four = Tensor::Allocate("images", DataType::kFp32, {1, 4, 32, 32}, &data);
  out = (*relaxed)->Execute({&four, 1});
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("rejected its inputs: Number of input channels should be multiple of 3 but got 4"));

  // The Net recovers after an error, and other image sizes work where the config allows them.
  Tensor other_size = Tensor::Allocate("images", DataType::kFp32, {2, 3, 64, 64}, &data);
  out = (*relaxed)->Execute({&other_size, 1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), Shape({2, 6, 7, 7}));
}

TEST_F(OnnxBackendTest, MissingAndCorruptFilesAreClearErrors) {
  auto missing = Load(DetectorConfig(), dir_);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr((dir_ / "model.onnx").string()));

  std::ofstream(dir_ / "model.onnx") << "this is not a protobuf";
  auto corrupt = Load(DetectorConfig(), dir_);
  EXPECT_EQ(corrupt.status().code(), StatusCode::kInternal);
  EXPECT_THAT(corrupt.status().message(), HasSubstr("cannot load ONNX file"));
  EXPECT_THAT(corrupt.status().message(), HasSubstr((dir_ / "model.onnx").string()));
}

TEST_F(OnnxBackendTest, ValidateAcceptsOnlyFp32) {
  EXPECT_TRUE(backend_->Validate(DetectorConfig()).ok());
  EXPECT_EQ(backend_->DefaultModelFilename(), "model.onnx");
  for (DataType type : {DataType::kFp16, DataType::kFp64, DataType::kInt64, DataType::kBytes}) {
    auto config = DetectorConfig();
    config.outputs[0].data_type = type;
    auto status = backend_->Validate(config);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("'features'"));
    EXPECT_THAT(status.message(), HasSubstr("FP32 only"));
  }
}

TEST_F(OnnxBackendTest, UnknownOutputNameFailsAtLoad) {
  auto config = DetectorConfig();
  config.outputs[0].name = "boxes";
  auto instance = Load(config, examples::VersionDir("detector"));
  EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(instance.status().message(), HasSubstr("no output 'boxes' (its outputs: features)"));
}

TEST_F(OnnxBackendTest, UnknownInputNameFailsAtLoad) {
  auto config = DetectorConfig();
  config.inputs[0].name = "pixels";
  auto instance = Load(config, examples::VersionDir("detector"));
  EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(instance.status().message(), HasSubstr("no input 'pixels'"));
}

TEST_F(OnnxBackendTest, CustomFilename) {
  std::filesystem::copy_file(examples::VersionDir("detector") / "model.onnx", dir_ / "net.onnx");
  auto config = DetectorConfig();
  config.default_model_filename = "net.onnx";
  auto instance = Load(config, dir_);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  auto out = (*instance)->Execute({&input_, 1});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_LE(examples::MaxAbsDiff((*out)[0], expected_), 1e-4f);
}

}  // namespace
}  // namespace weft
