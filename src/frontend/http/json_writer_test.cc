#include "frontend/http/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace weft {
namespace {

TEST(JsonWriterTest, NestsWithCommasInTheRightPlaces) {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject();
  json.Key("a");
  json.BeginArray();
  json.Int(1);
  json.BeginObject();
  json.EndObject();
  json.BeginArray();
  json.EndArray();
  json.Bool(false);
  json.Null();
  json.EndArray();
  json.Key("b");
  json.Raw("{\"x\":1}");
  json.Key("c");
  json.String("s");
  json.EndObject();
  EXPECT_EQ(out, R"({"a":[1,{},[],false,null],"b":{"x":1},"c":"s"})");
}

TEST(JsonWriterTest, EscapesWhatJsonRequires) {
  std::string out;
  AppendJsonString(&out, std::string("q\"b\\n\n\t\x01\x1f/\xc3\xa9", 12));
  EXPECT_EQ(out, "\"q\\\"b\\\\n\\n\\t\\u0001\\u001f/\xc3\xa9\"");
}

TEST(JsonWriterTest, NumbersAreShortestRoundTrip) {
  std::string out;
  JsonWriter json(&out);
  json.BeginArray();
  json.Float(0.1f);
  json.Double(0.1);
  json.Float(1e30f);
  json.Int(std::numeric_limits<int64_t>::min());
  json.Uint(std::numeric_limits<uint64_t>::max());
  json.Float(-0.0f);
  json.Double(std::nan(""));
  json.Double(-std::numeric_limits<double>::infinity());
  json.Float(std::numeric_limits<float>::infinity());
  json.EndArray();
  EXPECT_EQ(out, "[0.1,0.1,1e+30,-9223372036854775808,18446744073709551615,-0,\"NaN\",\"-Infinity\",\"Infinity\"]");
}

}  // namespace
}  // namespace weft
