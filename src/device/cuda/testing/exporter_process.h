#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace weft::testing {

// What the exporter writes at byte i of its allocation.
inline std::byte Pattern(size_t i) { return static_cast<std::byte>((i * 13 + 5) & 0xff); }

inline std::string Hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::byte b : bytes) {
    out += kDigits[std::to_integer<unsigned>(b) >> 4];
    out += kDigits[std::to_integer<unsigned>(b) & 15];
  }
  return out;
}

inline std::optional<std::vector<std::byte>> FromHex(const std::string& text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::vector<std::byte> out;
  for (size_t i = 0; i < text.size(); i += 2) {
    unsigned value = 0;
    if (std::sscanf(text.c_str() + i, "%2x", &value) != 1) return std::nullopt;
    out.push_back(static_cast<std::byte>(value));
  }
  return out;
}

// cuda_ipc_exporter running as a child with its stdin and stdout on pipes: at `built_path` (where the build put it),
// or at $WEFT_CUDA_IPC_EXPORTER when set (tests carried to another machine, bench/gpu/bundle_server_tests.sh).
class ExporterProcess {
 public:
  ExporterProcess(const std::string& built_path, int device, uint64_t byte_size) {
    const char* moved = std::getenv("WEFT_CUDA_IPC_EXPORTER");
    const std::string path = moved != nullptr && *moved != '\0' ? moved : built_path;
    signal(SIGPIPE, SIG_IGN);  // a child that died must fail the test, not kill it
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, in[1]);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::string device_arg = std::to_string(device), size_arg = std::to_string(byte_size);
    char* argv[] = {const_cast<char*>(path.c_str()), device_arg.data(), size_arg.data(), nullptr};
    if (posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv, environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out[1]);
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
  }
  ~ExporterProcess() {
    if (to_) {
      std::fputs("quit\n", to_);
      std::fclose(to_);
    }
    if (from_) std::fclose(from_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  ExporterProcess(const ExporterProcess&) = delete;
  ExporterProcess& operator=(const ExporterProcess&) = delete;

  // The handle it printed first; empty when it failed.
  std::vector<std::byte> Handle() { return FromHex(Line()).value_or(std::vector<std::byte>{}); }

  // What its allocation holds at [offset, offset + size) now.
  std::vector<std::byte> Read(uint64_t offset, uint64_t size) {
    std::fprintf(to_, "read %llu %llu\n", static_cast<unsigned long long>(offset),
                 static_cast<unsigned long long>(size));
    std::fflush(to_);
    return FromHex(Line()).value_or(std::vector<std::byte>{});
  }

 private:
  std::string Line() {
    std::string line;
    if (!from_) return line;
    for (int c = std::fgetc(from_); c != EOF && c != '\n'; c = std::fgetc(from_)) line += static_cast<char>(c);
    return line;
  }

  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

}  // namespace weft::testing
