#include "frontend/http/logging_codec.h"

#include <simdjson.h>

#include "frontend/http/json_writer.h"

namespace weft {

namespace dom = simdjson::dom;

Result<LogSettings> DecodeLogSettingsUpdate(std::span<const std::byte> body, LogSettings current) {
  std::string_view text(reinterpret_cast<const char*>(body.data()), body.size());
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return current;
  simdjson::padded_string json(text);
  dom::parser parser;
  dom::element root;
  if (auto error = parser.parse(json).get(root)) {
    return InvalidArgument(std::string("malformed JSON: ") + simdjson::error_message(error));
  }
  dom::object settings;
  if (root.get_object().get(settings)) return InvalidArgument("the body must be a JSON object of log settings");
  for (dom::key_value_pair field : settings) {
    LogSettingValue value;
    switch (field.value.type()) {
      case dom::element_type::BOOL: value = field.value.get_bool().value_unsafe(); break;
      case dom::element_type::UINT64: value = field.value.get_uint64().value_unsafe(); break;
      case dom::element_type::INT64: {
        const int64_t n = field.value.get_int64().value_unsafe();
        if (n < 0) return InvalidArgument("log setting '" + std::string(field.key) + "' must not be negative");
        value = static_cast<uint64_t>(n);
        break;
      }
      case dom::element_type::STRING: value = std::string(field.value.get_string().value_unsafe()); break;
      default:
        return InvalidArgument("log setting '" + std::string(field.key) +
                               "' must be a boolean, an integer or a string");
    }
    WEFT_RETURN_IF_ERROR(ApplyLogSetting(field.key, value, &current));
  }
  return current;
}

std::string EncodeLogSettings(const LogSettings& settings) {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject();
  for (const auto& [name, value] : NamedLogSettings(settings)) {
    json.Key(name);
    if (const bool* flag = std::get_if<bool>(&value)) {
      json.Bool(*flag);
    } else if (const uint64_t* number = std::get_if<uint64_t>(&value)) {
      json.Uint(*number);
    } else {
      json.String(std::get<std::string>(value));
    }
  }
  json.EndObject();
  return out;
}

}  // namespace weft
