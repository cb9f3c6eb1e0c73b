#include "frontend/http/tls_socket.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace weft {

namespace net = boost::asio;
using boost::system::error_code;

// The BIO that OpenSSL reads and writes through. Reads take what asio has received into input_; writes send on the
// socket's descriptor as it is at each call (closed: -1, so EBADF, never another connection's descriptor), with
// MSG_NOSIGNAL (OpenSSL's socket BIO would write(2), which raises SIGPIPE), and keep errno for SSL_ERROR_SYSCALL.
struct TlsSocketBio {
  static TlsSocket& Owner(BIO* bio) { return *static_cast<TlsSocket*>(BIO_get_data(bio)); }

  static bool Retryable(int error) { return error == EAGAIN || error == EWOULDBLOCK || error == EINTR; }

  static int Write(BIO* bio, const char* data, int size) {
    TlsSocket& owner = Owner(bio);
    BIO_clear_retry_flags(bio);
    ssize_t n = ::send(owner.socket_.native_handle(), data, static_cast<size_t>(size), MSG_NOSIGNAL);
    if (n >= 0) return static_cast<int>(n);
    owner.socket_error_ = errno;
    if (Retryable(owner.socket_error_)) BIO_set_retry_write(bio);
    return -1;
  }

  static int Read(BIO* bio, char* data, int size) {
    TlsSocket& owner = Owner(bio);
    BIO_clear_retry_flags(bio);
    size_t available = owner.InputAvailable();
    if (available == 0) {
      if (owner.input_ended_) return 0;
      BIO_set_retry_read(bio);
      return -1;
    }
    size_t n = std::min(available, static_cast<size_t>(size));
    std::memcpy(data, owner.input_ + owner.input_begin_, n);
    owner.input_begin_ += n;
    if (owner.input_begin_ == owner.input_end_) owner.input_begin_ = owner.input_end_ = 0;
    return static_cast<int>(n);
  }

  static long Control(BIO* bio, int command, long, void*) {  // NOLINT(runtime/int): OpenSSL's signature
    switch (command) {
      case BIO_CTRL_FLUSH:  // after handshake messages; a send has nothing to flush
        return 1;
      case BIO_CTRL_PENDING: return static_cast<long>(Owner(bio).InputAvailable());  // NOLINT(runtime/int)
      case BIO_CTRL_EOF: return Owner(bio).input_ended_ && Owner(bio).InputAvailable() == 0 ? 1 : 0;
      default: return 0;
    }
  }

  static int Create(BIO* bio) {
    BIO_set_init(bio, 1);
    return 1;
  }

  static const BIO_METHOD* Method() {
    static const BIO_METHOD* method = [] {
      BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "weft socket");
      WEFT_CHECK(m != nullptr) << "cannot create OpenSSL's BIO method";
      BIO_meth_set_write(m, &Write);
      BIO_meth_set_read(m, &Read);
      BIO_meth_set_ctrl(m, &Control);
      BIO_meth_set_create(m, &Create);
      return m;
    }();
    return method;
  }
};

TlsSocket::TlsSocket(TcpSocket socket, net::ssl::context& context) : socket_(std::move(socket)) {
  error_code ignored;
  socket_.non_blocking(true, ignored);
  ssl_ = SSL_new(context.native_handle());
  WEFT_CHECK(ssl_ != nullptr) << "cannot create an OpenSSL connection (out of memory)";
  BIO* bio = BIO_new(TlsSocketBio::Method());
  WEFT_CHECK(bio != nullptr) << "cannot create an OpenSSL BIO (out of memory)";
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);  // one reference, taken by the SSL for both directions
  SSL_set_accept_state(ssl_);
  // Read-ahead: OpenSSL takes all that was received in one call instead of a record's header and then its body.
  // Its record buffers are released while empty, so that an idle keep-alive connection holds none.
  SSL_set_read_ahead(ssl_, 1);
  SSL_set_mode(ssl_, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
}

TlsSocket::~TlsSocket() { SSL_free(ssl_); }

bool TlsSocket::HasPendingInput() const { return InputAvailable() > 0 || SSL_has_pending(ssl_) == 1; }

net::mutable_buffer TlsSocket::PrepareInput() {
  if (InputAvailable() > 0) {
    std::memmove(input_, input_ + input_begin_, InputAvailable());
    input_end_ -= input_begin_;
    input_begin_ = 0;
  } else if (last_receive_filled_) {
    if (!large_input_) large_input_ = std::make_unique_for_overwrite<char[]>(kLargeInputBytes);
    input_ = large_input_.get();
    input_capacity_ = kLargeInputBytes;
  } else {
    large_input_.reset();
    if (!small_input_) small_input_ = std::make_unique_for_overwrite<char[]>(kSmallInputBytes);
    input_ = small_input_.get();
    input_capacity_ = kSmallInputBytes;
  }
  return net::buffer(input_ + input_end_, input_capacity_ - input_end_);
}

error_code TlsSocket::Received(const error_code& error, size_t bytes) {
  receiving_ = false;
  input_end_ += bytes;
  last_receive_filled_ = input_end_ == input_capacity_;
  if (error == net::error::eof) {
    input_ended_ = true;
    return {};
  }
  return error;
}

// Before each call into OpenSSL: SSL_get_error reads the error queue and the BIO's errno as they are after it. The
// queue is cleared only when it holds something: OpenSSL 3.0's ERR_clear_error frees two pointers in each of its 16
// slots whether set or not, which made 64 of the 85 calls to free() per HTTPS request (docs/benchmarks.md).
void TlsSocket::BeginCall() {
  if (ERR_peek_error() != 0) ERR_clear_error();
  socket_error_ = 0;
}

TlsSocket::Step TlsSocket::Handshake() {
  BeginCall();
  return Outcome(SSL_do_handshake(ssl_), 0);
}

TlsSocket::Step TlsSocket::Shutdown() {
  BeginCall();
  int result = SSL_shutdown(ssl_);
  return Outcome(result >= 0 ? 1 : result, 0);  // 0: ours is written, the peer's not in yet
}

TlsSocket::Step TlsSocket::Read(net::mutable_buffer into) {
  if (into.size() == 0) return {};
  // Nothing received and nothing in OpenSSL (a keep-alive connection's wait for its next request, every time):
  // SSL_read_ex would only find that out. After the peer's end of stream it runs, to say how the stream ended.
  if (!HasPendingInput() && !input_ended_ && SSL_is_init_finished(ssl_)) return Step{Step::Want::kRead, {}, 0};
  auto* at = static_cast<char*>(into.data());
  size_t total = 0;
  // Everything received is decrypted in the same step, as far as `into` takes it.
  do {
    BeginCall();
    size_t n = 0;
    int result = SSL_read_ex(ssl_, at + total, into.size() - total, &n);
    if (result != 1) {
      if (total > 0) break;  // what was read goes out now; OpenSSL keeps the condition for the next call
      return Outcome(result, 0);
    }
    total += n;
  } while (total < into.size() && HasPendingInput());
  return Step{Step::Want::kNothing, {}, total};
}

TlsSocket::Step TlsSocket::Write(net::const_buffer from) {
  if (from.size() == 0) return {};
  BeginCall();
  size_t n = 0;
  int result = SSL_write_ex(ssl_, from.data(), from.size(), &n);
  return Outcome(result, n);
}

TlsSocket::Step TlsSocket::Outcome(int result, size_t bytes) {
  if (result == 1) return Step{Step::Want::kNothing, {}, bytes};
  Step step;
  switch (SSL_get_error(ssl_, result)) {
    case SSL_ERROR_WANT_READ: step.want = Step::Want::kRead; return step;
    case SSL_ERROR_WANT_WRITE: step.want = Step::Want::kWrite; return step;
    case SSL_ERROR_ZERO_RETURN: step.error = net::error::eof; return step;
    case SSL_ERROR_SYSCALL:
      if (socket_error_ != 0 && ERR_peek_error() == 0) {
        step.error = error_code(socket_error_, boost::system::system_category());
        return step;
      }
      break;
    default: break;
  }
  unsigned long reason = ERR_get_error();  // NOLINT(runtime/int): OpenSSL's type
  if (reason == 0 || ERR_GET_REASON(reason) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
    step.error = net::ssl::error::stream_truncated;
  } else {
    step.error = error_code(static_cast<int>(reason), net::error::get_ssl_category());
  }
  ERR_clear_error();
  return step;
}

}  // namespace weft
