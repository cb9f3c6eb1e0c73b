#pragma once

namespace weft {

// Makes libtorch's CPU allocations of kLargeBufferBytes and more go through MapLargeBuffer, so that the weights of a
// large model are given back to the system in slices when it unloads (base/large_buffer.h: one munmap of a
// gigabyte stalls the other models' requests for tens of milliseconds). Smaller allocations stay with torch's own
// allocator. Process-wide (torch has one CPU allocator); idempotent; thread-safe. Called when the TorchScript backend
// is made, before any model loads.
void InstallTorchLargeBufferAllocator();

}  // namespace weft
