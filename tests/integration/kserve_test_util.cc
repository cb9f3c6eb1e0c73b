#include "kserve_test_util.h"

#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "frontend/http/json_writer.h"
#include "test_server.h"

namespace weft::testing {

namespace dom = simdjson::dom;

namespace {

std::string ShapeJson(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string Quote(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

std::vector<float> BytesToFloats(const std::string& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

// By value: iterating `x.get_array().value_unsafe()` directly would dangle (it refers into a temporary).
dom::array ArrayOf(dom::element e) { return e.get_array().value_unsafe(); }

Shape ParseShape(dom::element e) {
  Shape shape;
  for (dom::element d : ArrayOf(e)) shape.push_back(d.get_int64().value_unsafe());
  return shape;
}

void Flatten(dom::element e, std::vector<JsonScalar>* out) {
  switch (e.type()) {
    case dom::element_type::ARRAY:
      for (dom::element child : ArrayOf(e)) Flatten(child, out);
      break;
    case dom::element_type::BOOL: out->emplace_back(e.get_bool().value_unsafe()); break;
    case dom::element_type::INT64: out->emplace_back(e.get_int64().value_unsafe()); break;
    case dom::element_type::UINT64: out->emplace_back(e.get_uint64().value_unsafe()); break;
    case dom::element_type::DOUBLE: out->emplace_back(e.get_double().value_unsafe()); break;
    case dom::element_type::STRING: out->emplace_back(std::string(e.get_string().value_unsafe())); break;
    default: break;
  }
}

}  // namespace

std::string JsonInput(std::string_view name, std::string_view datatype, const Shape& shape,
                      std::string_view data_json) {
  return "{\"name\":" + Quote(name) + ",\"datatype\":" + Quote(datatype) + ",\"shape\":" + ShapeJson(shape) +
         ",\"data\":" + std::string(data_json) + "}";
}

std::string BinaryInput(std::string_view name, std::string_view datatype, const Shape& shape, size_t size) {
  return "{\"name\":" + Quote(name) + ",\"datatype\":" + Quote(datatype) + ",\"shape\":" + ShapeJson(shape) +
         ",\"parameters\":{\"binary_data_size\":" + std::to_string(size) + "}}";
}

std::string InferJson(const std::vector<std::string>& inputs, std::string_view extra) {
  std::string out = "{\"inputs\":[";
  for (size_t i = 0; i < inputs.size(); ++i) out += (i ? "," : "") + inputs[i];
  out += "]";
  if (!extra.empty()) out += "," + std::string(extra);
  return out + "}";
}

std::string FloatArray(std::span<const float> values) {
  std::string out;
  JsonWriter json(&out);
  json.BeginArray();
  for (float v : values) json.Float(v);
  json.EndArray();
  return out;
}

BinaryBody MakeBinaryBody(const std::string& json, const std::vector<std::string_view>& blobs) {
  BinaryBody out;
  out.body = json;
  for (std::string_view b : blobs) out.body += b;
  out.headers = {{"Inference-Header-Content-Length", std::to_string(json.size())},
                 {"Content-Type", "application/octet-stream"}};
  return out;
}

std::vector<float> ParsedOutput::Floats() const {
  if (binary) return BytesToFloats(bytes);
  std::vector<float> out;
  for (const JsonScalar& v : data) {
    if (const double* d = std::get_if<double>(&v)) out.push_back(static_cast<float>(*d));
    if (const int64_t* i = std::get_if<int64_t>(&v)) out.push_back(static_cast<float>(*i));
    if (const uint64_t* u = std::get_if<uint64_t>(&v)) out.push_back(static_cast<float>(*u));
  }
  return out;
}

const ParsedOutput* ParsedInferResponse::Find(std::string_view name) const {
  for (const auto& o : outputs) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

ParsedInferResponse ParseInferResponse(const TestResponse& response) {
  ParsedInferResponse out;
  if (!response.ok()) {
    out.error = response.error;
    return out;
  }
  size_t json_size = response.body.size();
  std::string header = response.header("Inference-Header-Content-Length");
  if (!header.empty()) json_size = std::stoul(header);
  if (json_size > response.body.size()) {
    out.error = "Inference-Header-Content-Length exceeds the body";
    return out;
  }
  dom::parser parser;
  dom::element root;
  if (auto error = parser.parse(response.body.data(), json_size).get(root)) {
    out.error = std::string("response JSON: ") + simdjson::error_message(error) + ": " + response.body;
    return out;
  }
  std::string_view s;
  if (!root["model_name"].get(s)) out.model_name = s;
  if (!root["model_version"].get(s)) out.model_version = s;
  if (!root["id"].get(s)) {
    out.id = s;
    out.has_id = true;
  }
  size_t offset = json_size;
  dom::array outputs;
  if (root["outputs"].get(outputs)) {
    out.error = "response has no outputs: " + response.body;
    return out;
  }
  for (dom::element o : outputs) {
    ParsedOutput parsed;
    parsed.name = std::string(o["name"].get_string().value_unsafe());
    parsed.datatype = std::string(o["datatype"].get_string().value_unsafe());
    parsed.shape = ParseShape(o["shape"].value_unsafe());
    uint64_t binary_size = 0;
    if (!o["parameters"]["binary_data_size"].get(binary_size)) {
      parsed.binary = true;
      if (offset + binary_size > response.body.size()) {
        out.error = "binary_data_size overruns the body";
        return out;
      }
      parsed.bytes = response.body.substr(offset, binary_size);
      offset += binary_size;
    } else {
      dom::element data;
      if (o["data"].get(data)) {
        out.error = "output '" + parsed.name + "' has neither data nor binary_data_size";
        return out;
      }
      Flatten(data, &parsed.data);
    }
    out.outputs.push_back(std::move(parsed));
  }
  if (offset != response.body.size()) out.error = "the binary section has unclaimed bytes";
  return out;
}

std::string ErrorMessage(const TestResponse& response) {
  dom::parser parser;
  std::string_view message;
  if (parser.parse(response.body)["error"].get(message)) return response.body;
  return std::string(message);
}

std::vector<float> ReferenceTensor::Floats() const { return BytesToFloats(bytes); }

const ReferenceTensor* Reference::Output(std::string_view name) const {
  for (const auto& t : outputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Reference ReadReference(const std::string& model) {
  Reference out;
  std::filesystem::path dir = SourceDir() / "examples" / "reference" / model;
  auto read = [](const std::filesystem::path& file, std::string* bytes) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return false;
    std::ostringstream s;
    s << in.rdbuf();
    *bytes = s.str();
    return true;
  };
  std::string meta_text;
  if (!read(dir / "meta.json", &meta_text)) {
    out.error = "no " + (dir / "meta.json").string() + " (run /usr/bin/python3 examples/make_models.py)";
    return out;
  }
  dom::parser parser;
  dom::element meta;
  if (parser.parse(meta_text).get(meta)) {
    out.error = "cannot parse meta.json of " + model;
    return out;
  }
  for (const char* kind : {"inputs", "outputs"}) {
    dom::object tensors;
    if (meta[kind].get(tensors)) continue;
    for (dom::key_value_pair t : tensors) {
      ReferenceTensor r;
      r.name = std::string(t.key);
      r.datatype = std::string(t.value["datatype"].get_string().value_unsafe());
      r.shape = ParseShape(t.value["shape"].value_unsafe());
      std::string file = std::string(kind == std::string_view("inputs") ? "input." : "output.") + r.name + ".bin";
      if (!read(dir / file, &r.bytes)) {
        out.error = "missing " + (dir / file).string();
        return out;
      }
      (kind == std::string_view("inputs") ? out.inputs : out.outputs).push_back(std::move(r));
    }
  }
  return out;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<float>::infinity();
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

}  // namespace weft::testing
