#include "frontend/http/http_server.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <charconv>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <variant>

#include "auth/certificate_subject.h"
#include "auth/gatekeeper.h"
#include "base/ascii.h"
#include "base/json_string.h"
#include "base/log.h"
#include "base/retry.h"
#include "base/thread_name.h"
#include "frontend/http/tls_context.h"
#include "frontend/http/tls_socket.h"
#include "frontend/http/unsent_bytes.h"

namespace weft {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;
// A connection's timer, on its socket's executor type (TcpSocket, tls_socket.h).
using ConnectionTimer =
    net::basic_waitable_timer<std::chrono::steady_clock, net::wait_traits<std::chrono::steady_clock>,
                              net::io_context::executor_type>;

namespace {

// While a request is in flight the connection keeps one read pending to notice a disconnect. Bytes that arrive
// then belong to the next request; past this many the watch stops rather than buffer without bound.
constexpr size_t kWatchReadChunk = 4096;
// A read for a request's head asks for up to this much (as Beast's reads do): a body's first bytes come with it.
constexpr size_t kHeadReadChunk = 65536;
// After a response that closes the connection, unread request bytes are drained this long so that the client
// sees the response instead of a reset (a 413 is usually sent while the client is still sending).
constexpr std::chrono::milliseconds kLingerOnClose{2000};
// Lines about failing accepts, refused connections and failed TLS handshakes: at most one per this long, each
// with a count.
constexpr std::chrono::seconds kAcceptLogInterval{5};
// A closing TLS connection gets this long (at most io_timeout) to write its close_notify, for a client that has
// stopped reading.
constexpr std::chrono::milliseconds kCloseNotifyWait{1000};
// Connections taken from the listen backlog in one go, at most: by BeginShutdown (to serve them) and when out of
// descriptors (to close them).
constexpr int kBacklogTakenAtOnce = 4096;

// The body byte that `header` names (the binary tensor data extension's offset), 0 when the header is absent or
// not a number: RequestBody::Prepare aligns it.
size_t BinaryAnchor(const HttpHeaders& headers, const std::string& header) {
  if (header.empty()) return 0;
  std::string_view text = headers.Find(header);
  size_t offset = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), offset);
  return err == std::errc() && end == text.data() + text.size() ? offset : 0;
}

// A completion condition for reading a body of known length straight into its buffer: each read asks the socket
// for everything that is still missing (asio's transfer_all would cap every read at 64 KiB).
struct TransferRest {
  size_t operator()(const error_code& ec, size_t) const { return ec ? 0 : std::numeric_limits<size_t>::max(); }
};

// Writing a response: each write hands the socket up to this much (asio's default caps it at 64 KiB); the kernel
// takes what fits in its send buffer.
struct TransferLargeChunks {
  size_t operator()(const error_code& ec, size_t) const { return ec ? 0 : size_t{4} << 20; }
};

// The body that Beast's parser fills, for chunked bodies: a RequestBody placed so that the binary offset named by
// a header is aligned. A body with a Content-Length is read straight into its RequestBody instead
// (Connection::ReadBodyInPlace).
struct IncomingBody {
  struct value_type {
    RequestBody body;
    size_t binary_anchor = 0;  // set once the head is read, before the body
  };

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(http::header<isRequest, Fields>&, value_type& value) : value_(value) {}

    void init(const boost::optional<std::uint64_t>& length, error_code& ec) {
      // The parser has already checked a declared length against the body limit.
      value_.body.Prepare(length ? static_cast<size_t>(*length) : 0, value_.binary_anchor);
      ec = {};
    }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, error_code& ec) {
      size_t n = net::buffer_size(buffers);
      std::byte* at = value_.body.Append(n);
      net::buffer_copy(net::buffer(at, n), buffers);
      ec = {};
      return n;
    }

    void finish(error_code& ec) { ec = {}; }

   private:
    value_type& value_;
  };
};

std::string_view ReasonPhrase(unsigned status) {
  if (status == 499) return "Client Closed Request";  // nginx's code; Beast does not know it
  std::string_view reason(http::obsolete_reason(http::int_to_status(status)));
  return reason == "<unknown-status>" ? "Unknown" : reason;
}

bool IsDisconnect(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe || ec == net::error::operation_aborted ||
         ec == net::error::bad_descriptor || ec == net::ssl::error::stream_truncated;
}

// A TLS record that does not decrypt, an alert from the client: the stream can carry no answer any more.
bool IsTlsFailure(const error_code& ec) {
  return ec.category() == net::error::get_ssl_category() || ec.category() == net::ssl::error::get_stream_category();
}

// The client's address for HttpRequest::peer_address: an IPv4 client of an IPv6 listener in IPv4 form, so that a
// client has one name whatever the listener.
std::string PeerAddress(const TcpSocket& socket) {
  error_code ec;
  tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return {};
  net::ip::address address = peer.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6());
  }
  return address.to_string(ec);
}

HttpResponse PlainError(unsigned status, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.body = "{\"error\":";
  AppendJsonString(&r.body, message);
  r.body += "}";
  r.close = true;
  return r;
}

// What a client gets instead of an answer that would take the unsent response bytes past their bound. 429, as for
// the engine's byte budget: the server is fine, only busy, and the client may retry.
HttpResponse UnsentBoundResponse(const UnsentBytes& unsent, bool close) {
  HttpResponse r = PlainError(429, "the server holds " + std::to_string(unsent.held()) +
                                       " bytes of responses that their clients have not read yet (its bound is " +
                                       std::to_string(unsent.bound()) + "): retry later");
  r.headers.emplace_back("Retry-After", "1");
  r.close = close;
  return r;
}

// Out of descriptors (or kernel memory): the next accept fails the same way until something is closed.
bool IsResourceExhaustion(const error_code& ec) {
  return ec == net::error::no_descriptors || ec == boost::system::errc::too_many_files_open_in_system ||
         ec == net::error::no_buffer_space || ec == net::error::no_memory;
}

// One io_context per I/O thread, run by that thread alone (concurrency hint 1).
std::vector<std::unique_ptr<net::io_context>> MakeContexts(int threads) {
  std::vector<std::unique_ptr<net::io_context>> contexts;
  for (int i = 0; i < std::max(1, threads); ++i) contexts.push_back(std::make_unique<net::io_context>(1));
  return contexts;
}

}  // namespace

namespace internal {

class Connection;

// State shared by the server, its connections and their responders. Connections keep it alive, so that the
// io_contexts outlive every socket even when a responder releases the last connection after the server is gone.
struct ServerCore : std::enable_shared_from_this<ServerCore> {
  ServerCore(HttpServer::Options o, HttpHandler* h)
      : contexts(MakeContexts(o.io_threads)),
        acceptor(net::make_strand(*contexts[0])),
        accept_timer(acceptor.get_executor()),
        deadline_timer(net::make_strand(*contexts[0])),
        reload_timer(net::make_strand(*contexts[0])),
        options(std::move(o)),
        handler(h),
        unsent(options.max_unsent_response_bytes, HttpServer::kAlwaysSentBytes) {
    for (auto& context : contexts) work.emplace_back(context->get_executor());
  }

  // Each connection lives on one context, its thread's: its reads, its writes and the answer that the scheduler
  // posts to it stay on one thread, with no strand, and no two threads share a queue or wake each other. One
  // shared io_context cost 14% more server CPU per request at 64 connections (docs/benchmarks.md, issue 15). The
  // acceptor and the server's timers live on the first.
  std::vector<std::unique_ptr<net::io_context>> contexts;
  size_t next_context = 0;  // see NextContext
  tcp::acceptor acceptor;
  net::steady_timer accept_timer;    // on the acceptor's strand: the wait after a failed accept
  net::steady_timer deadline_timer;  // the shutdown deadline; used on its strand only
  net::steady_timer reload_timer;    // the next look at the TLS files; used on its strand only
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work;  // one per context, until Stop
  const HttpServer::Options options;
  HttpHandler* const handler;
  UnsentBytes unsent;
  std::atomic<uint64_t> answered_at_deadline{0};
  // Set by Start before the first connection (null without TLS), constant after.
  std::unique_ptr<ServerTlsContext> tls;

  // Failed TLS handshakes happen on every I/O thread.
  std::mutex handshake_log_mu;
  LogRateLimiter handshake_log{kAcceptLogInterval};  // guarded by handshake_log_mu

  // Used on the acceptor's strand only.
  Backoff backoff;
  LogRateLimiter accept_log{kAcceptLogInterval};
  LogRateLimiter limit_log{kAcceptLogInterval};
  uint64_t shed_since_log = 0;  // connections closed for want of a descriptor since the last accept_log line
  // Given up when accept runs out of descriptors, so that the backlog is closed rather than left to time out.
  SpareDescriptor spare;

  mutable std::mutex mu;
  // False before Start and once Stop has drained: nothing new is posted to the contexts then.
  bool running = false;  // guarded by mu
  // True from the moment the shutdown begins: no new connections, and each connection closes after its answer.
  bool stopping = false;            // guarded by mu
  SteadyTime deadline;              // guarded by mu; of the shutdown, once stopping
  size_t open_connections = 0;      // accepted and not yet closed; guarded by mu
  std::condition_variable drained;  // signalled when open_connections drops to 0
  std::unordered_map<const Connection*, std::weak_ptr<Connection>> connections;  // guarded by mu

  // The context that the next accepted connection lives on: each in turn. On the acceptor's strand.
  net::io_context& NextContext() { return *contexts[next_context++ % contexts.size()]; }

  // The connections still alive, to post work to. Under mu.
  std::vector<std::shared_ptr<Connection>> LiveConnectionsLocked() const {
    std::vector<std::shared_ptr<Connection>> live;
    for (const auto& [_, weak] : connections) {
      if (auto c = weak.lock()) live.push_back(std::move(c));
    }
    return live;
  }
};

// One client connection, over TCP or TLS: one class for both, with the stream in a variant, so that the plain path
// pays a branch per I/O operation and no virtual call. All its members are used on its context's thread only.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `tls_context` null: plain TCP.
  Connection(std::shared_ptr<ServerCore> core, TcpSocket socket, std::shared_ptr<net::ssl::context> tls_context)
      : core_(std::move(core)),
        tls_context_(std::move(tls_context)),
        peer_address_(PeerAddress(socket)),
        stream_(MakeStream(std::move(socket), tls_context_.get())),
        timer_(Socket().get_executor()) {}

  ~Connection() {
    std::lock_guard lock(core_->mu);
    core_->connections.erase(this);
    if (!closed_ && --core_->open_connections == 0) core_->drained.notify_all();
  }

  ServerCore& core() { return *core_; }
  TcpSocket::executor_type executor() { return Socket().get_executor(); }

  // `shutting_down`: accepted after the shutdown began (from the backlog).
  void Start(bool shutting_down) {
    net::dispatch(executor(), [self = shared_from_this(), shutting_down] {
      if (TlsSocket* tls = self->Tls()) {
        if (shutting_down) self->BeginShutdown();  // OnHandshake arms the grace
        self->handshaking_ = true;
        self->ArmTimer(self->core_->options.io_timeout);
        tls->async_handshake([self](error_code ec) { self->OnHandshake(ec); });
        return;
      }
      self->ReadRequest();
      if (shutting_down) self->BeginShutdown();
    });
  }

  // The handler's answer to the request in flight. Dropped when the connection is closed or has answered
  // already (the shutdown deadline's 503); `answered` learns the status either way.
  void Reply(HttpResponse response, const std::function<void(unsigned)>& answered = {}) {
    if (closed_ || !in_flight_ || writing_) {
      if (answered) answered(response.status);
      return;
    }
    WriteResponse(std::move(response), answered);
  }

  // The shutdown has begun: what is on the wire is still read and answered, the last answer with Connection:
  // close. A connection waiting for its next request waits only shutdown_idle_grace more.
  void BeginShutdown() {
    if (shutting_down_ || closed_) return;
    shutting_down_ = true;
    if (awaiting_request_) ArmShutdownGrace();
  }

  // The shutdown deadline: a request still unanswered is answered 503; a connection with no request in flight
  // closes (one whose answer is being written gets until Stop's final grace).
  void Expire() {
    expired_ = true;
    if (closed_ || writing_) return;
    if (!in_flight_) return Close();
    HttpResponse r = PlainError(503,
                                "the server is shutting down and the request was not answered within its exit "
                                "timeout");
    r.close = false;  // the client is not sending: close at once after it, without lingering (expired_ closes)
    WriteResponse(std::move(r));
    core_->answered_at_deadline.fetch_add(1, std::memory_order_relaxed);
    // After the answer is under way, so that whatever the cancellation triggers finds the request answered.
    if (cancel_) cancel_->Cancel();
  }

  // Over TLS, says close_notify first when that cannot block (StartTlsShutdown) and closes the socket once it is
  // written, or after kCloseNotifyWait.
  void Close() {
    if (closed_) return;
    MarkClosed();
    if (!tls_shutdown_started_ && StartTlsShutdown()) {
      timer_.expires_after(std::min<std::chrono::milliseconds>(kCloseNotifyWait, core_->options.io_timeout));
      timer_.async_wait([self = shared_from_this()](error_code ec) {
        if (!ec) self->CloseSocket();
      });
      return;
    }
    CloseSocket();
  }

  // Stop's last step: closes at once, also a connection still writing its close_notify.
  void CloseNow() {
    if (!closed_) MarkClosed();
    CloseSocket();
  }

 private:
  using Stream = std::variant<TcpSocket, TlsSocket>;

  static Stream MakeStream(TcpSocket socket, net::ssl::context* tls_context) {
    if (tls_context == nullptr) return Stream(std::in_place_type<TcpSocket>, std::move(socket));
    return Stream(std::in_place_type<TlsSocket>, std::move(socket), *tls_context);
  }

  TlsSocket* Tls() { return std::get_if<TlsSocket>(&stream_); }
  TcpSocket& Socket() {
    if (TlsSocket* tls = Tls()) return tls->next_layer();
    return *std::get_if<TcpSocket>(&stream_);
  }
  // Runs `op(stream)` with the stream as its own type, to start an asynchronous read or write on it.
  template <typename Op>
  void WithStream(Op&& op) {
    if (TlsSocket* tls = Tls()) return op(*tls);
    op(*std::get_if<TcpSocket>(&stream_));
  }

  void MarkClosed() {
    closed_ = true;
    {
      std::lock_guard lock(core_->mu);
      if (--core_->open_connections == 0) core_->drained.notify_all();
    }
    if (in_flight_ && cancel_) cancel_->Cancel();
  }

  void CloseSocket() {
    error_code ec;
    Socket().shutdown(TcpSocket::shutdown_both, ec);
    Socket().close(ec);
    timer_.cancel();
  }

  void OnHandshake(const error_code& ec) {
    handshaking_ = false;
    if (closed_) return;
    if (ec) {
      LogHandshakeFailure(ec.message());
      return Close();  // no close_notify: the handshake did not complete
    }
    SSL* ssl = Tls()->native_handle();
    if (X509* certificate = SSL_get0_peer_certificate(ssl); certificate && SSL_get_verify_result(ssl) == X509_V_OK) {
      client_subject_ = CertificateSubject(certificate);
    }
    ReadRequest();
    if (shutting_down_) ArmShutdownGrace();
  }

  void LogHandshakeFailure(std::string_view why) {
    uint64_t held_back = 0;
    {
      std::lock_guard lock(core_->handshake_log_mu);
      if (!core_->handshake_log.Allow(std::chrono::steady_clock::now(), &held_back)) return;
    }
    WEFT_LOG(Warning) << "TLS handshake with " << peer_address_ << " failed: " << why
                      << (held_back ? " (" + std::to_string(held_back) + " more since the last line)" : "");
  }

  // Starts writing a TLS close_notify, unless that could block or fail: no TLS, a handshake that did not complete
  // or a stream that failed (OpenSSL is "in init" then), or a write under way (the alert would queue behind it).
  // Marks the connection as having received the client's close_notify too, so that SSL_shutdown returns once ours
  // is written instead of reading until the client sends its own. Completes in OnTlsShutdown.
  bool StartTlsShutdown() {
    TlsSocket* tls = Tls();
    if (tls == nullptr || writing_ || tls_shutdown_started_) return false;
    SSL* ssl = tls->native_handle();
    if (SSL_in_init(ssl)) return false;
    tls_shutdown_started_ = true;
    SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_RECEIVED_SHUTDOWN);
    tls->async_shutdown([self = shared_from_this()](error_code ec) { self->OnTlsShutdown(ec); });
    return true;
  }

  void OnTlsShutdown(const error_code& ec) {
    if (closed_) return CloseSocket();
    // A lingering close: the client has its answer and the close_notify; what it still sends is read from the
    // socket and dropped, as over TCP, until it closes or the linger time ends.
    if (ec) return Close();
    error_code ignored;
    Socket().shutdown(TcpSocket::shutdown_send, ignored);
    DrainSocket();
  }

  void DrainSocket() {
    // Not into buffer_: a watch still pending on the TLS stream may write there.
    if (!drain_scratch_) drain_scratch_ = std::make_unique<std::array<std::byte, kWatchReadChunk>>();
    Socket().async_read_some(net::buffer(*drain_scratch_), [self = shared_from_this()](error_code ec, size_t) {
      if (self->closed_) return;
      if (ec) return self->Close();
      self->DrainSocket();
    });
  }

  // A request's head is read and parsed here (request_head.h, docs/architecture.md), and Beast's parser is kept for
  // chunked bodies only: Beast 1.81 checks a head byte by byte and allocates each field, which was a third of what
  // a JWT costs a request.
  void ReadRequest() {
    if (closed_) return;
    head_scanned_ = 0;
    ArmTimer(core_->options.io_timeout);
    ReadHead();
  }

  std::string_view BufferedText() const { return {static_cast<const char*>(buffer_.data().data()), buffer_.size()}; }

  void ReadHead() {
    if (head_scanned_ == 0) buffer_.consume(EmptyLinesAtStart(BufferedText()));
    const std::string_view buffered = BufferedText();
    Result<std::optional<size_t>> end = FindRequestHeadEnd(buffered, &head_scanned_);
    if (!end.ok()) return RefuseMalformed(end.status().message());
    if (*end) return OnHead(**end);
    if (buffer_.size() >= core_->options.max_header_bytes) return OnReadError(http::error::header_limit);
    awaiting_request_ = true;
    WithStream([&](auto& stream) {
      stream.async_read_some(buffer_.prepare(beast::read_size(buffer_, kHeadReadChunk)),
                             [self = shared_from_this()](error_code ec, size_t n) { self->OnHeadBytes(ec, n); });
    });
  }

  void OnHeadBytes(error_code ec, size_t n) {
    awaiting_request_ = false;
    if (closed_) return;
    if (ec == net::error::operation_aborted && idle_closing_ && buffer_.size() > 0) {
      // The shutdown's idle close raced with a request's first bytes: read it after all.
      idle_closing_ = false;
      return ReadRequest();
    }
    if (ec) return OnReadError(ec);
    buffer_.commit(n);
    ReadHead();
  }

  void OnHead(size_t head_bytes) {
    if (head_bytes > core_->options.max_header_bytes) return OnReadError(http::error::header_limit);
    Status parsed =
        ParseRequestHead(std::string_view(static_cast<const char*>(buffer_.data().data()), head_bytes), &request_head_);
    if (!parsed.ok()) return RefuseMalformed(parsed.message());
    // A chunked body: Beast's parser reads the request, the head again from buffer_ and then the chunks.
    if (request_head_.transfer_encoding) return ReadChunkedRequest();
    buffer_.consume(head_bytes);
    if (request_head_.content_length.value_or(0) > core_->options.max_body_bytes) {
      return OnReadError(http::error::body_limit);
    }
    BeginBody();
  }

  size_t ChunkedReadCap() const { return core_->options.max_header_bytes + 2 * kHeadReadChunk; }

  void ReadChunkedRequest() {
    // Beast's parser reads until a chunk's size line or the trailer ends, and nothing else bounds those: without a
    // cap on buffer_, a line that never ends would grow it until the read deadline (http::error::buffer_overflow
    // answers 400 instead). The cap holds what the head's read may already have buffered.
    buffer_.max_size(ChunkedReadCap());
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(core_->options.max_header_bytes));
    parser_->body_limit(core_->options.max_body_bytes);
    WithStream([&](auto& stream) {
      http::async_read_header(stream, buffer_, *parser_,
                              [self = shared_from_this()](error_code ec, size_t) { self->OnChunkedHead(ec); });
    });
  }

  void OnChunkedHead(error_code ec) {
    if (closed_) return;
    if (ec) return OnReadError(ec);
    const auto& message = parser_->get();
    request_head_ = RequestHead();
    request_head_.method = message.method();
    request_head_.target = std::string(message.target());
    request_head_.version = message.version();
    for (const auto& field : message) request_head_.headers.Add(field.name_string(), field.value());
    request_head_.transfer_encoding = true;
    request_head_.keep_alive = message.keep_alive();
    request_head_.expect_continue = EqualsIgnoringAsciiCase(message[http::field::expect], "100-continue");
    parser_->get().body().binary_anchor = BinaryAnchor(request_head_.headers, core_->options.binary_offset_header);
    BeginBody();
  }

  bool HasBody() const {
    return request_head_.transfer_encoding ? !parser_->is_done() : request_head_.content_length.value_or(0) > 0;
  }

  void BeginBody() {
    idle_closing_ = false;
    arrival_ = std::chrono::steady_clock::now();
    if (HasBody() && request_head_.expect_continue) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      WithStream([&](auto& stream) {
        net::async_write(stream, net::buffer(kContinue.data(), kContinue.size()),
                         [self = shared_from_this()](error_code ec, size_t) {
                           if (self->closed_) return;
                           if (ec) return self->Close();
                           self->ReadBody();
                         });
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    if (!HasBody()) return Dispatch(RequestBody());
    if (!request_head_.transfer_encoding) return ReadBodyInPlace(*request_head_.content_length);
    // Chunked: Beast's parser assembles the chunks into the RequestBody, through buffer_.
    ArmTimer(core_->options.io_timeout);
    WithStream([&](auto& stream) {
      http::async_read(stream, buffer_, *parser_,
                       [self = shared_from_this()](error_code ec, size_t) { self->OnChunkedBody(ec); });
    });
  }

  void OnChunkedBody(error_code ec) {
    if (closed_) return;
    if (ec) return OnReadError(ec);
    Dispatch(std::move(parser_->get().body().body));
  }

  // A body of known length goes straight from the socket into its RequestBody, allocated once at its full size:
  // what the header read already buffered is copied over, the rest is read in place with reads as large as the
  // socket allows. (Through Beast's parser every byte was copied once more, and each read was only as large as
  // buffer_'s free capacity, a few KiB for a buffer that holds headers: thousands of reads for 16 MB.)
  void ReadBodyInPlace(std::uint64_t length) {
    // The parser checked the declared length against the limit with the header; this holds it here too.
    if (length > core_->options.max_body_bytes) return OnReadError(http::error::body_limit);
    body_ = RequestBody();
    body_.Prepare(static_cast<size_t>(length),
                  BinaryAnchor(request_head_.headers, core_->options.binary_offset_header));
    std::byte* at = body_.Append(static_cast<size_t>(length));
    // Bytes after the body belong to the next (pipelined) request and stay in buffer_.
    size_t buffered = std::min<size_t>(buffer_.size(), static_cast<size_t>(length));
    net::buffer_copy(net::buffer(at, buffered), buffer_.data());
    buffer_.consume(buffered);
    if (buffered == length) return Dispatch(std::move(body_));
    ArmTimer(core_->options.io_timeout);
    WithStream([&](auto& stream) {
      net::async_read(stream, net::buffer(at + buffered, static_cast<size_t>(length) - buffered), TransferRest(),
                      [self = shared_from_this()](error_code ec, size_t) { self->OnBodyInPlace(ec); });
    });
  }

  void OnBodyInPlace(error_code ec) {
    if (closed_) return;
    if (ec) {
      body_ = RequestBody();
      return OnReadError(ec);  // end of stream before the last byte: a client that left mid-body just goes away
    }
    Dispatch(std::move(body_));
  }

  // Back to reading heads with weft's own parser, and to an uncapped buffer_ (the watch and the drain may prepare
  // a read into it at any size).
  void EndChunkedRead() {
    parser_.reset();
    buffer_.max_size(std::numeric_limits<size_t>::max());
  }

  void OnReadError(const error_code& ec) {
    EndChunkedRead();
    keep_alive_ = false;
    method_ = http::verb::unknown;
    if (ec == http::error::body_limit) {
      WriteResponse(PlainError(
          413, "request body exceeds the limit of " + std::to_string(core_->options.max_body_bytes) + " bytes"));
    } else if (ec == http::error::header_limit) {
      WriteResponse(PlainError(431, "request header is too large"));
    } else if (ec == http::error::buffer_overflow) {
      RefuseMalformed("a chunk's size line or the trailer is longer than " + std::to_string(ChunkedReadCap()) +
                      " bytes");
    } else if (IsDisconnect(ec) || IsTlsFailure(ec)) {
      Close();  // a client that leaves mid-request just goes away
    } else {
      RefuseMalformed(ec.message());
    }
  }

  void RefuseMalformed(std::string_view why) {
    EndChunkedRead();
    keep_alive_ = false;
    method_ = http::verb::unknown;
    WriteResponse(PlainError(400, "malformed HTTP request: " + std::string(why)));
  }

  void Dispatch(RequestBody body);  // below PendingReply

  // Keeps a read pending so that a peer that closes (or resets) is noticed at once, while a request is in
  // flight, while its answer is written, while the connection idles, and while draining before a close.
  // Pipelined bytes end the watch: they are parsed as the next request once the answer is written.
  void WatchSocket() {
    if (watching_ || closed_ || (buffer_.size() > 0 && !draining_)) return;
    watching_ = true;
    WithStream([&](auto& stream) {
      stream.async_read_some(buffer_.prepare(kWatchReadChunk),
                             [self = shared_from_this()](error_code ec, size_t n) { self->OnWatch(ec, n); });
    });
  }

  void OnWatch(error_code ec, size_t n) {
    watching_ = false;
    if (closed_) return;
    // A TLS lingering close reads the socket itself (OnTlsShutdown); this read just ends.
    if (draining_ && Tls()) return;
    if (ec) {
      if (in_flight_) {
        WEFT_LOG(Debug) << "client went away while its request was in flight";
      }
      return Close();  // cancels the request in flight, if any
    }
    buffer_.commit(n);
    if (draining_) {
      buffer_.clear();
      return WatchSocket();
    }
    if (in_flight_ || writing_) return;  // the next request waits in buffer_
    idle_closing_ = false;
    ReadRequest();
  }

  // Bytes of a next request already here: in the buffer (pipelined), in the socket, or over TLS read from the
  // socket and not yet taken from OpenSSL (records not decrypted yet, or decrypted and not read).
  bool MoreRequestBytes() {
    error_code ec;
    if (buffer_.size() > 0 || Socket().available(ec) > 0) return true;
    TlsSocket* tls = Tls();
    return tls != nullptr && tls->HasPendingInput();
  }

  // Puts the response's head and body into head_ and buffers_; returns the bytes they hold.
  size_t Frame() {
    // During shutdown the connection closes after this answer unless a next request is already here (it was on
    // the wire before the client could know).
    close_after_ = out_.close || !keep_alive_ || expired_ || (shutting_down_ && !MoreRequestBytes());
    close_requested_ = out_.close;
    size_t length = out_.body.size();
    for (const auto& s : out_.segments) length += s.bytes.size();

    head_.clear();
    head_ += "HTTP/1.1 ";
    head_ += std::to_string(out_.status);
    head_ += ' ';
    head_ += ReasonPhrase(out_.status);
    head_ += "\r\nContent-Type: ";
    head_ += out_.content_type;
    head_ += "\r\nContent-Length: ";
    head_ += std::to_string(length);
    head_ += "\r\n";
    for (const auto& [name, value] : out_.headers) {
      head_ += name;
      head_ += ": ";
      head_ += value;
      head_ += "\r\n";
    }
    if (close_after_) {
      head_ += "Connection: close\r\n";
    } else if (http_version_ == 10) {
      head_ += "Connection: keep-alive\r\n";
    }
    head_ += "\r\n";

    buffers_.clear();
    buffers_.push_back(net::buffer(head_));
    size_t bytes = head_.size();
    if (method_ != http::verb::head) {
      if (!out_.body.empty()) buffers_.push_back(net::buffer(out_.body));
      for (const auto& s : out_.segments) {
        if (!s.bytes.empty()) buffers_.push_back(net::buffer(s.bytes.data(), s.bytes.size()));
      }
      bytes += length;
    }
    return bytes;
  }

  // Starts writing `response`, or the 429 that replaces it past the bound on unsent bytes. `answered` learns the
  // status that goes out before the client can see it (so that a count is there once the client has its answer).
  void WriteResponse(HttpResponse response, const std::function<void(unsigned)>& answered = {}) {
    writing_ = true;
    awaiting_request_ = false;
    out_ = std::move(response);
    size_t bytes = Frame();
    if (!core_->unsent.TryReserve(bytes)) {
      out_ = UnsentBoundResponse(core_->unsent, out_.close);  // drops the large answer's buffers now
      bytes = Frame();
      bool reserved = core_->unsent.TryReserve(bytes);
      WEFT_CHECK(reserved) << "a " << bytes << "-byte error answer must always fit";
    }
    reserved_ = bytes;
    if (answered) answered(out_.status);
    ArmTimer(core_->options.io_timeout);
    WithStream([&](auto& stream) {
      net::async_write(stream, buffers_, TransferLargeChunks(),
                       [self = shared_from_this()](error_code ec, size_t) { self->OnWritten(ec); });
    });
  }

  void OnWritten(error_code ec) {
    core_->unsent.Release(reserved_);
    reserved_ = 0;
    writing_ = false;
    if (out_.on_written) out_.on_written();
    out_ = HttpResponse();
    buffers_.clear();
    if (closed_) return;
    if (ec) return Close();
    in_flight_ = false;
    cancel_.reset();
    if (close_after_) {
      // On shutdown the client has read what it sent for: close at once rather than linger. An error that
      // closes (413) lingers even then: its client may still be sending.
      if (shutting_down_ && !close_requested_) return Close();
      return BeginLingeringClose();
    }
    if (expired_) return Close();
    if (watching_) {
      ArmTimer(core_->options.io_timeout);  // the watch becomes the wait for the next request
      awaiting_request_ = true;
    } else {
      ReadRequest();
    }
    if (shutting_down_ && awaiting_request_) ArmShutdownGrace();
  }

  void BeginLingeringClose() {
    draining_ = true;
    buffer_.clear();
    ArmTimer(std::min<std::chrono::milliseconds>(kLingerOnClose, core_->options.io_timeout));
    if (Tls()) {
      // The close_notify goes first; then the socket is half closed and drained (OnTlsShutdown).
      if (!StartTlsShutdown()) Close();
      return;
    }
    error_code ec;
    Socket().shutdown(TcpSocket::shutdown_send, ec);
    WatchSocket();
  }

  // One deadline for whatever the connection waits for now; when it passes, the connection closes. The deadline is
  // a member, and the timer's wait moves only to an earlier deadline: a later one is found when the wait ends, and
  // waited for then. Moving it every time cost each request two or three trips through asio's timer queue (its
  // lock, a heap operation, and a cancelled wait's handler).
  void ArmTimer(std::chrono::milliseconds timeout) {
    grace_timer_ = false;
    deadline_ = ConnectionTimer::clock_type::now() + timeout;
    if (!timer_waiting_ || timer_.expiry() > deadline_) WaitForDeadline();
  }

  void DisarmTimer() {
    grace_timer_ = false;
    deadline_ = ConnectionTimer::time_point::max();
  }

  void WaitForDeadline() {
    timer_waiting_ = true;
    timer_.expires_at(deadline_);
    timer_.async_wait([self = shared_from_this(), wait = ++timer_waits_](error_code ec) {
      if (wait != self->timer_waits_) return;  // replaced by a later wait, which is pending
      self->timer_waiting_ = false;
      if (ec || self->closed_ || self->deadline_ == ConnectionTimer::time_point::max()) return;
      if (self->deadline_ > ConnectionTimer::clock_type::now()) return self->WaitForDeadline();  // moved later
      self->OnTimer();
    });
  }

  void ArmShutdownGrace() {
    ArmTimer(core_->options.shutdown_idle_grace);
    grace_timer_ = true;
  }

  void OnTimer() {
    if (!grace_timer_) {
      if (handshaking_) LogHandshakeFailure("no handshake within io_timeout");
      return Close();
    }
    grace_timer_ = false;
    if (!awaiting_request_) return;
    // A request's first bytes are here: it is on the wire, so it is read (within io_timeout) and answered.
    if (MoreRequestBytes()) return ArmTimer(core_->options.io_timeout);
    // Ends the pending read: one that has just read a request still delivers it, else it is aborted and the
    // connection closes.
    idle_closing_ = true;
    error_code ec;
    Socket().cancel(ec);
  }

 private:
  const std::shared_ptr<ServerCore> core_;  // first: the socket and timer need its io_context
  // Before stream_, which uses it. The newest context when the connection was accepted; a reload leaves it be.
  const std::shared_ptr<net::ssl::context> tls_context_;
  // Asked once per connection, given to each request.
  const std::string peer_address_;
  std::string client_subject_;  // set by the handshake
  CallerMemo caller_memo_;
  Stream stream_;
  ConnectionTimer timer_;
  ConnectionTimer::time_point deadline_ = ConnectionTimer::time_point::max();  // see ArmTimer
  bool timer_waiting_ = false;  // a wait for deadline_ (or an earlier one) is pending on timer_
  uint64_t timer_waits_ = 0;    // numbers the waits, so that a replaced one's completion is ignored
  beast::flat_buffer buffer_;
  size_t head_scanned_ = 0;                                   // FindRequestHeadEnd's place in buffer_
  RequestHead request_head_;                                  // the request being read
  std::optional<http::request_parser<IncomingBody>> parser_;  // a chunked request's
  RequestBody body_;                                          // a body with a Content-Length while it is read in place
  SteadyTime arrival_;

  // The request in flight and its answer.
  bool in_flight_ = false;
  bool keep_alive_ = true;
  unsigned http_version_ = 11;
  http::verb method_ = http::verb::unknown;
  std::shared_ptr<CancelToken> cancel_;
  bool writing_ = false;
  bool close_after_ = false;
  bool close_requested_ = false;  // the answer itself asked to close (an error such as 413)
  size_t reserved_ = 0;           // the answer's bytes counted in core_->unsent
  std::string head_;
  HttpResponse out_;
  std::vector<net::const_buffer> buffers_;

  bool watching_ = false;
  bool draining_ = false;
  // Waiting for the next request, with none of its bytes read yet (the header read or the watch is pending).
  bool awaiting_request_ = false;
  bool shutting_down_ = false;
  bool grace_timer_ = false;   // timer_ is the shutdown's wait for a next request
  bool idle_closing_ = false;  // the shutdown cancelled the pending read of an idle connection
  bool expired_ = false;       // the shutdown deadline has passed
  bool closed_ = false;

  bool handshaking_ = false;
  bool tls_shutdown_started_ = false;
  std::unique_ptr<std::array<std::byte, kWatchReadChunk>> drain_scratch_;  // a TLS lingering close's reads
};

// The shared state behind HttpResponder copies.
class PendingReply {
 public:
  explicit PendingReply(std::shared_ptr<Connection> connection) : connection_(std::move(connection)) {}
  ~PendingReply() {
    if (answered_.exchange(true)) return;
    Post([](Connection& c) { c.Reply(PlainError(500, "the request was dropped without an answer")); });
  }

  static HttpResponder MakeResponder(std::shared_ptr<PendingReply> reply) { return HttpResponder(std::move(reply)); }

  void Send(HttpResponse response) {
    if (answered_.exchange(true)) return;
    Post([response = std::move(response)](Connection& c) mutable { c.Reply(std::move(response)); });
  }

  void SendBuilt(std::function<HttpResponse()> build, std::function<void(unsigned)> answered) {
    if (answered_.exchange(true)) return;
    Post([build = std::move(build), answered = std::move(answered)](Connection& c) {
      HttpResponse response;
      if (c.core().unsent.Saturated()) {
        // Whatever it builds would be refused: spare the encoding and its memory.
        response = UnsentBoundResponse(c.core().unsent, false);
      } else {
        try {
          response = build();
        } catch (const std::exception& e) {
          WEFT_LOG(Error) << "building an HTTP response threw: " << e.what();
          response = PlainError(500, "internal error while encoding the response");
        }
      }
      c.Reply(std::move(response), answered);
    });
  }

 private:
  template <typename F>
  void Post(F fn) {
    ServerCore& core = connection_->core();
    std::lock_guard lock(core.mu);
    if (!core.running) return;  // the server is stopping: nobody would write the answer
    net::post(connection_->executor(), [c = connection_, fn = std::move(fn)]() mutable { fn(*c); });
  }

  std::shared_ptr<Connection> connection_;
  std::atomic<bool> answered_{false};
};

void Connection::Dispatch(RequestBody body) {
  DisarmTimer();
  EndChunkedRead();
  keep_alive_ = request_head_.keep_alive;
  http_version_ = request_head_.version;
  method_ = request_head_.method;

  HttpRequest request;
  request.method = request_head_.method;
  request.target = std::move(request_head_.target);
  request.body = std::make_shared<const RequestBody>(std::move(body));
  request.headers = std::move(request_head_.headers);
  cancel_ = std::make_shared<CancelToken>();
  request.cancel = cancel_;
  request.arrival = arrival_;
  request.client_subject = client_subject_;
  request.peer_address = peer_address_;
  request.caller_memo = &caller_memo_;
  in_flight_ = true;
  WatchSocket();

  HttpResponder responder = PendingReply::MakeResponder(std::make_shared<PendingReply>(shared_from_this()));
  try {
    core_->handler->Handle(std::move(request), std::move(responder));
  } catch (const std::exception& e) {
    // The responder was destroyed on the way out, which answers 500 unless the handler answered already.
    WEFT_LOG(Error) << "HTTP handler threw: " << e.what();
  } catch (...) {
    WEFT_LOG(Error) << "HTTP handler threw a non-standard exception";
  }
}

}  // namespace internal

void HttpResponder::Send(HttpResponse response) const { reply_->Send(std::move(response)); }

void HttpResponder::SendBuilt(std::function<HttpResponse()> build, std::function<void(unsigned)> answered) const {
  reply_->SendBuilt(std::move(build), std::move(answered));
}

std::string_view HttpRequest::path() const {
  std::string_view t = target;
  return t.substr(0, t.find('?'));
}

std::string_view HttpRequest::header(std::string_view name) const { return headers.Find(name); }

std::string_view HttpRequest::header(http::field name) const { return headers.Find(http::to_string(name)); }

namespace {

void RunIoThread(net::io_context* context) {
  for (;;) {
    try {
      context->run();
      return;
    } catch (const std::exception& e) {
      WEFT_LOG(Error) << "HTTP I/O thread caught: " << e.what();
    }
  }
}

void Accept(internal::ServerCore* core);

// Takes in an accepted connection, or closes it at once past max_connections. On the acceptor's strand.
void Admit(internal::ServerCore* core, TcpSocket socket) {
  std::shared_ptr<net::ssl::context> tls_context = core->tls ? core->tls->current() : nullptr;
  std::shared_ptr<internal::Connection> connection;
  bool shutting_down = false;
  size_t open = 0;
  {
    std::lock_guard lock(core->mu);
    if (!core->running) return;
    open = core->open_connections;
    if (core->options.max_connections == 0 || open < core->options.max_connections) {
      error_code ignored;
      // Responses go out in one gather write; a small one must not wait for Nagle.
      socket.set_option(tcp::no_delay(true), ignored);
      connection =
          std::make_shared<internal::Connection>(core->shared_from_this(), std::move(socket), std::move(tls_context));
      core->connections.emplace(connection.get(), connection);
      ++core->open_connections;
      shutting_down = core->stopping;
    }
  }
  if (connection) return connection->Start(shutting_down);
  // Closed, not answered: a 503 would need the connection kept open until its client has read it, which is what
  // the limit is there to refuse. No request has been read, so the client may safely retry elsewhere.
  error_code ignored;
  socket.close(ignored);
  uint64_t held_back = 0;
  if (core->limit_log.Allow(std::chrono::steady_clock::now(), &held_back)) {
    WEFT_LOG(Warning) << "HTTP connection limit reached (" << open << " open, max_connections "
                      << core->options.max_connections << "): closing new connections at once"
                      << (held_back ? " (" + std::to_string(held_back) + " more since the last line)" : "");
  }
}

void OnAcceptError(internal::ServerCore* core, const error_code& ec) {
  // Retrying at once would fail the same way, thousands of times a second: wait, longer each time.
  std::chrono::milliseconds wait = core->backoff.Failed();
  if (IsResourceExhaustion(ec)) {
    core->shed_since_log += core->spare.ShedBacklog(core->acceptor.native_handle(), kBacklogTakenAtOnce);
  }
  uint64_t held_back = 0;
  if (core->accept_log.Allow(std::chrono::steady_clock::now(), &held_back)) {
    WEFT_LOG(Warning) << "accepting an HTTP connection failed: " << ec.message() << "; retrying in " << wait.count()
                      << " ms"
                      << (held_back ? " (" + std::to_string(held_back) + " more failures since the last line)" : "")
                      << (core->shed_since_log ? "; " + std::to_string(core->shed_since_log) +
                                                     " waiting connections closed for want of a descriptor"
                                               : "");
    core->shed_since_log = 0;
  }
  core->accept_timer.expires_after(wait);
  core->accept_timer.async_wait([core](error_code ec) {
    if (ec) return;
    {
      std::lock_guard lock(core->mu);
      if (!core->running || core->stopping) return;
    }
    Accept(core);
  });
}

void Accept(internal::ServerCore* core) {
  core->acceptor.async_accept(core->NextContext(), [core](error_code ec, TcpSocket socket) {
    if (ec == net::error::operation_aborted) return;
    if (ec) return OnAcceptError(core, ec);
    if (uint64_t failures = core->backoff.Succeeded(); failures > 0) {
      uint64_t held_back = 0;
      if (core->accept_log.Allow(std::chrono::steady_clock::now(), &held_back)) {
        WEFT_LOG(Info) << "accepting HTTP connections again after " << failures << " failed tries";
      }
    }
    core->spare.Refill();
    bool stopping;
    {
      std::lock_guard lock(core->mu);
      stopping = core->stopping;
    }
    Admit(core, std::move(socket));
    if (!stopping) Accept(core);
  });
}

// Looks at the TLS files every reload_interval until Stop. On the reload timer's strand.
void WatchTlsFiles(internal::ServerCore* core) {
  core->reload_timer.expires_after(core->options.tls.reload_interval);
  core->reload_timer.async_wait([core](error_code ec) {
    if (ec) return;
    {
      std::lock_guard lock(core->mu);
      if (!core->running) return;
    }
    core->tls->ReloadIfChanged();
    WatchTlsFiles(core);
  });
}

// At shutdown: connections that completed their handshake wait in the listen backlog, some with a request sent.
// Closing the listener would reset them; they are taken in and served like the others.
void AcceptBacklog(internal::ServerCore* core) {
  for (int i = 0; i < kBacklogTakenAtOnce; ++i) {
    TcpSocket socket(core->NextContext());
    error_code ec;
    core->acceptor.accept(socket, ec);  // the acceptor is non-blocking: would_block once the backlog is empty
    if (ec) return;
    Admit(core, std::move(socket));
  }
}

}  // namespace

HttpServer::HttpServer(Options options, HttpHandler* handler)
    : options_(std::move(options)), core_(std::make_shared<internal::ServerCore>(options_, handler)) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  if (started_) return Internal("HttpServer::Start called twice");
  if (options_.tls.enabled()) {
    WEFT_ASSIGN_OR_RETURN(core_->tls, ServerTlsContext::Load(options_.tls));
  } else if (!options_.tls.client_ca_file.empty() || !options_.tls.key_file.empty()) {
    return InvalidArgument("a TLS key or client CA file without a certificate file");
  }
  error_code ec;
  auto address = net::ip::make_address(options_.address, ec);
  if (ec) return InvalidArgument("invalid listen address '" + options_.address + "': " + ec.message());
  tcp::endpoint endpoint(address, options_.port);
  std::string where = options_.address + ":" + std::to_string(options_.port);
  tcp::acceptor& acceptor = core_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (!ec) acceptor.non_blocking(true, ec);
  if (ec) {
    Status failed = Unavailable("cannot listen on " + where + ": " + ec.message());
    acceptor.close(ec);
    return failed;
  }
  port_ = acceptor.local_endpoint(ec).port();
  {
    std::lock_guard lock(core_->mu);
    core_->running = true;
  }
  started_ = true;
  net::post(acceptor.get_executor(), [core = core_.get()] { Accept(core); });
  if (core_->tls && options_.tls.reload_interval.count() > 0) {
    net::post(core_->reload_timer.get_executor(), [core = core_.get()] { WatchTlsFiles(core); });
  }
  for (auto& context : core_->contexts) {
    threads_.emplace_back([context = context.get()] {
      SetCurrentThreadName("http-io");
      RunIoThread(context);
    });
  }
  WEFT_LOG(Info) << "HTTP" << (core_->tls ? "S" : "") << " server listening on " << options_.address << ":" << port_
                 << (options_.tls.client_ca_file.empty() ? ""
                     : options_.tls.require_client_cert  ? " (client certificates required)"
                                                         : " (client certificates verified when sent)");
  return Status::Ok();
}

void HttpServer::BeginShutdown(SteadyTime deadline) {
  if (!started_ || shutdown_begun_) return;
  shutdown_begun_ = true;
  std::vector<std::shared_ptr<internal::Connection>> live;
  {
    std::lock_guard lock(core_->mu);
    core_->stopping = true;
    core_->deadline = deadline;
    live = core_->LiveConnectionsLocked();
  }
  net::post(core_->acceptor.get_executor(), [core = core_.get()] {
    core->accept_timer.cancel();
    AcceptBacklog(core);
    error_code ec;
    core->acceptor.close(ec);
  });
  for (auto& c : live) net::post(c->executor(), [c] { c->BeginShutdown(); });
  net::post(core_->deadline_timer.get_executor(), [core = core_.get(), deadline] {
    core->deadline_timer.expires_at(deadline);
    core->deadline_timer.async_wait([core](error_code ec) {
      if (ec) return;
      std::vector<std::shared_ptr<internal::Connection>> live;
      {
        std::lock_guard lock(core->mu);
        live = core->LiveConnectionsLocked();
      }
      for (auto& c : live) net::post(c->executor(), [c] { c->Expire(); });
    });
  });
}

void HttpServer::Stop() {
  if (!started_ || stopped_) return;
  if (!shutdown_begun_) BeginShutdown(std::chrono::steady_clock::now() + options_.drain_timeout);
  stopped_ = true;
  std::vector<std::shared_ptr<internal::Connection>> live;
  {
    std::unique_lock lock(core_->mu);
    core_->drained.wait_until(lock, core_->deadline + kFinalAnswerGrace, [&] { return core_->open_connections == 0; });
    core_->running = false;
    live = core_->LiveConnectionsLocked();
  }
  // What is left had its chance: answers that come later are dropped, a close_notify still being written is cut.
  for (auto& c : live) net::post(c->executor(), [c] { c->CloseNow(); });
  live.clear();
  net::post(core_->deadline_timer.get_executor(), [core = core_.get()] { core->deadline_timer.cancel(); });
  net::post(core_->reload_timer.get_executor(), [core = core_.get()] { core->reload_timer.cancel(); });
  net::post(core_->acceptor.get_executor(), [core = core_.get()] {
    core->accept_timer.cancel();
    error_code ec;
    core->acceptor.close(ec);
  });
  if (uint64_t cut = core_->answered_at_deadline.load(); cut > 0) {
    WEFT_LOG(Warning) << "HTTP: " << cut << " requests still in flight at the shutdown deadline were answered 503";
  }
  // The threads return once every connection has finished closing.
  core_->work.clear();
  threads_.clear();
}

size_t HttpServer::unsent_response_bytes() const { return core_->unsent.held(); }

size_t HttpServer::open_connections() const {
  std::lock_guard lock(core_->mu);
  return core_->open_connections;
}

}  // namespace weft
