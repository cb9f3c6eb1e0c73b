#include "frontend/http/shared_memory_codec.h"

#include <simdjson.h>

#include <optional>

#include "frontend/http/json_writer.h"

namespace weft {

namespace dom = simdjson::dom;

Result<SharedMemoryRegistration> DecodeSharedMemoryRegistration(std::span<const std::byte> body) {
  // A small body: copied into simdjson's padded string rather than relying on the request's padding.
  simdjson::padded_string json(reinterpret_cast<const char*>(body.data()), body.size());
  dom::parser parser;
  dom::element root;
  if (auto error = parser.parse(json).get(root)) {
    return InvalidArgument(std::string("malformed JSON: ") + simdjson::error_message(error));
  }
  if (root.type() != dom::element_type::OBJECT) return InvalidArgument("the body must be a JSON object");
  SharedMemoryRegistration out;
  std::optional<std::string> key;
  std::optional<uint64_t> byte_size;
  // By value: iterating the temporary that value_unsafe() returns would dangle.
  dom::object fields = root.get_object().value_unsafe();
  for (dom::key_value_pair field : fields) {
    if (field.key == "key") {
      if (field.value.type() != dom::element_type::STRING) return InvalidArgument("'key' must be a string");
      key = std::string(field.value.get_string().value_unsafe());
    } else if (field.key == "offset" || field.key == "byte_size") {
      uint64_t v = 0;
      if (field.value.get_uint64().get(v)) {
        return InvalidArgument("'" + std::string(field.key) + "' must be a non-negative integer");
      }
      if (field.key == "offset") {
        out.offset = v;
      } else {
        byte_size = v;
      }
    }
  }
  if (!key) return InvalidArgument("the body has no 'key'");
  if (!byte_size) return InvalidArgument("the body has no 'byte_size'");
  out.key = std::move(*key);
  out.byte_size = *byte_size;
  return out;
}

std::string EncodeSharedMemoryStatus(const std::vector<SharedMemoryRegionStatus>& regions) {
  std::string body;
  JsonWriter json(&body);
  json.BeginArray();
  for (const SharedMemoryRegionStatus& r : regions) {
    json.BeginObject();
    json.Key("name");
    json.String(r.name);
    json.Key("key");
    json.String(r.key);
    json.Key("offset");
    json.Uint(r.offset);
    json.Key("byte_size");
    json.Uint(r.byte_size);
    json.EndObject();
  }
  json.EndArray();
  return body;
}

}  // namespace weft
