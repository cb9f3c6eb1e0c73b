#include "base/small_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace weft {
namespace {

namespace fs = std::filesystem;

class SmallFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/weft_small_file_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return dir_ / name;
  }
  fs::path dir_;
};

TEST_F(SmallFileTest, ReadsAFileUpToTheLimitWhole) {
  const std::string text(1000, 'x');
  Result<std::string> read = ReadSmallFile(Write("f", text), 1000);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, text);
  Result<std::string> empty = ReadSmallFile(Write("e", ""), 0);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(*empty, "");
}

TEST_F(SmallFileTest, OneByteOverTheLimitIsRefused) {
  Result<std::string> read = ReadSmallFile(Write("f", std::string(1001, 'x')), 1000);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(read.status().message(), "larger than 1000 bytes");
}

TEST_F(SmallFileTest, AMissingFileIsNotFound) {
  EXPECT_EQ(ReadSmallFile(dir_ / "absent", 10).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadSmallFile(Write("f", "x") / "below", 10).status().code(), StatusCode::kNotFound);
}

// A FIFO with no writer would block an open without O_NONBLOCK, and a read forever: it is refused at once.
TEST_F(SmallFileTest, AFifoOrADirectoryIsRefusedWithoutWaiting) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  for (const fs::path& file : {dir_ / "fifo", dir_}) {
    Result<std::string> read = ReadSmallFile(file, 10);
    ASSERT_FALSE(read.ok()) << file;
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument) << file;
    EXPECT_EQ(read.status().message(), "not a regular file") << file;
  }
}

// /dev/zero never ends: a character device is not a regular file, and is refused before any read.
TEST_F(SmallFileTest, ADeviceIsRefused) {
  EXPECT_EQ(ReadSmallFile("/dev/zero", 10).status().message(), "not a regular file");
}

}  // namespace
}  // namespace weft
