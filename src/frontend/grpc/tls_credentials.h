#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>

#include "auth/tls_files.h"
#include "base/result.h"

namespace weft {

// gRPC's TLS credentials for a port with `tls` enabled. The files are checked here with OpenSSL first: gRPC's
// file watcher only logs what it cannot read, which would leave a port that fails every handshake. InvalidArgument
// naming the file when a file cannot be read or holds no certificate or key in PEM, or when the key does not
// belong to the certificate.
//
// Then gRPC owns them: a FileWatcherCertificateProvider reads the files again every `tls.reload_interval` (rounded
// up to whole seconds, at least one), so a renewed certificate or client CA is used for new connections while the
// open ones keep theirs. Client certificates are asked for only with `tls.client_ca_file`, and verified against it
// during the handshake: required with `tls.require_client_cert`, else optional (a client that sends one must still
// send a valid one). The TLS versions are gRPC's own, TLS 1.2 and 1.3: gRPC 1.51's C++ API has no setting for them.
Result<std::shared_ptr<grpc::ServerCredentials>> TlsServerCredentialsFor(const TlsFiles& tls);

}  // namespace weft
