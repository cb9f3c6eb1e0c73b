#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

typedef struct x509_st X509;  // NOLINT(modernize-use-using): OpenSSL's own declaration

namespace weft {

// A certificate's subject as one line in RFC 2253 form ("CN=camera-7,O=acme"), the identity a verified client
// certificate gives (mTLS). One format for HTTP and gRPC, so that a key file's "subject" matches on both.
std::string CertificateSubject(X509* certificate);
// The same for a PEM certificate (gRPC hands over the peer's certificate as PEM). InvalidArgument when it does
// not parse.
Result<std::string> CertificateSubjectOfPem(std::string_view pem);

}  // namespace weft
