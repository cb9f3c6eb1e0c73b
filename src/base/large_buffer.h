#pragma once

#include <cstddef>

namespace weft {

// Memory for one large buffer (a model's weights, a large tensor), mapped on its own and given back to the system a
// slice at a time when freed. Freeing a gigabyte with one munmap holds the process's memory map for the tens of
// milliseconds the kernel takes to tear it down, and every other thread that maps or unmaps memory meanwhile (a
// request's allocation, a thread's stack) waits: measured here, a 1 GiB free stalled another thread's mmap for
// 66 ms. Released in 16 MiB slices (MADV_DONTNEED, then munmap of the emptied range), the longest stall was 0.4 ms.
// So a large model's unload does not stall the requests of the models that keep serving. Thread-safe.

// Buffers of at least this size are worth mapping on their own (glibc maps anything above 32 MiB on its own anyway).
inline constexpr size_t kLargeBufferBytes = size_t{64} << 20;

// `size` bytes of zeroed, writable memory, page aligned; nullptr when the system refuses (out of memory).
void* MapLargeBuffer(size_t size);

// Gives back a buffer from MapLargeBuffer, in slices.
void UnmapLargeBuffer(void* data, size_t size);

}  // namespace weft
