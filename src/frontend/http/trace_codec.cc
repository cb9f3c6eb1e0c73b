#include "frontend/http/trace_codec.h"

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "frontend/http/json_writer.h"

namespace weft {
namespace {

namespace dom = simdjson::dom;

// A dozen settings fit in well under 1 KiB; the bound keeps a client from making the server hold a large document
// (and a long resource list) for a settings call.
constexpr size_t kMaxBodyBytes = size_t{64} << 10;

// The settings GET answers as arrays; the rest are strings.
bool IsList(std::string_view name) { return name == "trace_level" || name == "opentelemetry_resource"; }

// One JSON value as the update's values; nullopt for null.
Result<std::optional<std::vector<std::string>>> ReadValue(std::string_view name, dom::element value) {
  auto one = [](std::string text) { return std::optional<std::vector<std::string>>(std::vector{std::move(text)}); };
  switch (value.type()) {
    case dom::element_type::NULL_VALUE: return std::optional<std::vector<std::string>>();
    case dom::element_type::STRING: return one(std::string(value.get_string().value_unsafe()));
    case dom::element_type::BOOL: return one(value.get_bool().value_unsafe() ? "true" : "false");
    case dom::element_type::INT64: return one(std::to_string(value.get_int64().value_unsafe()));
    case dom::element_type::UINT64: return one(std::to_string(value.get_uint64().value_unsafe()));
    case dom::element_type::ARRAY: {
      std::vector<std::string> values;
      const dom::array array = value.get_array().value_unsafe();  // a copy: the result it came in is a temporary
      for (dom::element item : array) {
        std::string_view text;
        if (item.get_string().get(text)) {
          return InvalidArgument("trace setting '" + std::string(name) + "' must be an array of strings");
        }
        values.emplace_back(text);
      }
      return std::optional<std::vector<std::string>>(std::move(values));
    }
    case dom::element_type::DOUBLE:
    case dom::element_type::OBJECT: break;
  }
  return InvalidArgument("trace setting '" + std::string(name) +
                         "' must be a string, an integer, a boolean, an array of strings or null");
}

}  // namespace

Result<TraceSettingUpdate> ParseTraceSettingJson(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return TraceSettingUpdate{};
  if (body.size() > kMaxBodyBytes) {
    return InvalidArgument("a trace settings body may have at most " + std::to_string(kMaxBodyBytes) + " bytes");
  }
  simdjson::padded_string json(body);
  dom::parser parser;
  dom::element root;
  if (auto error = parser.parse(json).get(root)) {
    return InvalidArgument(std::string("malformed JSON: ") + simdjson::error_message(error));
  }
  dom::object settings;
  if (root.get_object().get(settings)) return InvalidArgument("the body must be a JSON object of trace settings");
  TraceSettingUpdate update;
  for (dom::key_value_pair field : settings) {
    WEFT_ASSIGN_OR_RETURN(auto values, ReadValue(field.key, field.value));
    if (!update.emplace(std::string(field.key), std::move(values)).second) {
      return InvalidArgument("trace setting '" + std::string(field.key) + "' is given twice");
    }
  }
  return update;
}

std::string TraceSettingsJson(const std::map<std::string, std::vector<std::string>>& view) {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject();
  for (const auto& [name, values] : view) {
    json.Key(name);
    // A scalar holds one value; should one ever hold another count, an array shows them all rather than hide any.
    if (!IsList(name) && values.size() == 1) {
      json.String(values[0]);
      continue;
    }
    json.BeginArray();
    for (const std::string& value : values) json.String(value);
    json.EndArray();
  }
  json.EndObject();
  return out;
}

}  // namespace weft
