#pragma once

#include <grpcpp/server_context.h>

#include <string>
#include <string_view>

namespace weft {

// Who is calling, as the frontends need it for authentication, rate limits and the audit log. Cheap enough to call
// once per call: a few string operations and, on the plaintext port, one getpeername.

// The subject of the client's verified certificate in RFC 2253 form ("CN=camera-7,O=acme"), the same string the HTTP
// frontend gives (CertificateSubject). Empty when the port has no TLS, asks no client certificate, or the client
// sent none (gRPC verified any certificate it did send against the client CA during the handshake).
std::string ClientCertificateSubject(const grpc::ServerContextBase& context);

// The client's IP address, without port, brackets or gRPC's "ipv4:"/"ipv6:" scheme ("127.0.0.1", "::1"); an
// IPv4-mapped IPv6 address is given as IPv4. On the plaintext port gRPC knows a connection only by its descriptor
// ("fd:12", see GrpcAcceptor): the address is then read from that descriptor, which gRPC keeps open while the
// connection lives. (Once the client has gone, gRPC closes it and the number may already name a newer
// connection: a call whose client disconnected can be attributed to another address. Such a call is cancelled and
// its answer goes nowhere.) Empty when there is no IP address (a Unix socket) or it cannot be read.
std::string PeerAddress(const grpc::ServerContextBase& context);

// PeerAddress for gRPC's peer string ("ipv4:10.0.0.1:5000", "ipv6:[::1]:5000", "fd:12", "unix:/path").
std::string PeerAddressOf(std::string_view grpc_peer);

}  // namespace weft
