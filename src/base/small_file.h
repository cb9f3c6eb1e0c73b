#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "base/result.h"

namespace weft {

// Reads `file` whole, when it is a regular file of at most `max_bytes` (configs, label files, key files). The open
// does not wait for a writer should a FIFO have taken the file's place, and a file that grows past the limit while
// it is read is refused rather than read on. The messages give the reason only; callers add the file's name.
// NotFound: it does not exist (or a parent is not a directory). InvalidArgument: not a regular file, or larger
// than max_bytes. Unavailable: it exists but cannot be opened or read (permissions, I/O errors).
Result<std::string> ReadSmallFile(const std::filesystem::path& file, size_t max_bytes);

}  // namespace weft
