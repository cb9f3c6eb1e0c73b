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
    out->append("\"NaN\"");
  } else if (std::isinf(value)) {
    out->append(value > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  } else {
    AppendNumber(out, value);
  }
}

}  // namespace

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
