#include "base/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace weft {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kInfo};

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return 'D';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kWarning: return 'W';
    case LogLevel::kError: return 'E';
  }
  return '?';
}

std::string_view BaseName(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(level); }
LogLevel GetLogLevel() { return g_level.load(std::memory_order_relaxed); }

void WriteLogLine(LogLevel level, std::string_view file, int line, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out;
  out.reserve(64 + message.size());
  out += stamp;
  char frac[16];
  std::snprintf(frac, sizeof(frac), ".%06ldZ ", static_cast<long>(micros));
  out += frac;
  out += LevelLetter(level);
  out += ' ';
  out += BaseName(file);
  out += ':';
  out += std::to_string(line);
  out += "] ";
  out += message;
  out += '\n';
  // One fwrite per line keeps lines whole across threads.
  std::fwrite(out.data(), 1, out.size(), stderr);
}

namespace internal {
CheckFailure::CheckFailure(const char* file, int line, const char* cond) : file_(file), line_(line) {
  stream_ << "CHECK failed: " << cond << " ";
}
CheckFailure::~CheckFailure() {
  WriteLogLine(LogLevel::kError, file_, line_, stream_.str());
  std::abort();
}
}  // namespace internal

}  // namespace weft
