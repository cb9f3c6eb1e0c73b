// Fuzzes what `weft bench` parses (src/loadgen): the server's model metadata and model configuration replies
// (ParseModelMetadata, ParseMaxBatchSize), what it builds from them (ResolveInputShapes, GenerateInputs, and the
// request bodies of BuildInferRequest, JSON and binary), and its flags (--url for HTTP and for gRPC, --shape,
// --header, --parameter). The server is not trusted to describe a sane model: the names, types, dims and count of
// its inputs come from the network.
//
// Besides the sanitizers it checks, and aborts on a break (libFuzzer then keeps the input):
// - a URL that parses parses again from its own rendering to the same URL; a gRPC target is its own parse;
// - a --shape has a name and positive dims; a --header name is an HTTP token and its value has no control byte but
//   a tab inside it (RFC 9110's field value; a CR or LF would split the request) and no blanks at its ends;
// - resolved shapes have the metadata's count and ranks and no negative dim; generated inputs hold exactly their
//   elements (computed here without the generator's helpers); inputs over 2 GiB together are refused;
// - a JSON request body is JSON, whatever names the server gave its inputs; a binary body is its JSON header
//   (Inference-Header-Content-Length long, and JSON) followed by exactly the inputs' bytes.
//
// Input (FramedInput): lines with the --url, --shape, --header and --parameter texts, a line whose first byte picks
// the batch size (1 to 8) and whose second picks the BYTES element length (0 to 31), the model configuration reply
// (one line), then the metadata reply (the rest).

#include <simdjson.h>

#include <cctype>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "fuzz/fuzz_target.h"
#include "loadgen/bench_options.h"
#include "loadgen/grpc_transport.h"
#include "loadgen/http_transport.h"
#include "loadgen/infer_request_builder.h"
#include "loadgen/input_generator.h"
#include "loadgen/model_metadata.h"

namespace weft {
namespace {

// Inputs are generated only up to this many bytes together: the generator's own bound (2 GiB) is checked by asking
// for more, never by filling it.
constexpr unsigned __int128 kMaxGeneratedBytes = 1 << 20;
constexpr unsigned __int128 kGeneratorBound = uint64_t{2} << 30;

void CheckUrls(std::string_view text) {
  Result<HttpUrl> url = ParseHttpUrl(text);
  if (url.ok()) {
    WEFT_CHECK(!url->host.empty()) << "a URL without a host";
    WEFT_CHECK(url->base_path.empty() || (url->base_path.front() == '/' && url->base_path.back() != '/'))
        << "base path '" << url->base_path << "'";
    Result<HttpUrl> again = ParseHttpUrl(url->ToString());
    WEFT_CHECK(again.ok() && again->host == url->host && again->port == url->port && again->base_path == url->base_path)
        << "'" << url->ToString() << "' does not parse back to itself";
  }
  Result<std::string> target = ParseGrpcTarget(text);
  if (target.ok()) {
    Result<std::string> again = ParseGrpcTarget(*target);
    WEFT_CHECK(again.ok() && *again == *target) << "gRPC target '" << *target << "' does not parse to itself";
  }
}

std::vector<std::pair<std::string, std::vector<int64_t>>> CheckFlags(std::string_view shape, std::string_view header,
                                                                     std::string_view parameter) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  auto parsed_shape = ParseShapeFlag(std::string(shape));
  if (parsed_shape.ok()) {
    WEFT_CHECK(!parsed_shape->first.empty()) << "a --shape without a name";
    for (int64_t d : parsed_shape->second) WEFT_CHECK(d > 0) << "a --shape dim " << d;
    shapes.push_back(*parsed_shape);
  }
  auto parsed_header = ParseHeaderFlag(std::string(header));
  if (parsed_header.ok()) {
    const auto& [name, value] = *parsed_header;
    WEFT_CHECK(!name.empty()) << "a --header without a name";
    for (char c : name) {
      WEFT_CHECK(std::isalnum(static_cast<unsigned char>(c)) ||
                 std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos)
          << "--header name '" << name << "' is not a token";
    }
    for (char c : value) {
      WEFT_CHECK(c == '\t' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f))
          << "--header value has byte " << int(c);
    }
    WEFT_CHECK(value.empty() ||
               (value.front() != ' ' && value.front() != '\t' && value.back() != ' ' && value.back() != '\t'))
        << "--header value keeps the blanks around it";
  }
  auto parsed_parameter = ParseParameterFlag(std::string(parameter));
  if (parsed_parameter.ok()) {
    WEFT_CHECK(!parsed_parameter->first.empty()) << "a --parameter without a key";
  }
  return shapes;
}

// The bytes an input of `type` and `shape` takes, computed without the generator (BYTES: a 4-byte length and
// `string_length` characters per element), or more than kGeneratorBound when it is past it.
unsigned __int128 ExpectedBytes(DataType type, const std::vector<int64_t>& shape, int64_t string_length) {
  unsigned __int128 bytes = type == DataType::kBytes ? 4 + static_cast<uint64_t>(string_length) : DataTypeSize(type);
  for (int64_t d : shape) {
    bytes *= static_cast<uint64_t>(d);
    if (bytes > kGeneratorBound) return kGeneratorBound + 1;
  }
  return bytes;
}

void CheckJson(std::string_view json, std::string_view what) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  auto error = parser.parse(json.data(), json.size()).get(root);
  WEFT_CHECK(!error) << what << " is not JSON (" << simdjson::error_message(error) << "): " << json;
  WEFT_CHECK(root.type() == simdjson::dom::element_type::OBJECT) << what << " is not a JSON object";
}

void CheckRequests(const std::vector<GeneratedInput>& inputs) {
  PreparedRequest json = BuildInferRequest("/v2/models/m", inputs, {});
  CheckJson(json.body, "a JSON request body");

  PreparedRequest binary = BuildInferRequest("/v2/models/m", inputs, {.binary = true});
  size_t header_length = 0;
  bool found = false;
  for (const auto& [name, value] : binary.headers) {
    if (name != "Inference-Header-Content-Length") continue;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), header_length);
    WEFT_CHECK(ec == std::errc() && end == value.data() + value.size()) << "header length '" << value << "'";
    found = true;
  }
  WEFT_CHECK(found) << "a binary request without Inference-Header-Content-Length";
  size_t data = 0;
  for (const GeneratedInput& input : inputs) data += input.data.size();
  WEFT_CHECK(header_length <= binary.body.size() && binary.body.size() - header_length == data)
      << "a binary body of " << binary.body.size() << " bytes with a " << header_length << "-byte header and " << data
      << " bytes of inputs";
  CheckJson(std::string_view(binary.body).substr(0, header_length), "a binary request's JSON header");
}

void CheckModel(std::string_view config_reply, std::string_view metadata_reply, int64_t batch_size,
                int64_t string_length, const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) {
  Result<int64_t> max_batch_size = ParseMaxBatchSize(config_reply);
  if (max_batch_size.ok()) {
    WEFT_CHECK(*max_batch_size >= 0) << "max_batch_size " << *max_batch_size;
  }
  Result<ModelMetadata> metadata = ParseModelMetadata(metadata_reply);
  if (!metadata.ok()) return;
  for (const TensorMetadata& input : metadata->inputs) {
    WEFT_CHECK(input.datatype != DataType::kInvalid) << "input '" << input.name << "' has no datatype";
    for (int64_t d : input.shape) WEFT_CHECK(d >= -1) << "input '" << input.name << "' has dim " << d;
  }

  InputGenerationOptions options{.batch_size = batch_size, .string_length = string_length};
  for (const auto& [name, dims] : shapes) options.shapes[name] = dims;
  if (max_batch_size.ok()) options.max_batch_size = *max_batch_size;
  Result<std::vector<std::vector<int64_t>>> resolved = ResolveInputShapes(*metadata, options);
  if (!resolved.ok()) return;
  WEFT_CHECK(resolved->size() == metadata->inputs.size()) << "shapes for some inputs only";
  std::vector<unsigned __int128> bytes;  // each input's, in order
  unsigned __int128 total = 0;
  for (size_t i = 0; i < resolved->size(); ++i) {
    const std::vector<int64_t>& shape = (*resolved)[i];
    WEFT_CHECK(shape.size() == metadata->inputs[i].shape.size()) << "input " << i << " changed rank";
    for (int64_t d : shape) WEFT_CHECK(d >= 0) << "input " << i << " resolved to dim " << d;
    bytes.push_back(ExpectedBytes(metadata->inputs[i].datatype, shape, string_length));
    total += bytes.back();
  }
  if (total > kMaxGeneratedBytes && total <= kGeneratorBound) return;  // allowed, and too large to fill here
  if (total > kGeneratorBound) {
    // Refused before the input that passes the bound is allocated; the ones before it fit kMaxGeneratedBytes only
    // when they are small, so ask only then.
    unsigned __int128 before = 0;
    for (unsigned __int128 b : bytes) {
      if (before + b > kGeneratorBound) break;
      before += b;
    }
    if (before > kMaxGeneratedBytes) return;
    WEFT_CHECK(!GenerateInputs(*metadata, options).ok()) << "inputs over 2 GiB together were generated";
    return;
  }
  Result<std::vector<GeneratedInput>> inputs = GenerateInputs(*metadata, options);
  WEFT_CHECK(inputs.ok()) << "resolved inputs of " << static_cast<uint64_t>(total)
                          << " bytes were not generated: " << inputs.status().message();
  for (size_t i = 0; i < inputs->size(); ++i) {
    const GeneratedInput& input = (*inputs)[i];
    WEFT_CHECK(input.shape == (*resolved)[i]) << "input " << i << " generated in another shape";
    WEFT_CHECK(input.data.size() == bytes[i]) << "input '" << input.name << "' has " << input.data.size() << " bytes";
  }
  CheckRequests(*inputs);
}

}  // namespace
}  // namespace weft

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::SetLogLevel(weft::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::FramedInput input(data, size);
  weft::CheckUrls(input.Line());
  const std::string_view shape = input.Line();
  const std::string_view header = input.Line();
  const std::string_view parameter = input.Line();
  const auto shapes = weft::CheckFlags(shape, header, parameter);
  const std::string_view sizes = input.Line();
  const int64_t batch_size = sizes.empty() ? 1 : 1 + static_cast<unsigned char>(sizes[0]) % 8;
  const int64_t string_length = sizes.size() < 2 ? 16 : static_cast<unsigned char>(sizes[1]) % 32;
  const std::string_view config = input.Line();
  weft::CheckModel(config, input.Rest(), batch_size, string_length, shapes);
  return 0;
}
