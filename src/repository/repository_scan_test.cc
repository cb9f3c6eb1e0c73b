#include "repository/repository_scan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace weft {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RepositoryScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "weft_scan_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& relative, const std::string& text) {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative, std::ios::binary) << text;
  }
  const VersionDirScan& Version(const ModelDirScan& scan, int64_t v) {
    for (const auto& s : scan.versions) {
      if (s.version == v) return s;
    }
    ADD_FAILURE() << "no version " << v;
    return scan.versions.front();
  }

  fs::path root_;
};

TEST_F(RepositoryScanTest, ListsModelDirectoriesButNotHiddenOnesOrFiles) {
  fs::create_directories(root_ / "b");
  fs::create_directories(root_ / "a");
  fs::create_directories(root_ / ".staging");
  Write("README", "not a model");
  EXPECT_THAT(ListModelDirs(root_).value(), ElementsAre("a", "b"));
  EXPECT_EQ(ListModelDirs(root_ / "missing").status().code(), StatusCode::kNotFound);
}

TEST_F(RepositoryScanTest, ReadsTheConfigAndTheVersionDirectories) {
  Write("m/config.pbtxt", "name: \"m\"");
  Write("m/1/model.txt", "1 0");
  Write("m/10/model.txt", "1 0");
  fs::create_directories(root_ / "m" / "01");   // not a version: leading zero
  fs::create_directories(root_ / "m" / "tmp");  // not a version
  Write("m/2", "a file, not a directory");
  ModelDirScan scan = ScanModelDir(root_, "m");
  EXPECT_TRUE(scan.exists);
  ASSERT_TRUE(scan.config.has_value());
  EXPECT_EQ(*scan.config, "name: \"m\"");
  EXPECT_GT(scan.config_change_ns, 0);
  ASSERT_EQ(scan.versions.size(), 2u);
  EXPECT_EQ(scan.versions[0].version, 1);
  EXPECT_EQ(scan.versions[1].version, 10);
  EXPECT_TRUE(scan.versions[0].error.ok());
  EXPECT_FALSE(scan.versions[0].has_manifest);
  EXPECT_FALSE(ScanModelDir(root_, "absent").exists);
}

TEST_F(RepositoryScanTest, TheFingerprintIsStableUntilSomethingIsWritten) {
  Write("m/config.pbtxt", "");
  Write("m/1/model.txt", "1 0");
  Write("m/1/sub/weights.bin", "abc");
  const uint64_t first = Version(ScanModelDir(root_, "m"), 1).fingerprint;
  EXPECT_EQ(Version(ScanModelDir(root_, "m"), 1).fingerprint, first);

  Write("m/1/model.txt", "2 0");  // rewritten in place, same size
  const uint64_t rewritten = Version(ScanModelDir(root_, "m"), 1).fingerprint;
  EXPECT_NE(rewritten, first);

  Write("m/1/model.tmp", "3 0");
  fs::rename(root_ / "m/1/model.tmp", root_ / "m/1/model.txt");  // replaced by a rename
  const uint64_t renamed = Version(ScanModelDir(root_, "m"), 1).fingerprint;
  EXPECT_NE(renamed, rewritten);

  Write("m/1/sub/weights.bin", "abd");  // deep below
  EXPECT_NE(Version(ScanModelDir(root_, "m"), 1).fingerprint, renamed);
}

TEST_F(RepositoryScanTest, TheNewestChangeFollowsWrites) {
  Write("m/1/model.txt", "1 0");
  const int64_t before = Version(ScanModelDir(root_, "m"), 1).newest_change_ns;
  usleep(20000);
  Write("m/1/extra.txt", "x");
  EXPECT_GT(Version(ScanModelDir(root_, "m"), 1).newest_change_ns, before);
}

TEST_F(RepositoryScanTest, SeesAManifest) {
  Write("m/1/model.txt", "1 0");
  Write("m/1/SHA256SUMS", "");
  EXPECT_TRUE(Version(ScanModelDir(root_, "m"), 1).has_manifest);
}

TEST_F(RepositoryScanTest, AVersionPastTheLimitsIsAnErrorNotAPartialScan) {
  for (int i = 0; i < 5; ++i) Write("m/1/f" + std::to_string(i), "x");
  ModelDirScan scan = ScanModelDir(root_, "m", {.max_entries_per_version = 4});
  EXPECT_THAT(Version(scan, 1).error.message(), HasSubstr("m/1: more than 4 files"));

  fs::create_directories(root_ / "d/1/a/b/c");
  scan = ScanModelDir(root_, "d", {.max_depth = 2});
  EXPECT_THAT(Version(scan, 1).error.message(), HasSubstr("deeper than 2"));
}

TEST_F(RepositoryScanTest, DoesNotFollowALinkToADirectory) {
  Write("m/1/model.txt", "1 0");
  fs::create_directory_symlink(root_ / "m" / "1", root_ / "m" / "1" / "loop");
  ModelDirScan scan = ScanModelDir(root_, "m");
  EXPECT_TRUE(Version(scan, 1).error.ok()) << Version(scan, 1).error.message();
}

TEST_F(RepositoryScanTest, AConfigTooLargeIsAnError) {
  Write("m/config.pbtxt", std::string(100, 'x'));
  ModelDirScan scan = ScanModelDir(root_, "m", {.max_config_bytes = 10});
  EXPECT_FALSE(scan.config.has_value());
  EXPECT_THAT(scan.config_error.message(), HasSubstr("m/config.pbtxt: larger than"));
}

// A model directory that cannot be looked at (here a link loop; permissions or a stale network mount alike) is not
// a removed one: the scan says it exists and carries the error, so that what it serves keeps serving.
TEST_F(RepositoryScanTest, ADirectoryThatCannotBeLookedAtIsAnErrorNotAbsent) {
  fs::create_symlink(root_ / "m", root_ / "m");
  ModelDirScan scan = ScanModelDir(root_, "m");
  EXPECT_TRUE(scan.exists);
  EXPECT_EQ(scan.error.code(), StatusCode::kUnavailable);
  EXPECT_THAT(scan.error.message(), HasSubstr("m: cannot be read"));
  EXPECT_FALSE(ScanModelDir(root_, "gone").exists);
}

// A FIFO in place of config.pbtxt is refused without blocking the scan.
TEST_F(RepositoryScanTest, AFifoInPlaceOfTheConfigIsAnError) {
  fs::create_directories(root_ / "m");
  ASSERT_EQ(::mkfifo((root_ / "m" / "config.pbtxt").c_str(), 0600), 0);
  ModelDirScan scan = ScanModelDir(root_, "m");
  EXPECT_FALSE(scan.config.has_value());
  EXPECT_THAT(scan.config_error.message(), HasSubstr("not a regular file"));
}

TEST(ParseVersionDirNameTest, TritonsRule) {
  EXPECT_EQ(ParseVersionDirName("1"), 1);
  EXPECT_EQ(ParseVersionDirName("42"), 42);
  EXPECT_EQ(ParseVersionDirName("0"), std::nullopt);
  EXPECT_EQ(ParseVersionDirName("007"), std::nullopt);
  EXPECT_EQ(ParseVersionDirName("3.tmp"), std::nullopt);
  EXPECT_EQ(ParseVersionDirName("-1"), std::nullopt);
  EXPECT_EQ(ParseVersionDirName("99999999999999999999"), std::nullopt);
}

}  // namespace
}  // namespace weft
