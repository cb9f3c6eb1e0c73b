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
#include "frontend/shm/testing/host_cuda_buffer.h"

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
  EXPECT_EQ(registry.Register("r", object.key(), 0, 16).code(), StatusCode::kAlreadyExists);
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

// CUDA regions, above the CUDA layer: the registry opens handles through Options::open_cuda_buffer, here host
// memory that stands in for another process's allocation (the real one is tested on a GPU in cuda_ipc_test).
class CudaRegionTest : public ::testing::Test {
 protected:
  static constexpr size_t kAllocation = 4096;

  CudaRegionTest() : registry_(Options()) {}

  SharedMemoryRegistry::Options Options() {
    SharedMemoryRegistry::Options options;
    options.max_regions = 4;
    options.open_cuda_buffer = [this](int device_id,
                                      std::span<const std::byte> handle) -> Result<std::shared_ptr<CudaSharedBuffer>> {
      ++opened_;
      if (device_id != 0) return InvalidArgument("no CUDA device " + std::to_string(device_id));
      if (!std::equal(handle.begin(), handle.end(), Handle().begin())) return InvalidArgument("CUDA refused it");
      buffer_ = std::make_shared<testing::HostCudaBuffer>(device_id, Handle(), kAllocation);
      return std::shared_ptr<CudaSharedBuffer>(buffer_);
    };
    return options;
  }

  static std::span<const std::byte, kCudaIpcHandleBytes> Handle() {
    static const std::array<std::byte, kCudaIpcHandleBytes> handle = [] {
      std::array<std::byte, kCudaIpcHandleBytes> h{};
      for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::byte>(i * 7 + 1);
      return h;
    }();
    return handle;
  }

  int opened_ = 0;
  std::shared_ptr<testing::HostCudaBuffer> buffer_;
  SharedMemoryRegistry registry_;
};

TEST_F(CudaRegionTest, RegistersListsAndUnregistersApartFromSystemRegions) {
  ASSERT_TRUE(registry_.RegisterCuda("gpu", Handle(), 0, 1024).ok());
  auto regions = registry_.CudaRegions("");
  ASSERT_TRUE(regions.ok());
  ASSERT_EQ(regions->size(), 1u);
  EXPECT_EQ((*regions)[0].name, "gpu");
  EXPECT_EQ((*regions)[0].device_id, 0);
  EXPECT_EQ((*regions)[0].byte_size, 1024u);
  EXPECT_EQ(registry_.CudaRegions("other").status().code(), StatusCode::kNotFound);

  // One namespace for both kinds, as in Triton; each kind's status and unregister see only its own regions.
  ShmObject object(64);
  EXPECT_EQ(registry_.Register("gpu", object.key(), 0, 64).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(registry_.Register("host", object.key(), 0, 64).ok());
  EXPECT_EQ(registry_.RegisterCuda("host", Handle(), 0, 64).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(registry_.Regions("")->size(), 1u);
  EXPECT_EQ(registry_.CudaRegions("")->size(), 1u);
  EXPECT_EQ(registry_.Regions("gpu").status().code(), StatusCode::kNotFound);
  registry_.Unregister("gpu");
  registry_.UnregisterAll();
  EXPECT_EQ(registry_.CudaRegions("")->size(), 1u);
  EXPECT_TRUE(registry_.Regions("")->empty());
  registry_.UnregisterCuda("gpu");
  EXPECT_TRUE(registry_.CudaRegions("")->empty());
  registry_.UnregisterCuda("gpu");  // idempotent
  ASSERT_TRUE(registry_.RegisterCuda("a", Handle(), 0, 16).ok());
  ASSERT_TRUE(registry_.RegisterCuda("b", Handle(), 0, 16).ok());
  registry_.UnregisterAllCuda();
  EXPECT_TRUE(registry_.CudaRegions("")->empty());
}

TEST_F(CudaRegionTest, RefusesBadRegistrationsBeforeOrWhenOpening) {
  std::vector<std::byte> short_handle(Handle().begin(), Handle().begin() + 16);
  Status wrong_size = registry_.RegisterCuda("r", short_handle, 0, 16);
  EXPECT_EQ(wrong_size.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_size.message().find("64 bytes"), std::string::npos) << wrong_size.message();
  EXPECT_EQ(registry_.RegisterCuda("r", Handle(), -1, 16).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.RegisterCuda("r", Handle(), int64_t{1} << 40, 16).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.RegisterCuda("r", Handle(), 0, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.RegisterCuda("", Handle(), 0, 16).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(opened_, 0) << "checked before anything is opened";

  std::array<std::byte, kCudaIpcHandleBytes> stale{};
  Status refused = registry_.RegisterCuda("r", stale, 0, 16);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("'r'"), std::string::npos) << refused.message();
  EXPECT_EQ(registry_.RegisterCuda("r", Handle(), 3, 16).code(), StatusCode::kInvalidArgument);
  // Larger than the allocation the handle names (and past it by overflow): refused, and nothing stays open.
  Status too_large = registry_.RegisterCuda("r", Handle(), 0, kAllocation + 1);
  EXPECT_EQ(too_large.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_large.message().find("exceeds"), std::string::npos) << too_large.message();
  EXPECT_EQ(registry_.RegisterCuda("r", Handle(), 0, UINT64_MAX).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(buffer_.use_count(), 1) << "a refused region's memory is closed";
  EXPECT_TRUE(registry_.CudaRegions("")->empty());

  for (const char* name : {"a", "b", "c", "d"}) ASSERT_TRUE(registry_.RegisterCuda(name, Handle(), 0, 16).ok());
  EXPECT_EQ(registry_.RegisterCuda("e", Handle(), 0, 16).code(), StatusCode::kResourceExhausted);
}

TEST_F(CudaRegionTest, InputsAreCopiedFromTheGpuAndOutputsCopiedBack) {
  ASSERT_TRUE(registry_.RegisterCuda("r", Handle(), 0, 1024).ok());
  std::vector<float> values = {1.5f, -2.0f, 3.25f};
  ASSERT_TRUE(buffer_->Write(100, std::as_bytes(std::span(values))).ok());

  auto input = SharedMemoryInput(registry_, {"r", 100, 12}, "x", DataType::kFp32, {3});
  ASSERT_TRUE(input.ok()) << input.status().message();
  EXPECT_EQ(input->place().kind, MemoryKind::kCpu);
  ASSERT_EQ(input->as<float>().size(), 3u);
  EXPECT_EQ(input->as<float>()[2], 3.25f);
  // A host copy: the client rewriting its GPU memory afterwards changes nothing in the request.
  std::vector<float> other = {9, 9, 9};
  ASSERT_TRUE(buffer_->Write(100, std::as_bytes(std::span(other))).ok());
  EXPECT_EQ(input->as<float>()[0], 1.5f);

  Status wrong_shape = SharedMemoryInput(registry_, {"r", 100, 12}, "x", DataType::kFp32, {4}).status();
  EXPECT_EQ(wrong_shape.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SharedMemoryInput(registry_, {"r", 1020, 12}, "x", DataType::kFp32, {3}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.Slice({"r", UINT64_MAX, 2}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.Slice({"nope", 0, 2}).status().code(), StatusCode::kNotFound);

  // BYTES: copied, then its length prefixes checked.
  std::vector<std::string> strings = {"ab", "cde"};
  std::vector<std::byte> serialized = JoinBytesElements(strings);
  ASSERT_TRUE(buffer_->Write(0, serialized).ok());
  auto text = SharedMemoryInput(registry_, {"r", 0, serialized.size()}, "s", DataType::kBytes, {2});
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(SplitBytesElements(text->bytes())[1], "cde");
  EXPECT_FALSE(SharedMemoryInput(registry_, {"r", 0, serialized.size() - 1}, "s", DataType::kBytes, {2}).ok());

  Tensor out = Tensor::FromBytes(
      "y", DataType::kFp32, {3},
      std::vector<std::byte>(std::as_bytes(std::span(values)).begin(), std::as_bytes(std::span(values)).end()));
  auto slice = registry_.Slice({"r", 512, 12});
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(slice->data, nullptr);
  ASSERT_TRUE(WriteSharedMemoryOutput(out, *slice).ok());
  std::vector<std::byte> contents = buffer_->Contents();
  float back[3];
  std::memcpy(back, contents.data() + 512, sizeof(back));
  EXPECT_EQ(back[1], -2.0f);
  EXPECT_TRUE(CheckSharedMemoryIntact(std::span(&*slice, 1), {}).ok());
  EXPECT_EQ(WriteSharedMemoryOutput(out, *registry_.Slice({"r", 512, 8})).code(), StatusCode::kInvalidArgument);

  // A slice keeps the region's memory open after the region is unregistered.
  registry_.UnregisterCuda("r");
  ASSERT_TRUE(WriteSharedMemoryOutput(out, *slice).ok());
}

TEST(CudaRegionWithoutStandInTest, SaysWhyWhereThereIsNoGpu) {
  SharedMemoryRegistry registry;
  std::array<std::byte, kCudaIpcHandleBytes> handle{};
  Status s = registry.RegisterCuda("r", handle, 0, 16);
  if (SharedMemoryRegistry::CudaAvailable()) {
    // A handle of zeros names nothing this process may open.
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  } else {
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.message();
    EXPECT_NE(s.message().find("needs a GPU"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(registry.CudaRegions("")->empty());
}

}  // namespace
}  // namespace weft
