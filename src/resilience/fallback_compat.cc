#include "resilience/fallback_compat.h"

#include <string>
#include <string_view>

#include "base/json_string.h"

namespace weft {
namespace {

// Names come from configs, and a config may come from a client (the load API): quote at most this much of one.
constexpr size_t kMaxQuotedBytes = 64;

std::string Quoted(std::string_view name) { return "'" + TruncateUtf8(name, kMaxQuotedBytes) + "'"; }

// Which way a tensor's dims must fit: an input of the fallback must take whatever the primary takes; an output of
// the fallback must be something the primary's clients take.
enum class Direction { kInput, kOutput };

bool DimsFit(const Shape& primary, const Shape& fallback, Direction direction) {
  if (primary.size() != fallback.size()) return false;
  for (size_t i = 0; i < primary.size(); ++i) {
    if (fallback[i] == primary[i]) continue;
    if (direction == Direction::kInput ? fallback[i] != -1 : primary[i] != -1) return false;
  }
  return true;
}

// The difference between the primary's tensor and the fallback's of the same name, or "" when they fit.
std::string TensorDifference(const TensorConfig& primary, const TensorConfig& fallback, Direction direction) {
  const char* kind = direction == Direction::kInput ? "input " : "output ";
  if (primary.data_type != fallback.data_type) {
    return kind + Quoted(primary.name) + " is " + std::string(DataTypeConfigName(fallback.data_type)) + " there, " +
           std::string(DataTypeConfigName(primary.data_type)) + " here";
  }
  if (!DimsFit(primary.dims, fallback.dims, direction)) {
    return kind + Quoted(primary.name) + " has dims " + ShapeToString(fallback.dims) + " there, " +
           ShapeToString(primary.dims) + " here (" +
           (direction == Direction::kInput ? "each dim there must be -1 or the one here"
                                           : "each dim there must be the one here, unless the one here is -1") +
           ")";
  }
  return "";
}

std::string Difference(const ModelConfig& primary, const ModelConfig& fallback) {
  if (primary.max_batch_size > 0 && fallback.max_batch_size < primary.max_batch_size) {
    return "max_batch_size is " + std::to_string(fallback.max_batch_size) + " there, " +
           std::to_string(primary.max_batch_size) + " here (the fallback must take every batch this model takes)";
  }
  if (primary.max_batch_size == 0 && fallback.max_batch_size != 0) {
    return "max_batch_size is " + std::to_string(fallback.max_batch_size) +
           " there, 0 here (requests to a model that does not batch have no batch dimension)";
  }
  for (const TensorConfig& input : primary.inputs) {
    const TensorConfig* other = fallback.FindInput(input.name);
    if (other == nullptr) return "input " + Quoted(input.name) + " is missing there";
    std::string difference = TensorDifference(input, *other, Direction::kInput);
    if (!difference.empty()) return difference;
  }
  for (const TensorConfig& input : fallback.inputs) {
    if (primary.FindInput(input.name) == nullptr) {
      return "input " + Quoted(input.name) + " is required there and missing here (requests to this model lack it)";
    }
  }
  for (const TensorConfig& output : primary.outputs) {
    const TensorConfig* other = fallback.FindOutput(output.name);
    if (other == nullptr) return "output " + Quoted(output.name) + " is missing there";
    std::string difference = TensorDifference(output, *other, Direction::kOutput);
    if (!difference.empty()) return difference;
  }
  return "";
}

}  // namespace

Status CheckFallbackCompatible(const ModelConfig& primary, const ModelConfig& fallback) {
  const std::string difference = Difference(primary, fallback);
  if (difference.empty()) return Status::Ok();
  return InvalidArgument("fallback " + Quoted(fallback.name) + " is not compatible with " + Quoted(primary.name) +
                         ": " + difference);
}

}  // namespace weft
