#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "base/result.h"

namespace weft {

// The gRPC port's listening socket: connections are accepted here and handed to gRPC one at a time
// (grpc::AddInsecureChannelFromFd). gRPC 1.51's own listener stops accepting for good after one accept fails for
// want of a descriptor ("Failed accept4: Too many open files"), which leaves the port dead once descriptors are
// back. This one waits and tries again, longer each time (Backoff), closes the connections waiting in the backlog
// meanwhile (with a spare descriptor) so that their clients learn at once, and logs at a bounded rate. One thread,
// asleep in poll() between connections. Start and Stop from one thread.
class GrpcAcceptor {
 public:
  // Binds and listens. InvalidArgument for an address that is not a numeric IPv4 or IPv6 one (as for HTTP),
  // Unavailable when the port cannot be bound.
  static Result<std::unique_ptr<GrpcAcceptor>> Listen(const std::string& address, uint16_t port);
  ~GrpcAcceptor();  // Stop()
  GrpcAcceptor(const GrpcAcceptor&) = delete;
  GrpcAcceptor& operator=(const GrpcAcceptor&) = delete;

  // Starts accepting for `server` (built and started, without a listening port of its own), which must outlive
  // Stop().
  void Start(grpc::Server* server);
  // Stops accepting and closes the listening socket; connections already handed over stay gRPC's. Idempotent.
  void Stop();
  uint16_t port() const { return port_; }

 private:
  GrpcAcceptor(int listen_fd, int wake_fd, uint16_t port) : listen_fd_(listen_fd), wake_fd_(wake_fd), port_(port) {}
  void Run(grpc::Server* server);

  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: Stop wakes the thread with it
  const uint16_t port_;
  std::jthread thread_;
};

}  // namespace weft
