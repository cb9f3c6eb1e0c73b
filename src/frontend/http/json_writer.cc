#include "frontend/http/json_writer.h"

#include <charconv>
#include <cmath>

namespace weft {

namespace {

template <typename T>
void AppendNumber(std::string* out, T value) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, end);
}

template <typename T>
void AppendFloating(std::string* out, T value) {
  if (std::isnan(value)) {
    out->append("NaN");
  } else if (std::isinf(value)) {
    out->append(value > 0 ? "Infinity" : "-Infinity");
  } else {
    AppendNumber(out, value);
  }
}

}  // namespace

void AppendJsonString(std::string* out, std::string_view value) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run = 0;  // start of the pending run of bytes that need no escape
  for (size_t i = 0; i < value.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(value.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default:
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 0xf]);
    }
  }
  out->append(value.data() + run, value.size() - run);
  out->push_back('"');
}

void JsonWriter::Key(std::string_view key) {
  BeforeValue();
  AppendJsonString(out_, key);
  out_->push_back(':');
  need_comma_ = false;
}

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  AppendJsonString(out_, value);
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_->append(value ? "true" : "false");
}

void JsonWriter::Null() {
  BeforeValue();
  out_->append("null");
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  AppendNumber(out_, value);
}

void JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  AppendNumber(out_, value);
}

void JsonWriter::Double(double value) {
  BeforeValue();
  AppendFloating(out_, value);
}

void JsonWriter::Float(float value) {
  BeforeValue();
  AppendFloating(out_, value);
}

void JsonWriter::Raw(std::string_view json) {
  BeforeValue();
  out_->append(json);
}

}  // namespace weft
