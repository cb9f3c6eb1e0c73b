#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "loadgen/infer_request_builder.h"
#include "loadgen/input_generator.h"
#include "loadgen/model_metadata.h"
#include "loadgen/transport.h"

namespace weft {

// The gRPC server's address as --url gives it with --protocol grpc: [grpc://]host[:port], port 8001 when absent.
// Returns "host:port" as gRPC takes it. InvalidArgument for another scheme or a malformed address.
Result<std::string> ParseGrpcTarget(std::string_view text);

// KServe v2 over gRPC (inference.GRPCInferenceService) with gRPC's callback API. A PreparedRequest for this
// transport names the full method in `target` ("/inference.GRPCInferenceService/ModelInfer") and holds the
// serialized request message in `body` (see BuildGrpcInferRequest); it is wrapped once into a gRPC byte buffer and
// sent as it is, so no channel serializes it again. Every Channel is its own HTTP/2 connection (a local subchannel
// pool), like one HTTP connection per channel, and has one call in flight at a time. Answers carry
// kOutcomeGrpc + the status code; a call past its deadline is a timeout. Thread-safe.
class GrpcTransport final : public Transport {
 public:
  // The channel connects lazily: an unreachable server shows in the first call. `metadata` goes with every call
  // (names in lower case, as gRPC wants them).
  static Result<std::unique_ptr<GrpcTransport>> Create(const std::string& target,
                                                       std::vector<std::pair<std::string, std::string>> metadata = {});
  ~GrpcTransport() override;

  std::shared_ptr<const WireRequest> Encode(const PreparedRequest& request) const override;
  std::shared_ptr<Channel> OpenChannel(boost::asio::io_context& io) const override;

  // Set-up calls before a run, on a shared connection, each bounded by `timeout`. Unavailable when the server
  // cannot be reached; NotFound for an unknown model; other errors as the server's code maps.
  Result<ModelMetadata> FetchMetadata(const std::string& model, const std::string& version,
                                      std::chrono::nanoseconds timeout) const;
  // The model's max_batch_size from the ModelConfig RPC.
  Result<int64_t> FetchMaxBatchSize(const std::string& model, const std::string& version,
                                    std::chrono::nanoseconds timeout) const;
  Status RegisterSharedMemory(const std::string& region, const std::string& key, uint64_t byte_size,
                              std::chrono::nanoseconds timeout) const;
  Status UnregisterSharedMemory(const std::string& region, std::chrono::nanoseconds timeout) const;
  Status RegisterCudaSharedMemory(const std::string& region, std::span<const std::byte> handle, int device_id,
                                  uint64_t byte_size, std::chrono::nanoseconds timeout) const;
  Status UnregisterCudaSharedMemory(const std::string& region, std::chrono::nanoseconds timeout) const;

 private:
  struct Impl;
  explicit GrpcTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A ModelInfer request for this transport: inputs as raw_input_contents (or placed in shared memory), the
// priority, timeout and other parameters, and the shared memory outputs requested by name.
PreparedRequest BuildGrpcInferRequest(const std::string& model, const std::string& version,
                                      const std::vector<GeneratedInput>& inputs, const InferRequestOptions& options);

}  // namespace weft
