#include "frontend/http/shared_memory_codec.h"

#include <openssl/evp.h>
#include <simdjson.h>

#include <limits>
#include <optional>

#include "frontend/http/json_writer.h"

namespace weft {

namespace dom = simdjson::dom;

namespace {

// The body's top-level object. A small body: copied into simdjson's padded string rather than relying on the
// request's padding.
Result<dom::object> ParseObject(std::span<const std::byte> body, dom::parser& parser) {
  simdjson::padded_string json(reinterpret_cast<const char*>(body.data()), body.size());
  dom::element root;
  if (auto error = parser.parse(json).get(root)) {
    return InvalidArgument(std::string("malformed JSON: ") + simdjson::error_message(error));
  }
  if (root.type() != dom::element_type::OBJECT) return InvalidArgument("the body must be a JSON object");
  return root.get_object().value_unsafe();
}

// Standard base64 with padding, by OpenSSL (EVP_DecodeBlock, which counts padding as zero bytes and accepts
// surrounding blanks: both handled here).
std::optional<std::vector<std::byte>> DecodeBase64(std::string_view text) {
  if (text.size() % 4 != 0 || text.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return std::nullopt;
  }
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return std::nullopt;
  }
  std::vector<std::byte> out(text.size() / 4 * 3);
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  size_t padding = 0;
  if (!text.empty() && text.back() == '=') ++padding;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++padding;
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

}  // namespace

Result<SharedMemoryRegistration> DecodeSharedMemoryRegistration(std::span<const std::byte> body) {
  dom::parser parser;
  WEFT_ASSIGN_OR_RETURN(dom::object fields, ParseObject(body, parser));
  SharedMemoryRegistration out;
  std::optional<std::string> key;
  std::optional<uint64_t> byte_size;
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

Result<CudaSharedMemoryRegistration> DecodeCudaSharedMemoryRegistration(std::span<const std::byte> body) {
  dom::parser parser;
  WEFT_ASSIGN_OR_RETURN(dom::object fields, ParseObject(body, parser));
  CudaSharedMemoryRegistration out;
  bool handle = false, device = false, size = false;
  for (dom::key_value_pair field : fields) {
    if (field.key == "raw_handle") {
      std::string_view b64;
      dom::object wrapper;
      if (field.value.get_object().get(wrapper) || wrapper["b64"].get_string().get(b64)) {
        return InvalidArgument("'raw_handle' must be an object {\"b64\": string}");
      }
      std::optional<std::vector<std::byte>> bytes = DecodeBase64(b64);
      if (!bytes) return InvalidArgument("'raw_handle.b64' is not base64");
      out.raw_handle = std::move(*bytes);
      handle = true;
    } else if (field.key == "device_id") {
      if (field.value.get_int64().get(out.device_id) || out.device_id < 0) {
        return InvalidArgument("'device_id' must be a non-negative integer");
      }
      device = true;
    } else if (field.key == "byte_size") {
      if (field.value.get_uint64().get(out.byte_size)) {
        return InvalidArgument("'byte_size' must be a non-negative integer");
      }
      size = true;
    }
  }
  if (!handle) return InvalidArgument("the body has no 'raw_handle'");
  if (!device) return InvalidArgument("the body has no 'device_id'");
  if (!size) return InvalidArgument("the body has no 'byte_size'");
  return out;
}

std::string EncodeCudaSharedMemoryStatus(const std::vector<CudaSharedMemoryRegionStatus>& regions) {
  std::string body;
  JsonWriter json(&body);
  json.BeginArray();
  for (const CudaSharedMemoryRegionStatus& r : regions) {
    json.BeginObject();
    json.Key("name");
    json.String(r.name);
    json.Key("device_id");
    json.Int(r.device_id);
    json.Key("byte_size");
    json.Uint(r.byte_size);
    json.EndObject();
  }
  json.EndArray();
  return body;
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
