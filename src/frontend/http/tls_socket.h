#pragma once

#include <openssl/types.h>

#include <algorithm>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <iterator>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace weft {

// A connection's TCP socket, bound to its io_context's own executor type. asio's default, any_io_executor, is type-
// erased: every operation on such a socket copies, "prefers" and destroys it through function pointers, which
// `perf` put at 0.2 µs of a plain HTTP request and 0.5 µs of an HTTPS one (docs/benchmarks.md).
using TcpSocket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, boost::asio::io_context::executor_type>;

// The server side of one TLS connection, with asio receiving the socket's bytes and OpenSSL taking them from that
// buffer and sending its records itself (a BIO of our own on both sides). An AsyncReadStream and AsyncWriteStream
// for Beast.
//
// Why not asio's ssl::stream: it runs OpenSSL over a pair of memory BIOs, so every record is copied into one BIO
// and out of the other, and each read and write is a state machine of its own around the socket's; it also holds
// four record-sized buffers per connection. Here a read is asio's speculative receive (no system call to wait for
// the socket, as on a plain socket) and one copy into OpenSSL, and a write of a small response's head and body is
// one record and one send(2). docs/benchmarks.md has the figures.
//
// Reads and writes may be pending at the same time (one of each), as on a socket; OpenSSL's "retry with the same
// arguments" rule is kept by each operation retrying its own call. Sends never raise SIGPIPE. Cancelling or
// closing next_layer() ends a waiting operation with operation_aborted. Errors: eof for the peer's close_notify,
// ssl::error::stream_truncated for a peer that closed without one, the ssl category for OpenSSL's errors and the
// system category for the socket's. Not thread-safe: used on its socket's executor only.
class TlsSocket {
 public:
  using executor_type = TcpSocket::executor_type;

  // Takes `socket` (connected; set non-blocking here) and a new SSL object from `context`, which keeps its own
  // reference to the OpenSSL context.
  TlsSocket(TcpSocket socket, boost::asio::ssl::context& context);
  ~TlsSocket();
  TlsSocket(const TlsSocket&) = delete;
  TlsSocket& operator=(const TlsSocket&) = delete;

  executor_type get_executor() { return socket_.get_executor(); }
  TcpSocket& next_layer() { return socket_; }
  SSL* native_handle() { return ssl_; }

  // Received bytes not read yet: records not yet taken by OpenSSL or not yet decrypted, or decrypted bytes.
  bool HasPendingInput() const;

  // void(error_code): the server's handshake.
  template <typename Handler>
  auto async_handshake(Handler&& handler) {
    return Start<false, void(boost::system::error_code)>([this] { return Handshake(); },
                                                         std::forward<Handler>(handler));
  }

  // void(error_code): writes close_notify; completes once it is written, without waiting for the peer's.
  template <typename Handler>
  auto async_shutdown(Handler&& handler) {
    return Start<false, void(boost::system::error_code)>([this] { return Shutdown(); }, std::forward<Handler>(handler));
  }

  // void(error_code, size_t): at least one byte into the first non-empty buffer, more while OpenSSL holds them.
  template <typename MutableBufferSequence, typename Handler>
  auto async_read_some(const MutableBufferSequence& buffers, Handler&& handler) {
    boost::asio::mutable_buffer into = FirstNonEmpty<boost::asio::mutable_buffer>(buffers);
    return Start<true, void(boost::system::error_code, size_t)>([this, into] { return Read(into); },
                                                                std::forward<Handler>(handler));
  }

  // void(error_code, size_t): writes the first buffer, or when it is small, as much of the sequence as fits one
  // record (copied together first), so that a response's head and body go out as one record.
  template <typename ConstBufferSequence, typename Handler>
  auto async_write_some(const ConstBufferSequence& buffers, Handler&& handler) {
    boost::asio::const_buffer from = Gather(buffers);
    return Start<true, void(boost::system::error_code, size_t)>([this, from] { return Write(from); },
                                                                std::forward<Handler>(handler));
  }

 private:
  // What one call into OpenSSL came to: done (with an error or a byte count), or waiting for the socket.
  struct Step {
    enum class Want { kNothing, kRead, kWrite };
    Want want = Want::kNothing;
    boost::system::error_code error;
    size_t bytes = 0;
  };

  // An operation: calls `step` until it no longer waits for the socket. A step that is done at once completes
  // through a post, never inside the initiating call.
  template <typename StepFn, bool kCountsBytes>
  class Operation {
   public:
    Operation(TlsSocket& owner, StepFn step) : owner_(owner), step_(std::move(step)) {}

    template <typename Self>
    void operator()(Self& self, boost::system::error_code waited = {}) {
      if (posted_) return Complete(self, result_);
      if (waited) return Complete(self, Step{Step::Want::kNothing, waited, 0});
      Step step = step_();
      if (step.want == Step::Want::kRead) {
        waited_ = true;
        return owner_.AwaitInput(std::move(self));
      }
      if (step.want == Step::Want::kWrite) {
        waited_ = true;
        return owner_.socket_.async_wait(TcpSocket::wait_write, std::move(self));
      }
      if (waited_) return Complete(self, step);
      posted_ = true;
      result_ = step;
      boost::asio::post(std::move(self));
    }

    // The receive that AwaitInput started has ended.
    template <typename Self>
    void operator()(Self& self, boost::system::error_code received, size_t bytes) {
      if (boost::system::error_code error = owner_.Received(received, bytes)) {
        return Complete(self, Step{Step::Want::kNothing, error, 0});
      }
      (*this)(self);
    }

   private:
    template <typename Self>
    static void Complete(Self& self, const Step& step) {
      if constexpr (kCountsBytes) {
        self.complete(step.error, step.bytes);
      } else {
        self.complete(step.error);
      }
    }

    TlsSocket& owner_;
    StepFn step_;
    bool waited_ = false;  // past the initiating call
    bool posted_ = false;
    Step result_;
  };

  // Composed without an I/O object, so that no outstanding work is tracked: given the socket, async_compose keeps a
  // tracked copy of its executor and hands out copies of that, each one an atomic increment and decrement of the
  // io_context's work count (0.15 µs of an HTTPS request, docs/benchmarks.md). The server's work guards keep its
  // io_contexts running. A handler without an executor of its own gets the socket's, so that the operation's steps
  // and its post stay on the connection's thread.
  template <bool kCountsBytes, typename Signature, typename StepFn, typename Handler>
  auto Start(StepFn step, Handler&& handler) {
    using Operation = TlsSocket::Operation<StepFn, kCountsBytes>;
    if constexpr (std::is_same_v<
                      boost::asio::associated_executor_t<std::decay_t<Handler>, boost::asio::system_executor>,
                      boost::asio::system_executor>) {
      auto bound = boost::asio::bind_executor(socket_.get_executor(), std::forward<Handler>(handler));
      return boost::asio::async_compose<decltype(bound), Signature>(Operation(*this, std::move(step)), bound);
    } else {
      return boost::asio::async_compose<Handler, Signature>(Operation(*this, std::move(step)), handler);
    }
  }

  // Continues `self` once OpenSSL has more of the socket's bytes to read: a receive into input_ (speculative, as on
  // a plain socket), or when another operation's receive is already pending, a wait for it.
  template <typename Self>
  void AwaitInput(Self&& self) {
    if (receiving_) return socket_.async_wait(TcpSocket::wait_read, std::forward<Self>(self));
    receiving_ = true;
    socket_.async_receive(PrepareInput(), std::forward<Self>(self));
  }

  // Bytes received and not yet taken by OpenSSL.
  size_t InputAvailable() const { return input_end_ - input_begin_; }
  // Where the next receive goes. Only while no receive is pending.
  boost::asio::mutable_buffer PrepareInput();
  // Takes in a receive's result; an error that ends the operation (eof does not: OpenSSL is told, and decides).
  boost::system::error_code Received(const boost::system::error_code& error, size_t bytes);

  template <typename Buffer, typename Sequence>
  static Buffer FirstNonEmpty(const Sequence& buffers) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it) {
      Buffer buffer(*it);
      if (buffer.size() > 0) return buffer;
    }
    return Buffer();
  }

  template <typename Sequence>
  boost::asio::const_buffer Gather(const Sequence& buffers) {
    auto it = boost::asio::buffer_sequence_begin(buffers);
    auto end = boost::asio::buffer_sequence_end(buffers);
    while (it != end && boost::asio::const_buffer(*it).size() == 0) ++it;
    if (it == end) return {};
    boost::asio::const_buffer first(*it);
    if (first.size() >= kRecordBytes || std::next(it) == end) return first;
    gathered_.clear();
    for (; it != end && gathered_.size() < kRecordBytes; ++it) {
      boost::asio::const_buffer buffer(*it);
      gathered_.append(static_cast<const char*>(buffer.data()),
                       std::min(buffer.size(), kRecordBytes - gathered_.size()));
    }
    return boost::asio::buffer(gathered_);
  }

  void BeginCall();
  Step Handshake();
  Step Shutdown();
  Step Read(boost::asio::mutable_buffer into);
  Step Write(boost::asio::const_buffer from);
  // The step for a call that returned `result` (1: success).
  Step Outcome(int result, size_t bytes);

  // The plaintext of one full TLS record.
  static constexpr size_t kRecordBytes = 16384;
  // Receives go into a small buffer, enough for a typical request's record, unless the last one filled its buffer:
  // then into a large one (two full records), kept only while the bytes keep coming. An idle connection holds the
  // small one only.
  static constexpr size_t kSmallInputBytes = 4 * 1024;
  static constexpr size_t kLargeInputBytes = 32 * 1024;

  TcpSocket socket_;
  SSL* ssl_ = nullptr;
  int socket_error_ = 0;  // errno of the BIO's last failed send, for SSL_ERROR_SYSCALL
  std::string gathered_;  // a small write's buffers, together; kept while the write may be retried

  // Bytes received and not yet taken by OpenSSL: [input_begin_, input_end_) of input_, which is one of the two
  // buffers below (allocated when first used). OpenSSL asks for more than there is before it reports WANT_READ, so
  // the buffer is empty whenever a receive starts (PrepareInput keeps what is left if not).
  char* input_ = nullptr;
  size_t input_capacity_ = 0;
  size_t input_begin_ = 0;
  size_t input_end_ = 0;
  std::unique_ptr<char[]> small_input_;
  std::unique_ptr<char[]> large_input_;
  bool last_receive_filled_ = false;
  bool input_ended_ = false;  // the peer closed its side: OpenSSL reads end of file after the bytes left
  bool receiving_ = false;    // a receive into input_ is pending

  friend struct TlsSocketBio;
};

}  // namespace weft
