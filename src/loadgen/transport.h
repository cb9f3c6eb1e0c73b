#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/clock.h"
#include "loadgen/infer_request_builder.h"

namespace weft {

// How one exchange ended, as the transport saw it.
struct TransportReply {
  enum class Failure {
    kNone,     // an answer arrived; `status` says which
    kConnect,  // no connection could be made
    kIo,       // the connection failed after it was made (reset, closed mid-answer, malformed answer)
    kTimeout,  // no answer by the deadline
  };
  Failure failure = Failure::kNone;
  unsigned status = 0;  // when failure == kNone: an HTTP status, or kOutcomeGrpc + a gRPC code (run_stats.h)
  std::string body;     // the answer's body
  std::string error;    // why, when failure != kNone
};

// A PreparedRequest encoded for one transport (the bytes of an HTTP request, or a serialized gRPC message). Built
// once per run and shared, read-only, by every channel on every thread.
class WireRequest {
 public:
  virtual ~WireRequest() = default;
};

// One connection's worth of exchanges, one at a time. Not thread-safe: it lives on one io_context and is used
// only from the thread that runs it.
class Channel {
 public:
  virtual ~Channel() = default;
  // Sends `request` (from this channel's Transport) and calls `done` once on the io_context's thread, unless
  // Close() comes first. One exchange at a time: call again only after `done`. At `deadline` the exchange ends
  // as kTimeout and the connection is dropped (an HTTP/1.1 request cannot be cancelled any other way).
  // Connects on demand, and reconnects when the server closed the previous connection.
  virtual void Send(std::shared_ptr<const WireRequest> request, SteadyTime deadline,
                    std::function<void(TransportReply)> done) = 0;
  // Drops the connection; a pending `done` is never called. The channel may be destroyed afterwards at once.
  virtual void Close() = 0;
};

// The protocol the load generator speaks. Thread-safe: shared by every io thread.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::shared_ptr<const WireRequest> Encode(const PreparedRequest& request) const = 0;
  // A channel on `io`, not yet connected. `io` must outlive it.
  virtual std::shared_ptr<Channel> OpenChannel(boost::asio::io_context& io) const = 0;
};

// One exchange on a fresh channel and a private io_context, blocking the caller at most `timeout`.
TransportReply ExchangeOnce(const Transport& transport, const PreparedRequest& request,
                            std::chrono::nanoseconds timeout);

}  // namespace weft
