#pragma once

#include <google/protobuf/message.h>

#include <string>

namespace weft::pbtxt_internal {

// Renders `message` as JSON the way Triton's model_configuration endpoint does: proto field names, enums by
// name, every scalar and repeated field even when it holds its default (clients index "max_batch_size" without
// checking), message and oneof fields only when set, map keys in sorted order, and 64-bit integers as JSON
// numbers. protobuf's MessageToJsonString quotes 64-bit integers ("dims": ["16"]), which breaks clients that
// use dims as numbers; Triton rewrites them after printing, we print them right the first time.
std::string ConfigMessageToJson(const google::protobuf::Message& message);

}  // namespace weft::pbtxt_internal
