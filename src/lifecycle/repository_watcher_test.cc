#include "lifecycle/repository_watcher.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/inotify.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <vector>

namespace weft {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Changes = RepositoryWatcher::Changes;

constexpr auto kTimeout = std::chrono::seconds(5);
constexpr char kMarkerPrefix[] = "zz_marker_";

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// The models of `changes` without the markers Flush() leaves.
std::set<std::string> Models(const Changes& changes) {
  std::set<std::string> models;
  for (const auto& m : changes.models) {
    if (!m.starts_with(kMarkerPrefix)) models.insert(m);
  }
  return models;
}

// One synthetic inotify event appended to `buffer`, its name padded with NULs to `name_len` bytes (at least the
// name's own length).
void AppendEvent(std::vector<std::byte>* buffer, int wd, uint32_t mask, const std::string& name, size_t name_len = 0) {
  name_len = std::max(name_len, name.size());
  inotify_event header{};
  header.wd = wd;
  header.mask = mask;
  header.len = static_cast<uint32_t>(name_len);
  const size_t at = buffer->size();
  buffer->resize(at + sizeof(header) + name_len);
  std::memcpy(buffer->data() + at, &header, sizeof(header));
  std::memcpy(buffer->data() + at + sizeof(header), name.data(), name.size());
}

// A repository in a temp dir: <base>/repo/m/config.pbtxt, <base>/repo/m/1/model.pt.
class RepositoryWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "weft_watcher_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    base_ = pattern;
    root_ = base_ / "repo";
    fs::create_directories(root_ / "m" / "1");
    WriteFile(root_ / "m" / "config.pbtxt", "name: \"m\"");
    WriteFile(root_ / "m" / "1" / "model.pt", "v1");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(base_, ec);
  }

  std::unique_ptr<RepositoryWatcher> Start(RepositoryWatcher::Options options = {}) {
    options.root = root_;
    auto watcher = RepositoryWatcher::Create(options);
    EXPECT_TRUE(watcher.ok()) << watcher.status().ToString();
    return watcher.ok() ? std::move(watcher).value() : nullptr;
  }

  // Reads until `done` holds for everything read so far; fails the test after kTimeout.
  static Changes ReadUntil(RepositoryWatcher& watcher, const std::function<bool(const Changes&)>& done) {
    Changes all;
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (true) {
      Changes changes = watcher.Read();
      all.models.insert(changes.models.begin(), changes.models.end());
      all.everything = all.everything || changes.everything;
      if (done(all)) return all;
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) {
        ADD_FAILURE() << "no such change within " << kTimeout.count() << " s";
        return all;
      }
      pollfd p{.fd = watcher.fd(), .events = POLLIN, .revents = 0};
      ::poll(&p, 1, static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count()));
    }
  }

  // Everything that happened before this call: creates a marker entry at the root and reads until it is reported.
  // inotify queues one instance's events in order, so every earlier event has been read by then.
  Changes Flush(RepositoryWatcher& watcher) {
    const std::string marker = kMarkerPrefix + std::to_string(markers_++);
    WriteFile(root_ / marker, "");
    return ReadUntil(watcher, [&](const Changes& c) { return c.models.contains(marker); });
  }

  fs::path base_;
  fs::path root_;
  int markers_ = 0;
};

TEST_F(RepositoryWatcherTest, FileWrittenInVersionDirReportsModel) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  EXPECT_EQ(watcher->watch_count(), 3u);  // repo, m, m/1
  WriteFile(root_ / "m" / "1" / "model.pt", "v2");
  Changes changes = Flush(*watcher);
  EXPECT_THAT(Models(changes), ElementsAre("m"));
  EXPECT_FALSE(changes.everything);
}

TEST_F(RepositoryWatcherTest, ConfigReplacedByRenameReportsModel) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  WriteFile(root_ / "m" / "config.pbtxt.tmp", "name: \"m\" max_batch_size: 8");
  Flush(*watcher);
  fs::rename(root_ / "m" / "config.pbtxt.tmp", root_ / "m" / "config.pbtxt");
  Changes changes = Flush(*watcher);
  EXPECT_THAT(Models(changes), ElementsAre("m"));
  EXPECT_FALSE(changes.everything);
}

TEST_F(RepositoryWatcherTest, NewModelAndVersionDirsAreWatched) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  // Created faster than the watcher reads: n/1 and its file exist before n's creation is read.
  fs::create_directories(root_ / "n" / "1");
  WriteFile(root_ / "n" / "1" / "early.pt", "x");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("n"));
  EXPECT_NE(watcher->WatchDescriptorOf("n"), -1);
  EXPECT_NE(watcher->WatchDescriptorOf("n/1"), -1);

  WriteFile(root_ / "n" / "1" / "model.pt", "v1");
  Changes later = Flush(*watcher);
  EXPECT_THAT(Models(later), ElementsAre("n"));
  EXPECT_FALSE(later.everything);
}

TEST_F(RepositoryWatcherTest, VersionDirRenamedIntoPlaceKeepsItsWatches) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  fs::create_directories(root_ / "m" / "3.tmp" / "sub");
  WriteFile(root_ / "m" / "3.tmp" / "sub" / "weights", "w");
  Flush(*watcher);
  EXPECT_EQ(watcher->watch_count(), 5u);

  fs::rename(root_ / "m" / "3.tmp", root_ / "m" / "3");
  Changes changes = Flush(*watcher);
  EXPECT_THAT(Models(changes), ElementsAre("m"));
  EXPECT_FALSE(changes.everything);
  EXPECT_EQ(watcher->WatchDescriptorOf("m/3.tmp"), -1);
  EXPECT_EQ(watcher->WatchDescriptorOf("m/3.tmp/sub"), -1);
  EXPECT_NE(watcher->WatchDescriptorOf("m/3"), -1);
  EXPECT_NE(watcher->WatchDescriptorOf("m/3/sub"), -1);
  EXPECT_EQ(watcher->watch_count(), 5u);

  WriteFile(root_ / "m" / "3" / "model.pt", "v3");
  WriteFile(root_ / "m" / "3" / "sub" / "more", "w");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("m"));

  // Moved to another model: attributed by its new path from then on.
  fs::create_directory(root_ / "b");
  Flush(*watcher);
  fs::rename(root_ / "m" / "3", root_ / "b" / "7");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("b", "m"));
  WriteFile(root_ / "b" / "7" / "sub" / "more", "w2");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("b"));
  EXPECT_EQ(watcher->WatchDescriptorOf("m/3/sub"), -1);
  EXPECT_NE(watcher->WatchDescriptorOf("b/7/sub"), -1);
}

TEST_F(RepositoryWatcherTest, RenameOverAnEmptyVersionDir) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  fs::create_directory(root_ / "m" / "4");
  fs::create_directories(root_ / "m" / "4.tmp" / "sub");
  Flush(*watcher);
  // Replaces the empty m/4, whose old watch then reports its deletion: that must not drop the new m/4's watch.
  fs::rename(root_ / "m" / "4.tmp", root_ / "m" / "4");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("m"));
  EXPECT_NE(watcher->WatchDescriptorOf("m/4"), -1);
  EXPECT_NE(watcher->WatchDescriptorOf("m/4/sub"), -1);
  WriteFile(root_ / "m" / "4" / "sub" / "x", "x");
  Changes changes = Flush(*watcher);
  EXPECT_THAT(Models(changes), ElementsAre("m"));
  EXPECT_FALSE(changes.everything);
  EXPECT_EQ(watcher->watch_count(), 5u);  // repo, m, m/1, m/4, m/4/sub
}

TEST_F(RepositoryWatcherTest, SyncBeforeTheMoveIsReadRebindsThePath) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  fs::create_directories(root_ / "m" / "5.tmp" / "sub");
  Flush(*watcher);
  fs::rename(root_ / "m" / "5.tmp", root_ / "m" / "5");
  ASSERT_TRUE(watcher->Sync().ok());  // finds the directory at its new path before the events say so
  EXPECT_EQ(watcher->WatchDescriptorOf("m/5.tmp"), -1);
  EXPECT_NE(watcher->WatchDescriptorOf("m/5/sub"), -1);
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("m"));
  EXPECT_NE(watcher->WatchDescriptorOf("m/5"), -1);
  EXPECT_NE(watcher->WatchDescriptorOf("m/5/sub"), -1);
  WriteFile(root_ / "m" / "5" / "sub" / "x", "x");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("m"));
  EXPECT_EQ(watcher->watch_count(), 5u);
}

TEST_F(RepositoryWatcherTest, DeletingModelDirReportsIt) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  fs::remove_all(root_ / "m");
  Changes changes = Flush(*watcher);
  EXPECT_THAT(Models(changes), ElementsAre("m"));
  EXPECT_FALSE(changes.everything);
  EXPECT_EQ(watcher->WatchDescriptorOf("m"), -1);
  EXPECT_EQ(watcher->WatchDescriptorOf("m/1"), -1);
  EXPECT_EQ(watcher->watch_count(), 1u);
}

TEST_F(RepositoryWatcherTest, ModelRenamedReportsBothNames) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  fs::rename(root_ / "m", root_ / "m2");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("m", "m2"));
  WriteFile(root_ / "m2" / "1" / "model.pt", "v2");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("m2"));
}

TEST_F(RepositoryWatcherTest, HiddenFirstLevelEntriesAreNotModels) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  fs::create_directories(root_ / ".tmp_3" / "sub");
  WriteFile(root_ / ".tmp_3" / "model.pt", "staged");
  fs::create_directory(root_ / ".editor");
  WriteFile(root_ / ".swp", "x");
  Changes changes = Flush(*watcher);
  EXPECT_THAT(Models(changes), IsEmpty());
  EXPECT_FALSE(changes.everything);
  EXPECT_EQ(watcher->WatchDescriptorOf(".tmp_3"), -1);

  fs::rename(root_ / ".tmp_3", root_ / "m" / "3");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("m"));
  EXPECT_NE(watcher->WatchDescriptorOf("m/3/sub"), -1);
  WriteFile(root_ / "m" / "3" / "sub" / "x", "x");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("m"));

  // A model moved out of sight is reported under its old name only.
  fs::rename(root_ / "m", root_ / ".m.old");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("m"));
  EXPECT_EQ(watcher->watch_count(), 1u);
}

TEST_F(RepositoryWatcherTest, DirectoriesPastMaxDepthAreNotWatched) {
  auto watcher = Start({.max_depth = 2});
  ASSERT_NE(watcher, nullptr);
  fs::create_directories(root_ / "m" / "1" / "deep" / "deeper");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("m"));
  EXPECT_EQ(watcher->WatchDescriptorOf("m/1/deep"), -1);
  EXPECT_EQ(watcher->watch_count(), 3u);
  WriteFile(root_ / "m" / "1" / "deep" / "f", "unseen");
  EXPECT_THAT(Models(Flush(*watcher)), IsEmpty());
}

TEST_F(RepositoryWatcherTest, LinksAreNotFollowed) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  fs::create_directory_symlink(root_ / "m", root_ / "link");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("link"));
  EXPECT_EQ(watcher->WatchDescriptorOf("link"), -1);
  EXPECT_EQ(watcher->watch_count(), 3u);
}

TEST_F(RepositoryWatcherTest, RootReplacedIsWatchedAgain) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  // The atomic swap of a whole repository.
  fs::create_directories(base_ / "next" / "n" / "1");
  fs::rename(root_, base_ / "old");
  fs::rename(base_ / "next", root_);
  Changes changes = ReadUntil(*watcher, [](const Changes& c) { return c.everything; });
  EXPECT_TRUE(changes.everything);
  EXPECT_EQ(watcher->watch_count(), 3u);  // repo, n, n/1 of the new tree
  EXPECT_NE(watcher->WatchDescriptorOf("n/1"), -1);
  WriteFile(root_ / "n" / "1" / "model.pt", "v1");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("n"));
  WriteFile(base_ / "old" / "m" / "1" / "model.pt", "not ours");
  EXPECT_THAT(Models(Flush(*watcher)), IsEmpty());
}

TEST_F(RepositoryWatcherTest, RootDeletedSetsEverythingAndSyncFails) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  fs::remove_all(root_);
  Changes changes = ReadUntil(*watcher, [](const Changes& c) { return c.everything; });
  EXPECT_TRUE(changes.models.contains("m"));
  EXPECT_EQ(watcher->watch_count(), 0u);
  Status status = watcher->Sync();
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("repository root not found"));
}

TEST_F(RepositoryWatcherTest, MaxWatchesReached) {
  RepositoryWatcher::Options too_few{.max_watches = 2};
  too_few.root = root_;
  auto refused = RepositoryWatcher::Create(too_few);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("limit of 2"));

  auto watcher = Start({.max_watches = 3});
  ASSERT_NE(watcher, nullptr);
  fs::create_directory(root_ / "n");
  // A new directory that cannot be watched: changes in it would go unseen, so rescan everything.
  Changes changes = ReadUntil(*watcher, [](const Changes& c) { return c.everything; });
  EXPECT_TRUE(changes.models.contains("n"));
  EXPECT_EQ(watcher->WatchDescriptorOf("n"), -1);
  Status status = watcher->Sync();
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("limit of 3"));
  EXPECT_EQ(watcher->watch_count(), 3u);
}

TEST_F(RepositoryWatcherTest, CreateFailsClearly) {
  auto missing = RepositoryWatcher::Create({.root = base_ / "missing"});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr((base_ / "missing").string() + ": repository root not found"));

  WriteFile(base_ / "file", "");
  auto file = RepositoryWatcher::Create({.root = base_ / "file"});
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr("not a directory"));

  EXPECT_EQ(RepositoryWatcher::Create({.root = root_, .max_depth = -1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RepositoryWatcher::Create({.root = root_, .max_depth = 65}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RepositoryWatcher::Create({.root = root_, .max_watches = 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RepositoryWatcher::Create({}).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RepositoryWatcherTest, DescriptorIsNonBlockingAndCloseOnExec) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  EXPECT_TRUE(::fcntl(watcher->fd(), F_GETFL) & O_NONBLOCK);
  EXPECT_TRUE(::fcntl(watcher->fd(), F_GETFD) & FD_CLOEXEC);
  Changes nothing = watcher->Read();  // returns at once
  EXPECT_THAT(nothing.models, IsEmpty());
  EXPECT_FALSE(nothing.everything);
}

// Decoding, fed synthetic events.

TEST_F(RepositoryWatcherTest, OverflowSetsEverything) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  std::vector<std::byte> events;
  AppendEvent(&events, -1, IN_Q_OVERFLOW, "");
  Changes changes = watcher->Apply(events);
  EXPECT_TRUE(changes.everything);
  EXPECT_THAT(changes.models, IsEmpty());
  EXPECT_EQ(watcher->watch_count(), 3u);
}

TEST_F(RepositoryWatcherTest, DecodesEventsAtAnyAlignment) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  const int root = watcher->WatchDescriptorOf("");
  const int version = watcher->WatchDescriptorOf("m/1");
  ASSERT_NE(root, -1);
  ASSERT_NE(version, -1);
  std::vector<std::byte> events(1);  // one byte first: the events start unaligned
  AppendEvent(&events, root, IN_CLOSE_WRITE, "readme", 16);
  AppendEvent(&events, version, IN_MODIFY, "model.pt", 32);
  AppendEvent(&events, root, IN_CREATE | IN_ISDIR, ".staging", 16);  // hidden: not a model
  AppendEvent(&events, 999999, IN_MODIFY, "x", 16);                  // a watch dropped before: ignored
  AppendEvent(&events, root, IN_CREATE | IN_ISDIR, "gone", 16);      // vanished before it could be watched
  AppendEvent(&events, root, IN_MOVED_TO, "abcd", 4);                // a name that fills `len`, without a NUL
  Changes changes = watcher->Apply(std::span<const std::byte>(events).subspan(1));
  EXPECT_THAT(changes.models, ElementsAre("abcd", "gone", "m", "readme"));
  EXPECT_FALSE(changes.everything);
  EXPECT_EQ(watcher->watch_count(), 3u);
}

TEST_F(RepositoryWatcherTest, CutBuffersSetEverythingAndKeepWhatCameBefore) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  const int root = watcher->WatchDescriptorOf("");
  std::vector<std::byte> events;
  AppendEvent(&events, root, IN_CLOSE_WRITE, "first", 16);
  std::vector<std::byte> cut_name = events;
  AppendEvent(&cut_name, root, IN_CLOSE_WRITE, "second", 16);
  cut_name.resize(cut_name.size() - 8);  // `len` claims bytes past the end
  Changes changes = watcher->Apply(cut_name);
  EXPECT_TRUE(changes.everything);
  EXPECT_THAT(changes.models, ElementsAre("first"));

  std::vector<std::byte> cut_header = events;
  cut_header.resize(cut_header.size() + 5);  // a header's first bytes only
  changes = watcher->Apply(cut_header);
  EXPECT_TRUE(changes.everything);
  EXPECT_THAT(changes.models, ElementsAre("first"));

  std::vector<std::byte> slash;
  AppendEvent(&slash, root, IN_CREATE | IN_ISDIR, "../escape", 16);
  EXPECT_TRUE(watcher->Apply(slash).everything);
  EXPECT_EQ(watcher->WatchDescriptorOf("../escape"), -1);
}

TEST_F(RepositoryWatcherTest, RootEventsOnItselfSetEverythingAndTheRootIsWatchedAgain) {
  auto watcher = Start();
  ASSERT_NE(watcher, nullptr);
  const int root = watcher->WatchDescriptorOf("");
  std::vector<std::byte> events;
  AppendEvent(&events, root, IN_MOVE_SELF, "");
  Changes changes = watcher->Apply(events);
  EXPECT_TRUE(changes.everything);
  // The root is still where it was, so it is watched afresh.
  EXPECT_EQ(watcher->watch_count(), 3u);
  EXPECT_NE(watcher->WatchDescriptorOf(""), -1);
  EXPECT_NE(watcher->WatchDescriptorOf(""), root);
  WriteFile(root_ / "m" / "1" / "model.pt", "v2");
  EXPECT_THAT(Models(Flush(*watcher)), ElementsAre("m"));

  std::vector<std::byte> attrib;
  AppendEvent(&attrib, watcher->WatchDescriptorOf(""), IN_ATTRIB | IN_ISDIR, "");
  EXPECT_TRUE(watcher->Apply(attrib).everything);
}

}  // namespace
}  // namespace weft
