#pragma once

#include <openssl/err.h>

namespace weft {

// Leaves this thread's OpenSSL error queue as it found it: what a failed check pushed there must not be read later as
// the error of an unrelated call on the same thread (SSL_get_error, and gRPC after its own calls, read the queue).
class OpensslErrorScope {
 public:
  OpensslErrorScope() { ERR_set_mark(); }
  ~OpensslErrorScope() { ERR_pop_to_mark(); }
  OpensslErrorScope(const OpensslErrorScope&) = delete;
  OpensslErrorScope& operator=(const OpensslErrorScope&) = delete;
};

}  // namespace weft
