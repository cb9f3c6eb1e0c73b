#pragma once

#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "frontend/http/request_body.h"
#include "model/request.h"

namespace weft {

// One parsed HTTP request as a handler sees it.
struct HttpRequest {
  boost::beast::http::verb method = boost::beast::http::verb::unknown;
  std::string target;  // as sent: path and query
  boost::beast::http::fields headers;
  std::shared_ptr<const RequestBody> body;  // never null; may outlive the connection (tensors view it)
  // Cancelled when the client closes the connection before the answer is written.
  std::shared_ptr<CancelToken> cancel;
  SteadyTime arrival;  // when the request header was complete

  // The target up to the query, not decoded.
  std::string_view path() const;
  // A header's value, empty when absent.
  std::string_view header(std::string_view name) const;
};

struct HttpResponse {
  // Bytes sent after `body` without copying them; `owner` keeps them alive until written.
  struct Segment {
    std::shared_ptr<const void> owner;
    std::span<const std::byte> bytes;
  };

  unsigned status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type/-Length and Connection
  std::string body;
  std::vector<Segment> segments;
  bool close = false;  // close the connection after this response
};

namespace internal {
class PendingReply;
}

// Answers one request. Copyable; every copy answers the same request. Thread-safe: may be used from any thread,
// now or later; the answer is written on the connection's I/O thread. Only the first answer counts. If no copy
// answers before the last one is destroyed, the client gets a 500. An answer for a client that has gone away is
// dropped.
class HttpResponder {
 public:
  void Send(HttpResponse response) const;
  // Runs `build` on the connection's I/O thread and sends what it returns: keeps response encoding off the
  // caller's thread (an inference runner). `build` must not block.
  void SendBuilt(std::function<HttpResponse()> build) const;

 private:
  friend class internal::PendingReply;
  explicit HttpResponder(std::shared_ptr<internal::PendingReply> reply) : reply_(std::move(reply)) {}
  std::shared_ptr<internal::PendingReply> reply_;
};

// Application logic behind an HttpServer. Thread-safe: called concurrently from every I/O thread.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Called on an I/O thread once the whole request is read. Must not block: long work answers later through
  // `responder`. Must not throw (an exception is logged and answered with 500).
  virtual void Handle(HttpRequest request, HttpResponder responder) = 0;
};

namespace internal {
struct ServerCore;
}

// An HTTP/1.1 server on Boost.Beast: a few I/O threads run every connection (no thread per connection), with
// keep-alive, one request at a time per connection, and a watch on the socket while a request is in flight so
// that a client that goes away cancels its request. Bodies over the limit are answered 413 and the connection is
// closed. Thread-safe.
class HttpServer {
 public:
  struct Options {
    std::string address = "0.0.0.0";
    uint16_t port = 0;  // 0 = an ephemeral port; see port()
    int io_threads = 2;
    size_t max_body_bytes = size_t{64} << 20;
    size_t max_header_bytes = 16 << 10;
    // Bounds reading one request (header, then body), writing one response, and how long an idle keep-alive
    // connection stays open.
    std::chrono::milliseconds io_timeout = std::chrono::seconds(60);
    // How long Stop() waits for the answers to requests in flight before it closes their connections.
    std::chrono::milliseconds drain_timeout = std::chrono::seconds(5);
    // A request header whose decimal value is the offset where binary data starts in the body (the binary
    // tensor data extension's Inference-Header-Content-Length). The body is laid out so that this offset is
    // aligned, which lets the first binary tensor be used in place. Empty = align the start of the body.
    std::string binary_offset_header = "Inference-Header-Content-Length";
  };

  // `handler` must stay valid until Stop() returns.
  HttpServer(Options options, HttpHandler* handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the I/O threads. InvalidArgument for a bad address, Unavailable when the port
  // cannot be bound. Call once.
  Status Start();
  // Stops accepting and closes idle connections; a connection with a request in flight gets its answer (with
  // Connection: close) if it comes within drain_timeout, else it is closed and the request cancelled (its answer
  // is dropped). Then joins the I/O threads. Idempotent; call from the owner's thread, never from a handler.
  void Stop();
  // The bound port, once Start() succeeded.
  uint16_t port() const { return port_; }

 private:
  Options options_;
  std::shared_ptr<internal::ServerCore> core_;
  std::vector<std::jthread> threads_;
  uint16_t port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace weft
