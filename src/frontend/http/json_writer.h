#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/json_string.h"

namespace weft {

// Appends JSON text to a string, numbers through std::to_chars (floats in their shortest round-trip form).
// It validates nothing: the caller makes a well-formed sequence of calls. Thread-compatible.
class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  void Key(std::string_view key);

  void String(std::string_view value);
  void Bool(bool value);
  void Null();
  void Int(int64_t value);
  void Uint(uint64_t value);
  // JSON has no NaN or infinities: they are written as the strings "NaN", "Infinity" and "-Infinity", as proto3's
  // JSON mapping (and so the gRPC gateway's JSON) writes them. Bare NaN, which Triton writes, is rejected by
  // strict parsers; these strings read back as floats in Python (float(s)) and numpy (np.asarray(..., float)).
  void Double(double value);
  void Float(float value);
  // A complete JSON value rendered elsewhere (a model's configuration).
  void Raw(std::string_view json);

 private:
  void BeforeValue() {
    if (need_comma_) out_->push_back(',');
    need_comma_ = true;
  }
  void Open(char c) {
    BeforeValue();
    out_->push_back(c);
    need_comma_ = false;
  }
  void Close(char c) {
    out_->push_back(c);
    need_comma_ = true;
  }

  std::string* out_;
  bool need_comma_ = false;
};

}  // namespace weft
