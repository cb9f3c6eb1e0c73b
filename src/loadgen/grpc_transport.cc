#include "loadgen/grpc_transport.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "base/log.h"
#include "grpc_service.grpc.pb.h"
#include "loadgen/run_stats.h"

namespace weft {

namespace {

constexpr uint16_t kDefaultGrpcPort = 8001;

std::chrono::system_clock::time_point SystemDeadline(SteadyTime deadline) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(deadline - std::chrono::steady_clock::now());
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Each channel gets a connection of its own, as each HTTP channel does, rather than sharing the process-wide
  // subchannel (one TCP connection for every channel to the same address).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

Status FromGrpc(const grpc::Status& s, const std::string& what) {
  std::string message = what + ": " + s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::OK: return Status::Ok();
    case grpc::StatusCode::NOT_FOUND: return NotFound(message);
    case grpc::StatusCode::INVALID_ARGUMENT: return InvalidArgument(message);
    case grpc::StatusCode::UNIMPLEMENTED: return Unimplemented(message);
    case grpc::StatusCode::UNAUTHENTICATED: return Unauthenticated(message);
    case grpc::StatusCode::PERMISSION_DENIED: return PermissionDenied(message);
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED: return Unavailable(message);
    default: return Internal(message);
  }
}

class GrpcWireRequest final : public WireRequest {
 public:
  std::string method;
  grpc::ByteBuffer buffer;  // the serialized message; copies share its slices
};

// One call in flight. The gRPC callback runs on a gRPC thread and hands the result to the io_context unless the
// channel was closed first; `mu` orders the two.
// Counts the calls whose ClientContext still exists. A ClientContext holds a reference to its grpc::Channel, and
// the last reference to a grpc::Channel must not be dropped on one of gRPC's callback threads: in gRPC 1.51 that
// tears down the shared callback queue from inside one of its own threads, which aborts ("prior > 0"). So the
// transport keeps every channel it opened until no context is left, and drops them on the caller's thread.
struct CallTracker {
  std::mutex mu;
  std::condition_variable idle;
  int64_t live = 0;  // guarded by mu
};

// Registers a call with the tracker for as long as it exists; a member declared before the ClientContext, so it
// is destroyed after it.
class TrackedCall {
 public:
  explicit TrackedCall(std::shared_ptr<CallTracker> tracker) : tracker_(std::move(tracker)) {
    std::lock_guard lock(tracker_->mu);
    ++tracker_->live;
  }
  ~TrackedCall() {
    std::lock_guard lock(tracker_->mu);
    if (--tracker_->live == 0) tracker_->idle.notify_all();
  }
  TrackedCall(const TrackedCall&) = delete;
  TrackedCall& operator=(const TrackedCall&) = delete;

 private:
  std::shared_ptr<CallTracker> tracker_;
};

// Metadata sent with every call (--header).
using Metadata = std::vector<std::pair<std::string, std::string>>;

struct InFlight {
  explicit InFlight(std::shared_ptr<CallTracker> tracker) : tracked(std::move(tracker)) {}
  TrackedCall tracked;  // first: destroyed last, after the context
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  std::mutex mu;
  bool closed = false;  // guarded by mu
  // io thread only: keeps the io_context running while the answer is out, and the caller's callback.
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard;
  std::function<void(TransportReply)> done;
};

class GrpcChannel final : public Channel, public std::enable_shared_from_this<GrpcChannel> {
 public:
  GrpcChannel(boost::asio::io_context& io, std::shared_ptr<grpc::Channel> channel, std::shared_ptr<CallTracker> tracker,
              std::shared_ptr<const Metadata> metadata)
      : io_(io), stub_(std::move(channel)), tracker_(std::move(tracker)), metadata_(std::move(metadata)) {}

  void Send(std::shared_ptr<const WireRequest> request, SteadyTime deadline,
            std::function<void(TransportReply)> done) override {
    WEFT_CHECK(!current_) << "GrpcChannel::Send while a call is in flight";
    auto wire = std::static_pointer_cast<const GrpcWireRequest>(std::move(request));
    auto call = std::make_shared<InFlight>(tracker_);
    call->guard.emplace(io_.get_executor());
    call->done = std::move(done);
    call->context.set_deadline(SystemDeadline(deadline));
    for (const auto& [name, value] : *metadata_) call->context.AddMetadata(name, value);
    current_ = call;
    // The callback holds no reference to this channel (see CallTracker); it hands the answer to the io thread,
    // where the channel is looked up again.
    stub_.UnaryCall(&call->context, wire->method, grpc::StubOptions(), &wire->buffer, &call->response,
                    [weak = weak_from_this(), io = &io_, call, wire](grpc::Status status) {
                      std::lock_guard lock(call->mu);
                      if (call->closed) return;  // Close() came first: `io` may be gone
                      boost::asio::post(*io, [weak, call, status = std::move(status)] {
                        if (auto self = weak.lock()) self->Finish(call, status);
                      });
                    });
  }

  void Close() override {
    std::shared_ptr<InFlight> call = std::move(current_);
    if (!call) return;
    {
      std::lock_guard lock(call->mu);
      call->closed = true;
    }
    call->guard.reset();
    call->done = nullptr;
    call->context.TryCancel();  // outside the lock: the callback may run inline
  }

 private:
  void Finish(const std::shared_ptr<InFlight>& call, const grpc::Status& status) {
    if (call != current_) return;  // closed in the meantime
    current_.reset();
    call->guard.reset();
    TransportReply reply;
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      reply.failure = TransportReply::Failure::kTimeout;
      reply.error = "no answer by the deadline";
    } else {
      reply.status = static_cast<unsigned>(kOutcomeGrpc + static_cast<int>(status.error_code()));
      reply.body = status.error_message();  // the answer's message is not read: only errors have a body here
    }
    auto done = std::move(call->done);
    if (done) done(std::move(reply));
  }

  boost::asio::io_context& io_;
  grpc::GenericStub stub_;
  const std::shared_ptr<CallTracker> tracker_;
  const std::shared_ptr<const Metadata> metadata_;
  std::shared_ptr<InFlight> current_;  // io thread only
};

void SetParameter(google::protobuf::Map<std::string, inference::InferParameter>* parameters, const std::string& key,
                  const BenchParameterValue& value) {
  if (const int64_t* number = std::get_if<int64_t>(&value)) {
    (*parameters)[key].set_int64_param(*number);
  } else {
    (*parameters)[key].set_string_param(std::get<std::string>(value));
  }
}

void SetPlacement(google::protobuf::Map<std::string, inference::InferParameter>* parameters,
                  const SharedMemoryPlacement& p) {
  (*parameters)["shared_memory_region"].set_string_param(p.region);
  (*parameters)["shared_memory_offset"].set_int64_param(static_cast<int64_t>(p.offset));
  (*parameters)["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(p.byte_size));
}

}  // namespace

Result<std::string> ParseGrpcTarget(std::string_view text) {
  std::string_view rest = text;
  if (size_t scheme = rest.find("://"); scheme != std::string_view::npos) {
    if (rest.substr(0, scheme) != "grpc") {
      return InvalidArgument("--url: with --protocol grpc the address is [grpc://]host[:port], not '" +
                             std::string(text) + "'");
    }
    rest.remove_prefix(scheme + 3);
  }
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return InvalidArgument("--url: a gRPC address has no path");
  size_t host_end = rest.starts_with('[') ? rest.find(']') : rest.rfind(':');
  if (rest.starts_with('[') && host_end == std::string_view::npos) return InvalidArgument("--url: unclosed '['");
  if (rest.starts_with('[')) ++host_end;
  std::string_view host = rest.substr(0, host_end);
  if (host.empty() || host == "[]") return InvalidArgument("--url: no host in '" + std::string(text) + "'");
  std::string_view port = host_end < rest.size() && rest[host_end] == ':' ? rest.substr(host_end + 1) : "";
  if (host_end < rest.size() && rest[host_end] != ':') return InvalidArgument("--url: bad address");
  unsigned value = kDefaultGrpcPort;
  if (!port.empty()) {
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return InvalidArgument("--url: bad port '" + std::string(port) + "'");
    }
  }
  return std::string(host) + ":" + std::to_string(value);
}

struct GrpcTransport::Impl {
  std::string target;
  std::shared_ptr<grpc::Channel> setup_channel;
  std::unique_ptr<inference::GRPCInferenceService::Stub> setup;
  std::shared_ptr<CallTracker> tracker = std::make_shared<CallTracker>();
  std::mutex mu;
  std::vector<std::shared_ptr<grpc::Channel>> channels;  // guarded by mu; every channel opened, kept (CallTracker)

  ~Impl() {
    // Bounded: a call past its deadline ends on its own, and every call here has one.
    std::unique_lock lock(tracker->mu);
    tracker->idle.wait_for(lock, std::chrono::seconds(30), [&] { return tracker->live == 0; });
  }

  std::shared_ptr<const Metadata> metadata = std::make_shared<const Metadata>();

  std::unique_ptr<grpc::ClientContext> Context(std::chrono::nanoseconds timeout) const {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(SystemDeadline(std::chrono::steady_clock::now() + timeout));
    for (const auto& [name, value] : *metadata) context->AddMetadata(name, value);
    return context;
  }
};

GrpcTransport::GrpcTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcTransport::~GrpcTransport() = default;

Result<std::unique_ptr<GrpcTransport>> GrpcTransport::Create(const std::string& target, Metadata metadata) {
  auto impl = std::make_unique<Impl>();
  impl->target = target;
  for (auto& [name, value] : metadata) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  }
  impl->metadata = std::make_shared<const Metadata>(std::move(metadata));
  impl->setup_channel = NewChannel(target);
  impl->setup = inference::GRPCInferenceService::NewStub(impl->setup_channel);
  return std::unique_ptr<GrpcTransport>(new GrpcTransport(std::move(impl)));
}

std::shared_ptr<const WireRequest> GrpcTransport::Encode(const PreparedRequest& request) const {
  auto wire = std::make_shared<GrpcWireRequest>();
  wire->method = request.target;
  grpc::Slice slice(request.body);
  wire->buffer = grpc::ByteBuffer(&slice, 1);
  return wire;
}

std::shared_ptr<Channel> GrpcTransport::OpenChannel(boost::asio::io_context& io) const {
  std::shared_ptr<grpc::Channel> channel = NewChannel(impl_->target);
  {
    std::lock_guard lock(impl_->mu);
    impl_->channels.push_back(channel);
  }
  return std::make_shared<GrpcChannel>(io, std::move(channel), impl_->tracker, impl_->metadata);
}

Result<ModelMetadata> GrpcTransport::FetchMetadata(const std::string& model, const std::string& version,
                                                   std::chrono::nanoseconds timeout) const {
  inference::ModelMetadataRequest request;
  request.set_name(model);
  request.set_version(version);
  inference::ModelMetadataResponse response;
  auto context = impl_->Context(timeout);
  WEFT_RETURN_IF_ERROR(
      FromGrpc(impl_->setup->ModelMetadata(context.get(), request, &response), "ModelMetadata at " + impl_->target));
  ModelMetadata out;
  out.name = response.name();
  for (int io = 0; io < 2; ++io) {
    const auto& tensors = io == 0 ? response.inputs() : response.outputs();
    for (const auto& t : tensors) {
      std::optional<DataType> type = DataTypeFromName(t.datatype());
      if (!type) return InvalidArgument("ModelMetadata: unknown datatype '" + t.datatype() + "'");
      (io == 0 ? out.inputs : out.outputs).push_back({t.name(), *type, {t.shape().begin(), t.shape().end()}});
    }
  }
  return out;
}

Result<int64_t> GrpcTransport::FetchMaxBatchSize(const std::string& model, const std::string& version,
                                                 std::chrono::nanoseconds timeout) const {
  inference::ModelConfigRequest request;
  request.set_name(model);
  request.set_version(version);
  inference::ModelConfigResponse response;
  auto context = impl_->Context(timeout);
  WEFT_RETURN_IF_ERROR(FromGrpc(impl_->setup->ModelConfig(context.get(), request, &response), "ModelConfig"));
  return int64_t{response.config().max_batch_size()};
}

Status GrpcTransport::RegisterSharedMemory(const std::string& region, const std::string& key, uint64_t byte_size,
                                           std::chrono::nanoseconds timeout) const {
  inference::SystemSharedMemoryRegisterRequest request;
  request.set_name(region);
  request.set_key(key);
  request.set_byte_size(byte_size);
  inference::SystemSharedMemoryRegisterResponse response;
  auto context = impl_->Context(timeout);
  return FromGrpc(impl_->setup->SystemSharedMemoryRegister(context.get(), request, &response),
                  "SystemSharedMemoryRegister '" + region + "'");
}

Status GrpcTransport::UnregisterSharedMemory(const std::string& region, std::chrono::nanoseconds timeout) const {
  inference::SystemSharedMemoryUnregisterRequest request;
  request.set_name(region);
  inference::SystemSharedMemoryUnregisterResponse response;
  auto context = impl_->Context(timeout);
  return FromGrpc(impl_->setup->SystemSharedMemoryUnregister(context.get(), request, &response),
                  "SystemSharedMemoryUnregister '" + region + "'");
}

Status GrpcTransport::RegisterCudaSharedMemory(const std::string& region, std::span<const std::byte> handle,
                                               int device_id, uint64_t byte_size,
                                               std::chrono::nanoseconds timeout) const {
  inference::CudaSharedMemoryRegisterRequest request;
  request.set_name(region);
  request.set_raw_handle(reinterpret_cast<const char*>(handle.data()), handle.size());
  request.set_device_id(device_id);
  request.set_byte_size(byte_size);
  inference::CudaSharedMemoryRegisterResponse response;
  auto context = impl_->Context(timeout);
  return FromGrpc(impl_->setup->CudaSharedMemoryRegister(context.get(), request, &response),
                  "CudaSharedMemoryRegister '" + region + "'");
}

Status GrpcTransport::UnregisterCudaSharedMemory(const std::string& region, std::chrono::nanoseconds timeout) const {
  inference::CudaSharedMemoryUnregisterRequest request;
  request.set_name(region);
  inference::CudaSharedMemoryUnregisterResponse response;
  auto context = impl_->Context(timeout);
  return FromGrpc(impl_->setup->CudaSharedMemoryUnregister(context.get(), request, &response),
                  "CudaSharedMemoryUnregister '" + region + "'");
}

PreparedRequest BuildGrpcInferRequest(const std::string& model, const std::string& version,
                                      const std::vector<GeneratedInput>& inputs, const InferRequestOptions& options) {
  inference::ModelInferRequest message;
  message.set_model_name(model);
  message.set_model_version(version);
  bool all_in_shared_memory = true;
  for (const GeneratedInput& input : inputs) {
    all_in_shared_memory = all_in_shared_memory && options.shared_memory_inputs.contains(input.name);
  }
  for (const GeneratedInput& input : inputs) {
    auto* tensor = message.add_inputs();
    tensor->set_name(input.name);
    tensor->set_datatype(std::string(DataTypeName(input.datatype)));
    for (int64_t d : input.shape) tensor->add_shape(d);
    auto shm = options.shared_memory_inputs.find(input.name);
    if (shm != options.shared_memory_inputs.end()) SetPlacement(tensor->mutable_parameters(), shm->second);
    // raw_input_contents has one entry per input or none; a shared memory input's entry stays empty.
    if (!all_in_shared_memory) {
      *message.add_raw_input_contents() = shm == options.shared_memory_inputs.end() ? input.data : "";
    }
  }
  for (const auto& [name, placement] : options.shared_memory_outputs) {
    auto* output = message.add_outputs();
    output->set_name(name);
    SetPlacement(output->mutable_parameters(), placement);
  }
  auto* parameters = message.mutable_parameters();
  if (options.priority) (*parameters)["priority"].set_int64_param(*options.priority);
  if (options.timeout_us) (*parameters)["timeout"].set_int64_param(*options.timeout_us);
  for (const auto& [key, value] : options.parameters) SetParameter(parameters, key, value);

  PreparedRequest request;
  request.method = "POST";
  request.target = "/inference.GRPCInferenceService/ModelInfer";
  request.body = message.SerializeAsString();
  return request;
}

}  // namespace weft
