#include "frontend/grpc/peer_identity.h"

#include <arpa/inet.h>
#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <charconv>
#include <memory>
#include <vector>

#include "auth/certificate_subject.h"

namespace weft {

namespace {

// The address of the socket `fd`'s other end as text, or empty.
std::string AddressOfSocket(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return {};
  sockaddr_storage address{};
  socklen_t size = sizeof(address);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) return {};
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    if (inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text)) == nullptr) return {};
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
      // As gRPC's own peer strings give it, and as the same client reaches an IPv4 listener.
      if (inet_ntop(AF_INET, &v6->sin6_addr.s6_addr[12], text, sizeof(text)) == nullptr) return {};
    } else if (inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text)) == nullptr) {
      return {};
    }
  } else {
    return {};
  }
  return text;
}

// gRPC writes a scope's '%' as "%25" (the address is a URI).
std::string UnescapePercent(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i).starts_with("%25")) {
      out += '%';
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

std::string ClientCertificateSubject(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (!auth) return {};
  std::vector<grpc::string_ref> pem = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (pem.empty()) return {};
  Result<std::string> subject = CertificateSubjectOfPem(std::string_view(pem.front().data(), pem.front().size()));
  return subject.ok() ? std::move(subject).value() : std::string();
}

std::string PeerAddress(const grpc::ServerContextBase& context) { return PeerAddressOf(context.peer()); }

std::string PeerAddressOf(std::string_view peer) {
  if (peer.starts_with("ipv4:")) {
    peer.remove_prefix(5);
    const size_t colon = peer.rfind(':');
    return std::string(peer.substr(0, colon));
  }
  if (peer.starts_with("ipv6:")) {
    peer.remove_prefix(5);
    if (!peer.starts_with('[')) return {};
    const size_t close = peer.find(']');
    if (close == std::string_view::npos) return {};
    std::string address = UnescapePercent(peer.substr(1, close - 1));
    in_addr v4{};
    if (address.starts_with("::ffff:") && inet_pton(AF_INET, address.c_str() + 7, &v4) == 1) address.erase(0, 7);
    return address;
  }
  if (peer.starts_with("fd:")) {
    peer.remove_prefix(3);
    int fd = -1;
    auto [end, error] = std::from_chars(peer.data(), peer.data() + peer.size(), fd);
    if (error != std::errc() || end != peer.data() + peer.size() || fd < 0) return {};
    return AddressOfSocket(fd);
  }
  return {};
}

}  // namespace weft
