#include "frontend/shm/shared_memory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>

#include "frontend/shm/guarded_mapping.h"

namespace weft {
namespace {

// A POSIX shared memory object for one test, unlinked at the end.
class ShmObject {
 public:
  explicit ShmObject(size_t size, const std::string& stem = "weft_shm_test_")
      : key_("/" + stem + std::to_string(getpid()) + "_" + std::to_string(next_++)) {
    int fd = shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    base_ = static_cast<std::byte*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    size_ = size;
    fd_ = fd;
  }
  ~ShmObject() {
    munmap(base_, size_);
    close(fd_);
    shm_unlink(key_.c_str());
  }
  const std::string& key() const { return key_; }
  std::byte* data() const { return base_; }
  void Truncate(size_t size) { EXPECT_EQ(ftruncate(fd_, static_cast<off_t>(size)), 0); }

 private:
  static inline int next_ = 0;
  std::string key_;
  std::byte* base_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

TEST(SharedMemoryKeyTest, KeysNameObjectsNeverPaths) {
  EXPECT_TRUE(CheckSharedMemoryKey("/input").ok());
  EXPECT_TRUE(CheckSharedMemoryKey("input_0.a").ok());
  for (const char* bad : {"", "/", "/dev/shm/x", "a/b", "..", "/..", "/a..b", "../etc/passwd", "//x"}) {
    Status s = CheckSharedMemoryKey(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(CheckSharedMemoryKey(std::string(300, 'k')).ok());
  EXPECT_FALSE(CheckSharedMemoryKey(std::string("a\0b", 3)).ok());
}

TEST(SharedMemoryWindowTest, ChecksBoundsWithoutOverflow) {
  EXPECT_TRUE(CheckWindow(0, 16, 16, "w").ok());
  EXPECT_TRUE(CheckWindow(16, 0, 16, "w").ok());
  EXPECT_FALSE(CheckWindow(1, 16, 16, "w").ok());
  EXPECT_FALSE(CheckWindow(17, 0, 16, "w").ok());
  EXPECT_FALSE(CheckWindow(8, UINT64_MAX - 4, 16, "w").ok());
  EXPECT_FALSE(CheckWindow(UINT64_MAX, 2, 16, "w").ok());
}

TEST(SharedMemoryRegistryTest, RegistersChecksAgainstTheObjectSizeAndReportsStatus) {
  ShmObject object(4096);
  SharedMemoryRegistry registry;
  EXPECT_EQ(registry.Register("r", object.key(), 4000, 200).code(), StatusCode::kInvalidArgument);  // past the end
  EXPECT_EQ(registry.Register("r", object.key(), 0, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register("r", "/weft_no_such_key_for_test", 0, 16).code(), StatusCode::kNotFound);
  EXPECT_EQ(registry.Register("r", "/dev/shm/x", 0, 16).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(registry.Register("r", object.key(), 64, 1024).ok());
  EXPECT_EQ(registry.Register("r", object.key(), 0, 16).code(), StatusCode::kInvalidArgument);  // taken
  ASSERT_TRUE(registry.Register("s", object.key(), 0, 4096).ok());

  auto all = registry.Regions("");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "r");
  EXPECT_EQ((*all)[0].key, object.key());
  EXPECT_EQ((*all)[0].offset, 64u);
  EXPECT_EQ((*all)[0].byte_size, 1024u);
  EXPECT_EQ(registry.Regions("nope").status().code(), StatusCode::kNotFound);

  registry.Unregister("r");
  registry.Unregister("r");  // idempotent
  EXPECT_EQ(registry.Regions("r").status().code(), StatusCode::kNotFound);
  registry.UnregisterAll();
  EXPECT_TRUE(registry.Regions("")->empty());
}

TEST(SharedMemoryRegistryTest, SlicesAreCheckedAgainstTheRegionAndTheObjectNow) {
  ShmObject object(4096);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 1024, 2048).ok());
  auto slice = registry.Slice({"r", 16, 32});
  ASSERT_TRUE(slice.ok()) << slice.status().ToString();
  EXPECT_EQ(slice->byte_size, 32u);
  slice->data[0] = std::byte{42};
  EXPECT_EQ(object.data()[1024 + 16], std::byte{42});  // the same pages the client sees

  EXPECT_EQ(registry.Slice({"r", 2048, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Slice({"r", 2000, 49}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Slice({"r", UINT64_MAX, 2}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Slice({"other", 0, 1}).status().code(), StatusCode::kNotFound);

  object.Truncate(2048);  // the client shrinks the object under the registration
  EXPECT_TRUE(registry.Slice({"r", 0, 1024}).ok());
  Result<SharedMemorySlice> past = registry.Slice({"r", 1000, 100});
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.status().message().find("2048"), std::string::npos) << past.status().message();
}

TEST(SharedMemoryRegistryTest, SlicesOutliveUnregistration) {
  ShmObject object(4096);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 4096).ok());
  auto slice = registry.Slice({"r", 0, 8});
  ASSERT_TRUE(slice.ok());
  registry.UnregisterAll();
  std::memset(slice->data, 7, 8);  // still mapped: the slice owns the mapping
  EXPECT_EQ(object.data()[7], std::byte{7});
}

TEST(SharedMemoryInputTest, ViewsAlignedFixedSizeTensorsAndCopiesTheRest) {
  ShmObject object(4096);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 4096).ok());
  float values[4] = {1, 2, 3, 4};
  std::memcpy(object.data() + 64, values, sizeof(values));
  std::memcpy(object.data() + 201, values, sizeof(values));

  auto aligned = SharedMemoryInput(registry, {"r", 64, 16}, "x", DataType::kFp32, {4});
  ASSERT_TRUE(aligned.ok()) << aligned.status().ToString();
  auto odd = SharedMemoryInput(registry, {"r", 201, 16}, "x", DataType::kFp32, {4});
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->as<float>()[3], 4.0f);
  // The server maps the object at its own address: a view shows what the client writes afterwards, a copy not.
  float later = 9;
  std::memcpy(object.data() + 64, &later, 4);
  std::memcpy(object.data() + 201, &later, 4);
  EXPECT_EQ(aligned->as<float>()[0], 9.0f);  // zero-copy
  EXPECT_EQ(odd->as<float>()[0], 1.0f);      // copied

  EXPECT_EQ(SharedMemoryInput(registry, {"r", 64, 12}, "x", DataType::kFp32, {4}).status().code(),
            StatusCode::kInvalidArgument);  // the window does not hold the shape
  EXPECT_EQ(SharedMemoryInput(registry, {"r", 4090, 16}, "x", DataType::kFp32, {4}).status().code(),
            StatusCode::kInvalidArgument);  // out of bounds

  const char bytes_element[] = "\x02\x00\x00\x00hi";
  std::memcpy(object.data() + 512, bytes_element, 6);
  auto text = SharedMemoryInput(registry, {"r", 512, 6}, "s", DataType::kBytes, {1});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  std::memcpy(object.data() + 516, "yo", 2);
  EXPECT_EQ(SplitBytesElements(text->bytes())[0], "hi");  // copied, then checked
  EXPECT_FALSE(SharedMemoryInput(registry, {"r", 512, 5}, "s", DataType::kBytes, {1}).ok());
}

// Hardening issue, item 1, through shared memory: [2^62 + 2] FP32 "needs" 8 bytes in wrapped arithmetic.
TEST(SharedMemoryInputTest, ShapesWhoseByteSizeOverflowsAreRejected) {
  ShmObject object(4096);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 4096).ok());
  auto input = SharedMemoryInput(registry, {"r", 0, 8}, "x", DataType::kFp32, {4611686018427387906});
  EXPECT_EQ(input.status().code(), StatusCode::kInvalidArgument);
}

// Hardening issue, item 2: a client that shrinks its object (ftruncate) while the server reads inputs in place and
// writes outputs took the server down with SIGBUS. Now the pages past the new end read as zeros, writes are lost,
// and every slice of the region reports it, so that the request is answered with an error.
TEST(SharedMemoryGuardTest, TruncationUnderASliceIsAnErrorNotACrash) {
  const size_t size = 1 << 20;
  ShmObject object(size);
  std::memset(object.data(), 1, size);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 0, size).ok());
  auto input = registry.Slice({"r", 0, size});
  auto output = registry.Slice({"r", 4096, 4096});
  ASSERT_TRUE(input.ok() && output.ok());
  ASSERT_TRUE(input->CheckIntact().ok());
  EXPECT_EQ(std::to_integer<int>(input->data[size - 1]), 1);

  object.Truncate(0);
  // Past the object's end now: without the guard each of these accesses is SIGBUS.
  int sum = 0;
  for (size_t i = 0; i < size; i += 4096) sum += std::to_integer<int>(input->data[i]);
  EXPECT_EQ(sum, 0);  // zero pages
  std::memset(output->data, 7, output->byte_size);

  Status in = input->CheckIntact();
  EXPECT_EQ(in.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(in.message().find("truncated"), std::string::npos) << in.message();
  EXPECT_FALSE(output->CheckIntact().ok());
  EXPECT_FALSE(CheckSharedMemoryIntact({}, {{"y", *output}}).ok());
  // The region stays unusable until registered again, even once the client restores the size.
  object.Truncate(size);
  EXPECT_EQ(registry.Slice({"r", 0, 16}).status().code(), StatusCode::kInvalidArgument);
  registry.Unregister("r");
  ASSERT_TRUE(registry.Register("r", object.key(), 0, size).ok());
  auto fresh = registry.Slice({"r", 0, 16});
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fresh->CheckIntact().ok());
}

TEST(SharedMemoryGuardTest, TruncationWhileOtherThreadsReadAndWrite) {
  const size_t size = 4 << 20;
  ShmObject object(size);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 0, size).ok());
  auto slice = registry.Slice({"r", 0, size});
  ASSERT_TRUE(slice.ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::byte> copy(size);
      while (!stop.load()) {
        if (t % 2) {
          std::memcpy(copy.data(), slice->data, size);
        } else {
          std::memset(slice->data, t, size);
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  object.Truncate(size / 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_FALSE(slice->CheckIntact().ok());
}

// Death by SIGBUS, or, where a sanitizer installed its handler before the guard, by that handler's report and
// abort: either way the fault went where it would have gone without the guard.
bool DiedOfTheBusError(int status) {
  if (!WIFSIGNALED(status)) return false;
  return WTERMSIG(status) == SIGBUS || WTERMSIG(status) == SIGABRT;
}

// The guard takes only faults in its own ranges: any other SIGBUS still ends the process as before.
TEST(SharedMemoryGuardDeathTest, OtherBusErrorsStillKill) {
  ShmObject object(4096);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 4096).ok());  // installs the handler
  EXPECT_EXIT(
      {
        object.Truncate(0);
        volatile std::byte* unguarded = object.data();  // the test's own mapping, not a registered one
        std::byte value = unguarded[0];
        (void)value;
      },
      DiedOfTheBusError, "");
}

TEST(SharedMemoryRegistryTest, RegionsAreLimited) {
  ShmObject object(4096);
  SharedMemoryRegistry registry({.max_regions = 3});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(registry.Register("r" + std::to_string(i), object.key(), 0, 64).ok());
  Status full = registry.Register("r3", object.key(), 0, 64);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("--max-shared-memory-regions"), std::string::npos) << full.message();
  registry.Unregister("r0");
  EXPECT_TRUE(registry.Register("r3", object.key(), 0, 64).ok());
}

TEST(SharedMemoryRegistryTest, NamesAreShortUtf8) {
  ShmObject object(4096);
  SharedMemoryRegistry registry;
  EXPECT_EQ(registry.Register("\xff\xfe", object.key(), 0, 64).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register(std::string(257, 'n'), object.key(), 0, 64).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry.Register(std::string(256, 'n'), object.key(), 0, 64).ok());
  EXPECT_TRUE(registry.Register("r\xc3\xa9gion", object.key(), 0, 64).ok());
}

size_t OpenDescriptors() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

// Security issue, shared memory: a client may register only objects whose keys the operator set aside for it.
TEST(SharedMemoryConfinementTest, KeysOutsideThePrefixAreRefusedBeforeOpening) {
  ShmObject camera(4096, "weft_cam_");
  ShmObject lookalike(4096, "weft_camera_");
  ShmObject other(4096, "weft_other_");
  SharedMemoryRegistry registry({.key_prefix = "weft_cam"});
  EXPECT_TRUE(registry.Register("a", camera.key(), 0, 64).ok());
  EXPECT_TRUE(registry.Register("b", camera.key().substr(1), 0, 64).ok());  // the key's '/' is optional
  // A plain string prefix, as documented: "weft_cam" admits "weft_camera_...".
  EXPECT_TRUE(registry.Register("c", lookalike.key(), 0, 64).ok());

  Status refused = registry.Register("d", other.key(), 0, 64);
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("'weft_cam'"), std::string::npos) << refused.message();
  // A key that does not exist gets the same answer as one that does: the refusal comes before shm_open.
  Status missing = registry.Register("e", "/weft_no_such_key_for_test", 0, 64);
  EXPECT_EQ(missing.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(missing.message().find("No such file"), std::string::npos) << missing.message();
  for (const char* escape : {"../weft_cam_x", "/weft_cam/../x", "weft_cam_/../../etc/passwd", "/../weft_cam_x"}) {
    EXPECT_FALSE(registry.Register("f", escape, 0, 64).ok()) << escape;
  }
  EXPECT_FALSE(registry.Regions("d").ok());

  SharedMemoryRegistry slash({.key_prefix = "/weft_cam_"});  // written with the key's '/': the same prefix
  EXPECT_TRUE(slash.Register("a", camera.key(), 0, 64).ok());
  EXPECT_EQ(slash.Register("c", lookalike.key(), 0, 64).code(), StatusCode::kPermissionDenied);
}

TEST(SharedMemoryConfinementTest, ObjectsOfOtherOwnersAreRefused) {
  ShmObject object(4096);
  const uint32_t me = getuid();
  SharedMemoryRegistry mine({.allowed_owner_uids = {me + 1, me}});
  EXPECT_TRUE(mine.Register("r", object.key(), 0, 64).ok());

  SharedMemoryRegistry others({.allowed_owner_uids = {me + 1}});
  Status refused = others.Register("r", object.key(), 0, 64);
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied);
  EXPECT_FALSE(others.Regions("r").ok());
  // The refusal came after opening the object: its descriptor was closed.
  const size_t before = OpenDescriptors();
  EXPECT_EQ(others.Register("r", object.key(), 0, 64).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(OpenDescriptors(), before);
}

// The directory behind shm_open on Linux, where a test can put what clients cannot create with shm_open.
std::string ShmDirectoryEntry(const std::string& name) { return "/dev/shm/" + name; }

TEST(SharedMemoryConfinementTest, OnlyRegularObjectsAndNeverThroughALink) {
  ShmObject target(4096);
  if (access(ShmDirectoryEntry(target.key().substr(1)).c_str(), F_OK) != 0) GTEST_SKIP() << "no /dev/shm";
  const std::string stem = "weft_shm_test_" + std::to_string(getpid());
  const std::string link = stem + "_link";
  const std::string fifo = stem + "_fifo";
  ASSERT_EQ(symlink(ShmDirectoryEntry(target.key().substr(1)).c_str(), ShmDirectoryEntry(link).c_str()), 0)
      << std::strerror(errno);
  ASSERT_EQ(mkfifo(ShmDirectoryEntry(fifo).c_str(), 0600), 0) << std::strerror(errno);

  for (const SharedMemoryRegistry::Options& options :
       {SharedMemoryRegistry::Options{}, SharedMemoryRegistry::Options{.allowed_owner_uids = {getuid()}}}) {
    SharedMemoryRegistry registry(options);
    EXPECT_TRUE(registry.Register("object", target.key(), 0, 64).ok());
    Status through_link = registry.Register("link", "/" + link, 0, 64);  // a link to a good object is still refused
    EXPECT_FALSE(through_link.ok());
    EXPECT_NE(through_link.message().find("symbolic links"), std::string::npos) << through_link.message();
    Status pipe = registry.Register("fifo", "/" + fifo, 0, 64);
    EXPECT_EQ(pipe.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(pipe.message().find("not a memory object"), std::string::npos) << pipe.message();
    EXPECT_EQ(registry.Regions("")->size(), 1u);
  }
  unlink(ShmDirectoryEntry(link).c_str());
  unlink(ShmDirectoryEntry(fifo).c_str());
}

TEST(SharedMemoryOutputTest, WritesIntoTheSliceAndRejectsWhatDoesNotFit) {
  ShmObject object(4096);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 4096).ok());
  std::vector<float> values = {5, 6};
  std::vector<std::byte> raw(8);
  std::memcpy(raw.data(), values.data(), 8);
  Tensor out = Tensor::FromBytes("y", DataType::kFp32, {2}, raw);
  auto slice = registry.Slice({"r", 100, 8});
  ASSERT_TRUE(slice.ok());
  ASSERT_TRUE(WriteSharedMemoryOutput(out, *slice).ok());
  float back[2];
  std::memcpy(back, object.data() + 100, 8);
  EXPECT_EQ(back[1], 6.0f);
  auto small = registry.Slice({"r", 100, 4});
  EXPECT_EQ(WriteSharedMemoryOutput(out, *small).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace weft
