#include "frontend/shm/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>  // shm_open
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

#include "base/json_string.h"
#include "device/cuda/cuda_device.h"
#include "frontend/shm/guarded_mapping.h"

namespace weft {

namespace {

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

std::string ErrnoText(int error) { return std::strerror(error); }

// The object behind `fd` now, checked to be a memory object (a regular file of the shm file system), or an error.
Result<struct stat> StatObject(int fd, const std::string& key) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Internal("fstat of shared memory key " + Quoted(key) + ": " + ErrnoText(errno));
  if (!S_ISREG(st.st_mode)) return InvalidArgument("shared memory key " + Quoted(key) + " is not a memory object");
  return st;
}

// The size of the object behind `fd` now, or an error.
Result<uint64_t> ObjectSize(int fd, const std::string& key) {
  WEFT_ASSIGN_OR_RETURN(struct stat st, StatObject(fd, key));
  return static_cast<uint64_t>(st.st_size);
}

// The key's name without its leading '/' starts with `prefix` (a plain string comparison; an empty prefix admits
// every key).
Status CheckKeyPrefix(const std::string& key, const std::string& prefix) {
  std::string_view rest = key;
  if (rest.starts_with('/')) rest.remove_prefix(1);
  if (rest.starts_with(prefix)) return Status::Ok();
  return PermissionDenied("shared memory key " + Quoted(key) + " is refused: this server registers only keys that " +
                          "start with " + Quoted(prefix));
}

}  // namespace

// One registration. A system region: the object stays open (its size is checked again at every use) and mapped
// from its start to the end of the window (mmap offsets must be page-aligned, the window's need not be). A CUDA
// region: the opened handle, with no descriptor and no mapping.
struct SharedMemoryRegistry::Region {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
  int fd = -1;
  std::shared_ptr<GuardedMapping> mapping;
  std::shared_ptr<CudaSharedBuffer> cuda;

  bool is_cuda() const { return cuda != nullptr; }

  ~Region() {
    mapping.reset();
    if (fd >= 0) close(fd);
  }
};

Status SharedMemorySlice::CheckIntact() const {
  if (!mapping || !mapping->faulted()) return Status::Ok();
  return InvalidArgument("shared memory region " + Quoted(region) +
                         " was truncated by its owner while this request used it; its data was lost. Register it "
                         "again after restoring its size");
}

Status CheckSharedMemoryIntact(std::span<const SharedMemorySlice> inputs, const SharedMemoryOutputs& outputs) {
  for (const SharedMemorySlice& slice : inputs) WEFT_RETURN_IF_ERROR(slice.CheckIntact());
  for (const auto& [name, slice] : outputs) WEFT_RETURN_IF_ERROR(slice.CheckIntact());
  return Status::Ok();
}

Status CheckSharedMemoryKey(const std::string& key) {
  std::string_view rest = key;
  if (rest.starts_with('/')) rest.remove_prefix(1);
  if (rest.empty()) return InvalidArgument("shared memory key " + Quoted(key) + " is empty");
  if (key.size() > 255) return InvalidArgument("shared memory key is longer than 255 characters");
  if (rest.find('/') != std::string_view::npos) {
    return InvalidArgument("shared memory key " + Quoted(key) +
                           " names a path: a key may have one leading '/' and no other");
  }
  if (rest.find("..") != std::string_view::npos || rest == ".") {
    return InvalidArgument("shared memory key " + Quoted(key) + " may not contain '..'");
  }
  if (rest.find('\0') != std::string_view::npos) return InvalidArgument("shared memory key contains NUL");
  return Status::Ok();
}

Status CheckWindow(uint64_t offset, uint64_t byte_size, uint64_t size, const std::string& what) {
  if (offset > size || byte_size > size - offset) {
    return InvalidArgument(what + ": offset " + std::to_string(offset) + " + byte_size " + std::to_string(byte_size) +
                           " exceeds the " + std::to_string(size) + " bytes available");
  }
  return Status::Ok();
}

namespace {

// A prefix written with the key's leading '/' means the same as one without.
SharedMemoryRegistry::Options WithPlainPrefix(SharedMemoryRegistry::Options options) {
  if (options.key_prefix.starts_with('/')) options.key_prefix.erase(0, 1);
  return options;
}

}  // namespace

SharedMemoryRegistry::SharedMemoryRegistry(Options options) : options_(WithPlainPrefix(std::move(options))) {}
SharedMemoryRegistry::~SharedMemoryRegistry() = default;

Status SharedMemoryRegistry::CheckNewRegion(const std::string& name) const {
  if (name.empty()) return InvalidArgument("a shared memory region needs a name");
  // Names are echoed in status answers (JSON) and errors: kept short and in UTF-8.
  if (name.size() > kMaxRegionNameBytes) {
    return InvalidArgument("a shared memory region name may have at most " + std::to_string(kMaxRegionNameBytes) +
                           " bytes; this one has " + std::to_string(name.size()));
  }
  if (!IsValidUtf8(name)) return InvalidArgument("a shared memory region name must be UTF-8");
  std::lock_guard lock(mu_);
  return RoomFor(name);
}

Status SharedMemoryRegistry::RoomFor(const std::string& name) const {
  if (regions_.count(name)) return AlreadyExists("shared memory region " + Quoted(name) + " is already registered");
  if (regions_.size() >= options_.max_regions) {
    return ResourceExhausted("cannot register shared memory region " + Quoted(name) + ": " +
                             std::to_string(options_.max_regions) +
                             " regions are registered, the server's limit (weft serve --max-shared-memory-regions)");
  }
  return Status::Ok();
}

Status SharedMemoryRegistry::Insert(std::shared_ptr<Region> region) {
  // Checked again: another registration may have won the race while this one opened its memory. A refused
  // region is closed with the parameter, after the lock is released.
  std::lock_guard lock(mu_);
  WEFT_RETURN_IF_ERROR(RoomFor(region->name));
  regions_.emplace(region->name, std::move(region));
  return Status::Ok();
}

Status SharedMemoryRegistry::Register(const std::string& name, const std::string& key, uint64_t offset,
                                      uint64_t byte_size) {
  WEFT_RETURN_IF_ERROR(CheckSharedMemoryKey(key));
  WEFT_RETURN_IF_ERROR(CheckKeyPrefix(key, options_.key_prefix));
  if (byte_size == 0) return InvalidArgument("shared memory region " + Quoted(name) + ": byte_size must be > 0");
  WEFT_RETURN_IF_ERROR(CheckNewRegion(name));

  auto region = std::make_shared<Region>();
  region->name = name;
  region->key = key;
  region->offset = offset;
  region->byte_size = byte_size;
  // glibc's shm_open adds O_NOFOLLOW itself; said here as well, because a link in the shm directory must never
  // lead the server to a file or to an object the key does not name.
  region->fd = shm_open(key.c_str(), O_RDWR | O_NOFOLLOW, 0);
  if (region->fd < 0) {
    int error = errno;
    std::string what = "cannot open shared memory key " + Quoted(key) + " for region " + Quoted(name) + ": ";
    if (error == ENOENT) return NotFound(what + ErrnoText(error));
    if (error == EMFILE || error == ENFILE) return ResourceExhausted(what + ErrnoText(error));
    return InvalidArgument(what + ErrnoText(error));
  }
  // Checked before anything is mapped; an error closes the descriptor with `region`.
  WEFT_ASSIGN_OR_RETURN(struct stat object, StatObject(region->fd, key));
  if (!options_.allowed_owner_uids.empty() &&
      std::find(options_.allowed_owner_uids.begin(), options_.allowed_owner_uids.end(), object.st_uid) ==
          options_.allowed_owner_uids.end()) {
    return PermissionDenied("shared memory key " + Quoted(key) +
                            " is refused: its owner is not a user this server accepts objects from");
  }
  const uint64_t size = static_cast<uint64_t>(object.st_size);
  WEFT_RETURN_IF_ERROR(CheckWindow(offset, byte_size, size, "shared memory region " + Quoted(name)));
  // CheckWindow proved offset + byte_size <= size without overflow.
  if (offset + byte_size > std::numeric_limits<size_t>::max()) return InvalidArgument("region is too large");
  Result<std::unique_ptr<GuardedMapping>> mapping =
      GuardedMapping::Map(region->fd, static_cast<size_t>(offset + byte_size));
  if (!mapping.ok()) return mapping.status().WithContext("cannot map shared memory key " + Quoted(key));
  region->mapping = std::move(mapping).value();
  return Insert(std::move(region));
}

Status SharedMemoryRegistry::RegisterCuda(const std::string& name, std::span<const std::byte> handle, int64_t device_id,
                                          uint64_t byte_size) {
  if (handle.size() != kCudaIpcHandleBytes) {
    return InvalidArgument("CUDA shared memory region " + Quoted(name) + ": raw_handle must have " +
                           std::to_string(kCudaIpcHandleBytes) + " bytes (a cudaIpcMemHandle_t), not " +
                           std::to_string(handle.size()));
  }
  if (device_id < 0 || device_id > std::numeric_limits<int>::max()) {
    return InvalidArgument("CUDA shared memory region " + Quoted(name) + ": no CUDA device " +
                           std::to_string(device_id));
  }
  if (byte_size == 0) return InvalidArgument("CUDA shared memory region " + Quoted(name) + ": byte_size must be > 0");
  WEFT_RETURN_IF_ERROR(CheckNewRegion(name));
  Result<std::shared_ptr<CudaSharedBuffer>> buffer = options_.open_cuda_buffer(static_cast<int>(device_id), handle);
  if (!buffer.ok()) return buffer.status().WithContext("CUDA shared memory region " + Quoted(name));
  WEFT_RETURN_IF_ERROR(CheckWindow(0, byte_size, (*buffer)->byte_size(),
                                   "CUDA shared memory region " + Quoted(name) + " (the allocation its handle names)"));
  auto region = std::make_shared<Region>();
  region->name = name;
  region->byte_size = byte_size;
  region->cuda = std::move(buffer).value();
  return Insert(std::move(region));
}

bool SharedMemoryRegistry::CudaAvailable() {
  static const bool available = CudaUnavailableReason().empty();
  return available;
}

namespace {

// Takes the regions of one kind out of `regions` (all of that kind, or the one named), so that the caller closes
// them outside its lock.
template <typename Region>
std::vector<std::shared_ptr<Region>> TakeRegions(std::map<std::string, std::shared_ptr<Region>>& regions,
                                                 const std::string* name, bool cuda) {
  std::vector<std::shared_ptr<Region>> taken;
  for (auto it = name ? regions.find(*name) : regions.begin(); it != regions.end();) {
    if (it->second->is_cuda() == cuda) {
      taken.push_back(std::move(it->second));
      it = regions.erase(it);
    } else {
      ++it;
    }
    if (name) break;
  }
  return taken;
}

}  // namespace

void SharedMemoryRegistry::Unregister(const std::string& name) {
  std::vector<std::shared_ptr<Region>> gone;  // unmapped outside the lock, when no slice holds it
  std::lock_guard lock(mu_);
  gone = TakeRegions(regions_, &name, /*cuda=*/false);
}

void SharedMemoryRegistry::UnregisterAll() {
  std::vector<std::shared_ptr<Region>> gone;
  std::lock_guard lock(mu_);
  gone = TakeRegions(regions_, nullptr, /*cuda=*/false);
}

void SharedMemoryRegistry::UnregisterCuda(const std::string& name) {
  std::vector<std::shared_ptr<Region>> gone;
  std::lock_guard lock(mu_);
  gone = TakeRegions(regions_, &name, /*cuda=*/true);
}

void SharedMemoryRegistry::UnregisterAllCuda() {
  std::vector<std::shared_ptr<Region>> gone;
  std::lock_guard lock(mu_);
  gone = TakeRegions(regions_, nullptr, /*cuda=*/true);
}

Result<std::vector<SharedMemoryRegionStatus>> SharedMemoryRegistry::Regions(const std::string& name) const {
  std::vector<SharedMemoryRegionStatus> out;
  std::lock_guard lock(mu_);
  for (const auto& [n, r] : regions_) {
    if ((!name.empty() && n != name) || r->is_cuda()) continue;
    out.push_back({r->name, r->key, r->offset, r->byte_size});
  }
  if (!name.empty() && out.empty()) return NotFound("no shared memory region " + Quoted(name) + " is registered");
  return out;
}

Result<std::vector<CudaSharedMemoryRegionStatus>> SharedMemoryRegistry::CudaRegions(const std::string& name) const {
  std::vector<CudaSharedMemoryRegionStatus> out;
  std::lock_guard lock(mu_);
  for (const auto& [n, r] : regions_) {
    if ((!name.empty() && n != name) || !r->is_cuda()) continue;
    out.push_back({r->name, r->cuda->device_id(), r->byte_size});
  }
  if (!name.empty() && out.empty()) {
    return NotFound("no CUDA shared memory region " + Quoted(name) + " is registered");
  }
  return out;
}

Result<SharedMemorySlice> SharedMemoryRegistry::Slice(const SharedMemoryRef& ref) const {
  std::shared_ptr<Region> region;
  {
    std::lock_guard lock(mu_);
    auto it = regions_.find(ref.region);
    if (it == regions_.end()) return NotFound("no shared memory region " + Quoted(ref.region) + " is registered");
    region = it->second;
  }
  if (region->is_cuda()) {
    WEFT_RETURN_IF_ERROR(
        CheckWindow(ref.offset, ref.byte_size, region->byte_size, "CUDA shared memory region " + Quoted(ref.region)));
    SharedMemorySlice slice{ref.region, region, nullptr, static_cast<size_t>(ref.byte_size)};
    slice.cuda = region->cuda;
    slice.cuda_offset = ref.offset;
    return slice;
  }
  if (region->mapping->faulted()) {
    return InvalidArgument("shared memory region " + Quoted(ref.region) +
                           " was truncated by its owner while in use; unregister it and register it again");
  }
  WEFT_RETURN_IF_ERROR(
      CheckWindow(ref.offset, ref.byte_size, region->byte_size, "shared memory region " + Quoted(ref.region)));
  // A client may have shrunk the object since it registered it; touching pages past its end would be SIGBUS.
  WEFT_ASSIGN_OR_RETURN(uint64_t size, ObjectSize(region->fd, region->key));
  WEFT_RETURN_IF_ERROR(CheckWindow(region->offset + ref.offset, ref.byte_size, size,
                                   "shared memory region " + Quoted(ref.region) + " (key " + Quoted(region->key) +
                                       ", object now " + std::to_string(size) + " bytes)"));
  std::byte* data = region->mapping->data() + region->offset + ref.offset;
  return SharedMemorySlice{ref.region, std::shared_ptr<const void>(region, data), data,
                           static_cast<size_t>(ref.byte_size),
                           std::shared_ptr<const GuardedMapping>(region, region->mapping.get())};
}

Result<Tensor> SharedMemoryInput(const SharedMemoryRegistry& registry, const SharedMemoryRef& ref,
                                 const std::string& name, DataType type, const Shape& shape) {
  WEFT_ASSIGN_OR_RETURN(SharedMemorySlice slice, registry.Slice(ref));
  return SharedMemoryInput(slice, name, type, shape);
}

namespace {

// A CUDA region's bytes, copied to the host (the size of a fixed-size type checked before anything is copied).
Result<Tensor> CudaSharedMemoryInput(const SharedMemorySlice& slice, const std::string& name, DataType type,
                                     const Shape& shape) {
  if (type != DataType::kBytes) {
    WEFT_ASSIGN_OR_RETURN(size_t expected, TensorByteSize(type, shape));
    if (expected != slice.byte_size) {
      return InvalidArgument("input " + Quoted(name) + " of shape " + ShapeToString(shape) + " needs " +
                             std::to_string(expected) + " bytes; its CUDA shared memory window has " +
                             std::to_string(slice.byte_size));
    }
  }
  std::vector<std::byte> copy(slice.byte_size);
  WEFT_RETURN_IF_ERROR(slice.cuda->Read(slice.cuda_offset, copy));
  WEFT_RETURN_IF_ERROR(ValidateTensorBytes(type, shape, copy));
  return Tensor::FromBytes(name, type, shape, std::move(copy));
}

Result<Tensor> HostSharedMemoryInput(const SharedMemorySlice& slice, const std::string& name, DataType type,
                                     const Shape& shape) {
  std::span<const std::byte> bytes(slice.data, slice.byte_size);
  if (type == DataType::kBytes) {
    // Checked in place first, so that a window that does not hold the shape's strings is refused before a byte
    // is copied (its size is the client's to choose), then again in the copy, which the client cannot change.
    WEFT_RETURN_IF_ERROR(ValidateTensorBytes(type, shape, bytes));
    std::vector<std::byte> copy(bytes.begin(), bytes.end());
    WEFT_RETURN_IF_ERROR(ValidateTensorBytes(type, shape, copy));
    return Tensor::FromBytes(name, type, shape, std::move(copy));
  }
  WEFT_RETURN_IF_ERROR(ValidateTensorBytes(type, shape, bytes));
  size_t alignment = std::max<size_t>(1, DataTypeSize(type));
  if (reinterpret_cast<uintptr_t>(slice.data) % alignment != 0) {
    return Tensor::FromBytes(name, type, shape, std::vector<std::byte>(bytes.begin(), bytes.end()));
  }
  return Tensor(name, type, shape, slice.owner, slice.data, slice.byte_size);
}

}  // namespace

Result<Tensor> SharedMemoryInput(const SharedMemorySlice& slice, const std::string& name, DataType type,
                                 const Shape& shape) {
  // A copy's size is the client's window, which may be as large as the region it registered.
  try {
    return slice.cuda ? CudaSharedMemoryInput(slice, name, type, shape)
                      : HostSharedMemoryInput(slice, name, type, shape);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  return ResourceExhausted("input " + Quoted(name) + ": its " + std::to_string(slice.byte_size) +
                           " bytes of shared memory cannot be copied: out of memory");
}

Status WriteSharedMemoryOutput(const Tensor& output, const SharedMemorySlice& slice) {
  if (output.place().kind == MemoryKind::kGpu) {
    return Internal("output '" + output.name() + "' is in GPU memory; the backend must return host memory");
  }
  if (output.byte_size() > slice.byte_size) {
    return InvalidArgument("output '" + output.name() + "' has " + std::to_string(output.byte_size()) +
                           " bytes but its shared memory window in region " + Quoted(slice.region) + " holds " +
                           std::to_string(slice.byte_size));
  }
  if (slice.cuda) return slice.cuda->Write(slice.cuda_offset, output.bytes());
  // memmove: an identity model's output may be its input, read from the same region.
  if (output.byte_size() > 0) std::memmove(slice.data, output.data(), output.byte_size());
  return Status::Ok();
}

}  // namespace weft
