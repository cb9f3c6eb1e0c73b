#include "frontend/http/repository_codec.h"

#include <simdjson.h>

#include "frontend/http/json_writer.h"

namespace weft {
namespace {

namespace dom = simdjson::dom;

// A body parsed: its top-level object (none for an empty body) and its "parameters" object (none when absent). The
// objects point into the parser, which is why they travel together.
struct ParsedBody {
  dom::parser parser;
  simdjson::padded_string json;
  std::optional<dom::object> root;
  std::optional<dom::object> parameters;
};

// A small body: copied into simdjson's padded string.
Status Parse(std::span<const std::byte> body, ParsedBody* out) {
  std::string_view text(reinterpret_cast<const char*>(body.data()), body.size());
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return Status::Ok();
  out->json = simdjson::padded_string(text);
  dom::element root;
  if (auto error = out->parser.parse(out->json).get(root)) {
    return InvalidArgument(std::string("malformed JSON: ") + simdjson::error_message(error));
  }
  if (root.type() != dom::element_type::OBJECT) return InvalidArgument("the body must be a JSON object");
  out->root = root.get_object().value_unsafe();
  for (dom::key_value_pair field : *out->root) {
    if (field.key != "parameters") continue;
    if (field.value.type() != dom::element_type::OBJECT) return InvalidArgument("'parameters' must be an object");
    out->parameters = field.value.get_object().value_unsafe();
  }
  return Status::Ok();
}

}  // namespace

Result<RepositoryIndexRequest> DecodeRepositoryIndexRequest(std::span<const std::byte> body) {
  ParsedBody parsed;
  WEFT_RETURN_IF_ERROR(Parse(body, &parsed));
  RepositoryIndexRequest out;
  if (!parsed.root) return out;
  for (dom::key_value_pair field : *parsed.root) {
    if (field.key != "ready") continue;
    if (field.value.get_bool().get(out.ready)) return InvalidArgument("'ready' must be a boolean");
  }
  return out;
}

Result<RepositoryLoadRequest> DecodeRepositoryLoadRequest(std::span<const std::byte> body) {
  ParsedBody parsed;
  WEFT_RETURN_IF_ERROR(Parse(body, &parsed));
  RepositoryLoadRequest out;
  if (!parsed.parameters) return out;
  for (dom::key_value_pair field : *parsed.parameters) {
    const std::string_view key = field.key;
    if (key == "config") {
      std::string_view config;
      if (field.value.get_string().get(config)) {
        return InvalidArgument("parameter 'config' must be a string holding the model configuration as JSON");
      }
      out.config = std::string(config);
    } else if (key.starts_with("file:")) {
      return Unimplemented("parameter '" + std::string(key) +
                           "': model files in the load request are not supported; put them in the model repository");
    } else {
      return InvalidArgument("unknown load parameter '" + std::string(key) + "' (known: config)");
    }
  }
  return out;
}

Result<RepositoryUnloadRequest> DecodeRepositoryUnloadRequest(std::span<const std::byte> body) {
  ParsedBody parsed;
  WEFT_RETURN_IF_ERROR(Parse(body, &parsed));
  RepositoryUnloadRequest out;
  if (!parsed.parameters) return out;
  for (dom::key_value_pair field : *parsed.parameters) {
    const std::string_view key = field.key;
    if (key != "unload_dependents") {
      return InvalidArgument("unknown unload parameter '" + std::string(key) + "' (known: unload_dependents)");
    }
    if (field.value.get_bool().get(out.unload_dependents)) {
      return InvalidArgument("parameter 'unload_dependents' must be a boolean");
    }
  }
  return out;
}

std::string EncodeRepositoryIndex(std::span<const RepositoryIndexEntry> entries) {
  std::string body;
  JsonWriter json(&body);
  json.BeginArray();
  for (const RepositoryIndexEntry& e : entries) {
    json.BeginObject();
    json.Key("name");
    json.String(e.name);
    if (e.version != 0) {
      json.Key("version");
      json.String(std::to_string(e.version));
    }
    json.Key("state");
    json.String(e.state);
    json.Key("reason");
    json.String(e.reason);
    json.EndObject();
  }
  json.EndArray();
  return body;
}

}  // namespace weft
