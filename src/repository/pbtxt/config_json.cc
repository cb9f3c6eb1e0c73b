#include "repository/pbtxt/config_json.h"

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

#include "base/json_string.h"

namespace weft::pbtxt_internal {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

template <typename T>
void AppendNumber(T value, std::string* out) {
  if constexpr (std::is_floating_point_v<T>) {
    // JSON has no NaN or infinity; proto3 JSON writes them as strings.
    if (std::isnan(value)) return out->append("\"NaN\""), void();
    if (std::isinf(value)) return out->append(value > 0 ? "\"Infinity\"" : "\"-Infinity\""), void();
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, end);
}

void AppendMessage(const Message& message, std::string* out);

// One element of a field: the value of a singular field (index < 0) or element `index` of a repeated one.
void AppendValue(const Message& message, const FieldDescriptor* field, int index, std::string* out) {
  const Reflection* r = message.GetReflection();
  const bool rep = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return AppendNumber(rep ? r->GetRepeatedInt32(message, field, index) : r->GetInt32(message, field), out);
    case FieldDescriptor::CPPTYPE_INT64:
      return AppendNumber(rep ? r->GetRepeatedInt64(message, field, index) : r->GetInt64(message, field), out);
    case FieldDescriptor::CPPTYPE_UINT32:
      return AppendNumber(rep ? r->GetRepeatedUInt32(message, field, index) : r->GetUInt32(message, field), out);
    case FieldDescriptor::CPPTYPE_UINT64:
      return AppendNumber(rep ? r->GetRepeatedUInt64(message, field, index) : r->GetUInt64(message, field), out);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return AppendNumber(rep ? r->GetRepeatedFloat(message, field, index) : r->GetFloat(message, field), out);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return AppendNumber(rep ? r->GetRepeatedDouble(message, field, index) : r->GetDouble(message, field), out);
    case FieldDescriptor::CPPTYPE_BOOL:
      out->append((rep ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field)) ? "true" : "false");
      return;
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string scratch;
      const std::string& s = rep ? r->GetRepeatedStringReference(message, field, index, &scratch)
                                 : r->GetStringReference(message, field, &scratch);
      return AppendJsonString(out, s);
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      int number = rep ? r->GetRepeatedEnumValue(message, field, index) : r->GetEnumValue(message, field);
      const auto* value = field->enum_type()->FindValueByNumber(number);
      if (value != nullptr) return AppendJsonString(out, value->name());
      return AppendNumber(number, out);  // an open enum may hold a number without a name
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return AppendMessage(rep ? r->GetRepeatedMessage(message, field, index) : r->GetMessage(message, field), out);
  }
}

// Maps are repeated entry messages in no particular order; sort them so that the output is stable. The text format
// lets a key repeat, and reflection then holds every entry while the map holds the last; print what the map holds.
void AppendMap(const Message& message, const FieldDescriptor* field, std::string* out) {
  const Reflection* r = message.GetReflection();
  const FieldDescriptor* key_field = field->message_type()->map_key();
  const FieldDescriptor* value_field = field->message_type()->map_value();
  struct Entry {
    std::string key;
    uint64_t unsigned_key = 0;
    int64_t signed_key = 0;
    const Message* entry = nullptr;
  };
  std::vector<Entry> entries;
  for (int i = 0; i < r->FieldSize(message, field); ++i) {
    const Message& entry = r->GetRepeatedMessage(message, field, i);
    const Reflection* er = entry.GetReflection();
    Entry e;
    e.entry = &entry;
    switch (key_field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING: e.key = er->GetString(entry, key_field); break;
      case FieldDescriptor::CPPTYPE_INT32: e.signed_key = er->GetInt32(entry, key_field); break;
      case FieldDescriptor::CPPTYPE_INT64: e.signed_key = er->GetInt64(entry, key_field); break;
      case FieldDescriptor::CPPTYPE_UINT32: e.unsigned_key = er->GetUInt32(entry, key_field); break;
      case FieldDescriptor::CPPTYPE_UINT64: e.unsigned_key = er->GetUInt64(entry, key_field); break;
      case FieldDescriptor::CPPTYPE_BOOL: e.unsigned_key = er->GetBool(entry, key_field) ? 1 : 0; break;
      default: break;  // protobuf allows no other key types
    }
    if (key_field->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) {
      e.key = e.unsigned_key ? "true" : "false";
    } else if (key_field->cpp_type() != FieldDescriptor::CPPTYPE_STRING) {
      e.key = e.signed_key != 0 ? std::to_string(e.signed_key) : std::to_string(e.unsigned_key);
    }
    entries.push_back(std::move(e));
  }
  const auto same_key = [](const Entry& a, const Entry& b) {
    return a.signed_key == b.signed_key && a.unsigned_key == b.unsigned_key && a.key == b.key;
  };
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.signed_key != b.signed_key) return a.signed_key < b.signed_key;
    if (a.unsigned_key != b.unsigned_key) return a.unsigned_key < b.unsigned_key;
    return a.key < b.key;
  });
  out->push_back('{');
  bool first = true;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i + 1 < entries.size() && same_key(entries[i], entries[i + 1])) continue;
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(out, entries[i].key);
    out->push_back(':');
    AppendValue(*entries[i].entry, value_field, -1, out);
  }
  out->push_back('}');
}

void AppendMessage(const Message& message, std::string* out) {
  const auto* descriptor = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  out->push_back('{');
  bool first = true;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    // Messages and oneof members have presence: an unset one is absent. Scalars are printed even when default.
    if (!field->is_repeated() && (field->has_presence() && !r->HasField(message, field))) continue;
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(out, field->name());
    out->push_back(':');
    if (field->is_map()) {
      AppendMap(message, field, out);
    } else if (field->is_repeated()) {
      out->push_back('[');
      for (int j = 0; j < r->FieldSize(message, field); ++j) {
        if (j > 0) out->push_back(',');
        AppendValue(message, field, j, out);
      }
      out->push_back(']');
    } else {
      AppendValue(message, field, -1, out);
    }
  }
  out->push_back('}');
}

}  // namespace

std::string ConfigMessageToJson(const Message& message) {
  std::string out;
  AppendMessage(message, &out);
  return out;
}

}  // namespace weft::pbtxt_internal
