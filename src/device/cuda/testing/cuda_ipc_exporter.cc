// The other process of the CUDA IPC tests: a handle can only be opened by a process other than the one that
// exported it. Allocates BYTE_SIZE bytes on DEVICE, fills byte i with Pattern(i), prints the handle in hex on one
// line, then answers commands on stdin, one per line, until "quit" or the end of input (then frees the memory):
//   read OFFSET SIZE   prints the bytes there in hex on one line
//
// Usage: cuda_ipc_exporter DEVICE BYTE_SIZE
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "device/cuda/cuda_ipc.h"
#include "device/cuda/testing/exporter_process.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: cuda_ipc_exporter DEVICE BYTE_SIZE\n";
    return 2;
  }
  const int device = std::atoi(argv[1]);
  const uint64_t byte_size = std::strtoull(argv[2], nullptr, 10);
  auto buffer = weft::ExportCudaBuffer(device, byte_size);
  if (!buffer.ok()) {
    std::cerr << buffer.status().ToString() << "\n";
    return 1;
  }
  std::vector<std::byte> pattern(byte_size);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = weft::testing::Pattern(i);
  if (!(*buffer)->Write(0, pattern).ok()) return 1;
  std::cout << weft::testing::Hex((*buffer)->handle()) << std::endl;
  std::string command;
  while (std::cin >> command && command != "quit") {
    uint64_t offset = 0, size = 0;
    std::cin >> offset >> size;
    std::vector<std::byte> bytes(size);
    weft::Status read = (*buffer)->Read(offset, bytes);
    std::cout << (read.ok() ? weft::testing::Hex(bytes) : "error " + read.message()) << std::endl;
  }
  return 0;
}
