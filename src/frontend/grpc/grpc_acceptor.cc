#include "frontend/grpc/grpc_acceptor.h"

#include <arpa/inet.h>
#include <grpcpp/server_posix.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/log.h"
#include "base/retry.h"
#include "base/thread_name.h"

namespace weft {

namespace {

constexpr std::chrono::seconds kLogInterval{5};
// Connections closed per round while out of descriptors, at most.
constexpr int kShedPerRound = 4096;

// Errors of the connection being accepted, not of the listener: the next accept may well succeed (accept(2)).
bool IsConnectionError(int error) {
  switch (error) {
    case ECONNABORTED:
    case EINTR:
    case EPROTO:
    case EPERM:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH: return true;
    default: return false;
  }
}

}  // namespace

Result<std::unique_ptr<GrpcAcceptor>> GrpcAcceptor::Listen(const std::string& address, uint16_t port) {
  sockaddr_storage storage{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    length = sizeof(*v4);
  } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    length = sizeof(*v6);
  } else {
    return InvalidArgument("invalid listen address '" + address + "'");
  }
  std::string where = address + ":" + std::to_string(port);
  int fd = ::socket(storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable("cannot listen on " + where + ": " + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&storage), length) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return Unavailable("cannot listen on " + where + ": " + why);
  }
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_length);
  uint16_t bound_port = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                                         : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return Unavailable("cannot listen on " + where + ": eventfd: " + why);
  }
  return std::unique_ptr<GrpcAcceptor>(new GrpcAcceptor(fd, wake, bound_port));
}

GrpcAcceptor::~GrpcAcceptor() {
  Stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void GrpcAcceptor::Start(grpc::Server* server) {
  thread_ = std::jthread([this, server] {
    SetCurrentThreadName("grpc-accept");
    Run(server);
  });
}

void GrpcAcceptor::Stop() {
  if (listen_fd_ < 0) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  listen_fd_ = -1;
}

void GrpcAcceptor::Run(grpc::Server* server) {
  Backoff backoff;
  LogRateLimiter log(kLogInterval);
  uint64_t shed_since_log = 0;
  SpareDescriptor spare;
  int wait_ms = -1;  // poll's timeout: none while accepting, the backoff's wait after a failure
  for (;;) {
    pollfd fds[2] = {{.fd = wake_fd_, .events = POLLIN, .revents = 0},
                     {.fd = listen_fd_, .events = POLLIN, .revents = 0}};
    // While backing off only the wake-up is watched: the listener stays readable and would wake at once.
    int n = ::poll(fds, wait_ms < 0 ? 2 : 1, wait_ms);
    if (n < 0 && errno != EINTR) {
      WEFT_LOG(Error) << "gRPC acceptor: poll failed: " << std::strerror(errno);
      break;
    }
    if (fds[0].revents != 0) break;
    wait_ms = -1;
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        if (uint64_t failures = backoff.Succeeded(); failures > 0) {
          uint64_t held_back = 0;
          if (log.Allow(std::chrono::steady_clock::now(), &held_back)) {
            WEFT_LOG(Info) << "accepting gRPC connections again after " << failures << " failed tries";
          }
        }
        spare.Refill();
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        grpc::AddInsecureChannelFromFd(server, fd);  // gRPC owns the descriptor from here on
        continue;
      }
      int error = errno;
      if (error == EAGAIN || error == EWOULDBLOCK) break;
      if (IsConnectionError(error)) continue;
      std::chrono::milliseconds wait = backoff.Failed();
      if (error == EMFILE || error == ENFILE) shed_since_log += spare.ShedBacklog(listen_fd_, kShedPerRound);
      uint64_t held_back = 0;
      if (log.Allow(std::chrono::steady_clock::now(), &held_back)) {
        WEFT_LOG(Warning) << "accepting a gRPC connection failed: " << std::strerror(error) << "; retrying in "
                          << wait.count() << " ms"
                          << (held_back ? " (" + std::to_string(held_back) + " more failures since the last line)" : "")
                          << (shed_since_log ? "; " + std::to_string(shed_since_log) +
                                                   " waiting connections closed for want of a descriptor"
                                             : "");
        shed_since_log = 0;
      }
      wait_ms = static_cast<int>(wait.count());
      break;
    }
  }
}

}  // namespace weft
