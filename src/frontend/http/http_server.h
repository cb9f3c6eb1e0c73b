#pragma once

#include <boost/beast/http/field.hpp>
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

#include "auth/tls_files.h"
#include "base/clock.h"
#include "base/status.h"
#include "frontend/http/request_body.h"
#include "frontend/http/request_head.h"
#include "model/request.h"

namespace weft {

class CallerMemo;  // auth/gatekeeper.h

// One parsed HTTP request as a handler sees it.
struct HttpRequest {
  boost::beast::http::verb method = boost::beast::http::verb::unknown;
  std::string target;  // as sent: path and query
  HttpHeaders headers;
  std::shared_ptr<const RequestBody> body;  // never null; may outlive the connection (tensors view it)
  // Cancelled when the client closes the connection before the answer is written.
  std::shared_ptr<CancelToken> cancel;
  SteadyTime arrival;  // when the request header was complete
  // The subject of the client's verified certificate (CertificateSubject: "CN=camera-7,O=acme"); empty without
  // one (plain TCP, or TLS without a client certificate).
  std::string client_subject;
  // The client's IP address as text, without the port ("127.0.0.1", "2001:db8::1"; an IPv4 client of an IPv6
  // listener in IPv4 form). Empty when the socket could not tell.
  std::string peer_address;
  // What the gatekeeper keeps for this connection: valid during Handle, on its thread.
  CallerMemo* caller_memo = nullptr;

  // The target up to the query, not decoded.
  std::string_view path() const;
  // A header's value, empty when absent.
  std::string_view header(std::string_view name) const;
  // The same for a header Beast has a name for.
  std::string_view header(boost::beast::http::field name) const;
};

struct HttpResponse {
  // Bytes sent after `body` without copying them; `owner` keeps them alive until written.
  struct Segment {
    std::shared_ptr<const void> owner;
    std::span<const std::byte> bytes;
  };

  unsigned status = 200;
  // A string with static storage (every type the server sends is a literal): a std::string of this default, one
  // byte over the short-string buffer, allocated each time a response was made, three times per request.
  std::string_view content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type/-Length and Connection
  std::string body;
  std::vector<Segment> segments;
  bool close = false;  // close the connection after this response
  // Runs on the I/O thread once the response is written, or its write failed (not when a 429 replaced it).
  std::function<void()> on_written;
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
  // caller's thread (an inference runner). `build` must not block. When the server already holds its bound of
  // unsent response bytes (Options::max_unsent_response_bytes), `build` is not run, or a large answer it returns
  // is not sent, and the client gets 429 instead. `answered`, when set, learns the status the client is
  // answered with (for counting), on the I/O thread.
  void SendBuilt(std::function<HttpResponse()> build, std::function<void(unsigned status)> answered = {}) const;

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
// closed. Past max_connections a new connection is closed as soon as it is accepted; a failing accept (out of
// descriptors) is retried after a growing wait, with a bounded log.
//
// With Options::tls, every connection is HTTPS (ServerTlsContext: TLS 1.2 or newer, optionally client
// certificates): the handshake is bounded by io_timeout, a connection whose handshake fails (plain HTTP, an old
// protocol, a missing or unknown client certificate) is closed and logged at most once per 5 s, and everything
// else works as over TCP. A connection that closes says close_notify when that cannot block (no write under
// way); it never waits for the client's. The certificate files are looked at every tls.reload_interval (0 =
// never): a new connection gets the newest certificate that loaded, an open one keeps its own. Thread-safe.
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
    // Connections open at once (accepted and not yet closed); a connection past it is accepted and closed at
    // once, so that its client learns now instead of waiting in the listen backlog. 0 = no limit.
    size_t max_connections = 0;
    // Bytes of responses being written, over all connections. A response that would take the total past it is
    // replaced by 429 (with Retry-After), unless it is small (kAlwaysSentBytes) or would be the only one held.
    // 0 = no bound.
    size_t max_unsent_response_bytes = size_t{1} << 30;
    // How long Stop() without BeginShutdown gives requests in flight (see BeginShutdown).
    std::chrono::milliseconds drain_timeout = std::chrono::seconds(5);
    // During shutdown, how long a connection waiting for its next request stays open for one that is on its way
    // (sent by a client that did not know yet). A request whose first bytes came in time is read to the end.
    std::chrono::milliseconds shutdown_idle_grace = std::chrono::seconds(1);
    // A request header whose decimal value is the offset where binary data starts in the body (the binary
    // tensor data extension's Inference-Header-Content-Length). The body is laid out so that this offset is
    // aligned, which lets the first binary tensor be used in place. Empty = align the start of the body.
    std::string binary_offset_header = "Inference-Header-Content-Length";
    // HTTPS when tls.enabled(); see the class comment.
    TlsFiles tls;
  };

  // Responses up to this size are always sent, whatever max_unsent_response_bytes: refusing them saves nothing.
  static constexpr size_t kAlwaysSentBytes = 64 << 10;
  // After the shutdown deadline, how long the error answers to requests still in flight get to be written before
  // every connection is closed.
  static constexpr std::chrono::milliseconds kFinalAnswerGrace{1000};

  // `handler` must stay valid until Stop() returns.
  HttpServer(Options options, HttpHandler* handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Loads the TLS files (when enabled), binds, listens and starts the I/O threads. InvalidArgument for a bad
  // address or TLS files that do not load (naming the file and OpenSSL's reason), Unavailable when the port cannot
  // be bound. Call once.
  Status Start();
  // Begins a graceful stop and returns at once. New connections are no longer accepted (those already in the
  // listen backlog are, and treated like the others). Every connection serves what is already on its wire:
  // the request in flight, requests that have arrived or arrive within shutdown_idle_grace; the last answer on
  // each says Connection: close, then it closes. At `deadline`, a request still unanswered is answered 503 (and
  // its CancelToken fired; a later answer from the handler is dropped), and every other connection closes.
  // Later calls do nothing. Call from the owner's thread.
  void BeginShutdown(SteadyTime deadline);
  // BeginShutdown(now + drain_timeout) unless it was called, then waits until every connection has closed (at
  // most until the deadline plus kFinalAnswerGrace), closes what is left and joins the I/O threads. Idempotent;
  // call from the owner's thread, never from a handler.
  void Stop();
  // The bound port, once Start() succeeded.
  uint16_t port() const { return port_; }
  // Bytes of responses being written now, over all connections (see max_unsent_response_bytes).
  size_t unsent_response_bytes() const;
  // Connections open now.
  size_t open_connections() const;

 private:
  Options options_;
  std::shared_ptr<internal::ServerCore> core_;
  std::vector<std::jthread> threads_;
  uint16_t port_ = 0;
  bool started_ = false;
  bool shutdown_begun_ = false;
  bool stopped_ = false;
};

}  // namespace weft
