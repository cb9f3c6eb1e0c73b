#include "model/classification.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace weft {
namespace {

template <typename T>
Tensor Values(DataType type, Shape shape, std::vector<T> values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return Tensor::FromBytes("scores", type, std::move(shape), std::move(bytes));
}

std::vector<std::string> Strings(const Tensor& t) {
  std::vector<std::string> out;
  for (std::string_view s : SplitBytesElements(t.bytes())) out.emplace_back(s);
  return out;
}

TEST(ClassificationTest, TopClassesPerBatchEntryWithLabels) {
  Tensor scores = Values<float>(DataType::kFp32, {2, 3}, {0.1f, 0.7f, 0.2f, 0.5f, 0.25f, 0.25f});
  auto top = Classify(scores, 2, /*batched=*/true, {"cat", "dog"});
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(top->type(), DataType::kBytes);
  EXPECT_EQ(top->name(), "scores");
  EXPECT_EQ(top->shape(), (Shape{2, 2}));
  // Index 2 has no label line: no label. Equal values: the lower index first.
  EXPECT_EQ(Strings(*top),
            (std::vector<std::string>{"0.700000:1:dog", "0.200000:2", "0.500000:0:cat", "0.250000:1:dog"}));
}

TEST(ClassificationTest, ClassCountIsClampedAndUnbatchedOutputsAreOneEntry) {
  Tensor scores = Values<int32_t>(DataType::kInt32, {2, 2}, {3, -1, 9, 4});
  auto top = Classify(scores, 10, /*batched=*/false, {});
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(top->shape(), (Shape{4}));
  EXPECT_EQ(Strings(*top), (std::vector<std::string>{"9:2", "4:3", "3:0", "-1:1"}));
}

TEST(ClassificationTest, EveryClassifiableTypeAndTheOthersRefused) {
  EXPECT_EQ(Strings(*Classify(Values<uint8_t>(DataType::kUint8, {3}, {1, 200, 7}), 1, false, {})),
            (std::vector<std::string>{"200:1"}));
  EXPECT_EQ(Strings(*Classify(Values<double>(DataType::kFp64, {2}, {0.5, -2.0}), 1, false, {})),
            (std::vector<std::string>{"0.500000:0"}));
  EXPECT_EQ(Strings(*Classify(Values<int64_t>(DataType::kInt64, {2}, {-5, -4}), 1, false, {})),
            (std::vector<std::string>{"-4:1"}));
  for (DataType type : {DataType::kFp16, DataType::kBf16, DataType::kBool, DataType::kBytes}) {
    EXPECT_FALSE(IsClassifiable(type)) << DataTypeName(type);
  }
  auto half = Classify(Values<uint16_t>(DataType::kFp16, {2}, {1, 2}), 1, false, {});
  EXPECT_EQ(half.status().code(), StatusCode::kInvalidArgument);
  auto no_batch = Classify(Values<float>(DataType::kFp32, {}, {1.0f}), 1, true, {});
  EXPECT_EQ(no_batch.status().code(), StatusCode::kInvalidArgument);
}

TEST(ClassificationTest, AnEmptyBatchGivesAnEmptyAnswer) {
  auto top = Classify(Values<float>(DataType::kFp32, {0, 3}, {}), 2, true, {});
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(top->shape(), (Shape{0, 0}));
}

TEST(ClassificationTest, ReadsLabelFiles) {
  const auto dir = std::filesystem::temp_directory_path() / ("weft_classification_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "labels.txt";
  std::ofstream(file) << "cat\r\ndog\n\nbird";
  auto labels = ReadLabelFile(file);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  EXPECT_EQ(*labels, (std::vector<std::string>{"cat", "dog", "", "bird"}));
  auto missing = ReadLabelFile(dir / "none.txt");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("none.txt"), std::string::npos);
}

// A file of empty lines is small on disk and large in memory (a string per line): lines past kMaxLabels are
// refused, as is a FIFO in the file's place (it would block the load).
TEST(ClassificationTest, RefusesLabelFilesOfTooManyLinesAndWhatIsNoRegularFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("weft_classification_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "at_limit.txt") << std::string(kMaxLabels, '\n');
  std::ofstream(dir / "over.txt") << std::string(kMaxLabels + 1, '\n');
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  auto at_limit = ReadLabelFile(dir / "at_limit.txt");
  auto over = ReadLabelFile(dir / "over.txt");
  auto fifo = ReadLabelFile(dir / "fifo");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(at_limit.ok()) << at_limit.status().ToString();
  EXPECT_EQ(at_limit->size(), kMaxLabels);
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("more than 1048576 lines"), std::string::npos) << over.status().message();
  EXPECT_EQ(fifo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fifo.status().message().find("not a regular file"), std::string::npos) << fifo.status().message();
}

}  // namespace
}  // namespace weft
