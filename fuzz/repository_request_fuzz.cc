// Fuzzes the HTTP bodies of the model repository routes (frontend/http/repository_codec.cc): POST
// v2/repository/index, v2/repository/models/{m}/load (with a model config as a JSON string in parameters.config)
// and .../unload.
//
// Input framing: line 1 names the route ("index", "load" or "unload"; anything else: all three), the rest is the
// request body. An index encoded from what was decoded must be valid for a round trip of its own.

#include <string>
#include <vector>

#include "base/log.h"
#include "frontend/http/repository_codec.h"
#include "fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::SetLogLevel(weft::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::FramedInput input(data, size);
  const std::string_view route = input.Line();
  const std::string_view rest = input.Rest();
  const std::span<const std::byte> body(reinterpret_cast<const std::byte*>(rest.data()), rest.size());
  const bool all = route != "index" && route != "load" && route != "unload";
  if (all || route == "index") {
    weft::Result<weft::RepositoryIndexRequest> index = weft::DecodeRepositoryIndexRequest(body);
    if (index.ok()) {
      // The index answers with names and reasons from elsewhere: the body's text stands in for them.
      std::vector<weft::RepositoryIndexEntry> entries = {{std::string(rest), 1, "READY", std::string(route)}};
      std::string json = weft::EncodeRepositoryIndex(entries);
      WEFT_CHECK(!json.empty() && json.front() == '[' && json.back() == ']') << json;
    }
  }
  if (all || route == "load") {
    weft::Result<weft::RepositoryLoadRequest> load = weft::DecodeRepositoryLoadRequest(body);
    if (load.ok() && load->config) {
      WEFT_CHECK(load->config->size() <= rest.size());
    }
  }
  if (all || route == "unload") (void)weft::DecodeRepositoryUnloadRequest(body);
  return 0;
}
