#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "auth/api_keys.h"
#include "auth/jwt.h"
#include "auth/scopes.h"
#include "base/clock.h"
#include "base/result.h"
#include "metrics/metrics.h"

namespace weft {

// What the server asks of its callers (docs/security.md). Authentication is on when a key file or a JWKS is given,
// and then every route but the health checks (unless closed too) needs a credential with the route's scope.
// Rate limits apply with or without authentication.
struct GatekeeperOptions {
  std::string keys_file;        // --auth-keys: ApiKeySet JSON; read again when it changes
  std::string jwks_file;        // --auth-jwks: JsonWebKeySet JSON; read again when it changes
  JwtPolicy jwt;                // --auth-jwt-issuer, --auth-jwt-audience, --auth-jwt-clock-skew-secs
  bool protect_health = false;  // --auth-protect-health: health checks need a credential too (any scope)
  RateLimit default_limit;      // --rate-limit: every caller without a limit of its own, anonymous ones included
  std::chrono::milliseconds reload_interval{1000};  // how often the files are checked for a change
  double audit_lines_per_second = 20;               // audit lines past this are counted, not written
  size_t jwt_cache_entries = 4096;                  // verified tokens kept, so a token's signature is checked once
  size_t max_rate_limited_identities = 100000;      // token buckets held at once
};

// What the gatekeeper keeps between the requests of one connection: the key set it last read and the JWT the
// connection last presented, so that a keep-alive client's next request is admitted without parsing its
// credential again and without writing memory that the other I/O threads share (docs/security.md). Owned by the
// connection and used by one thread at a time. A connection that never calls holds one pointer.
class CallerMemo {
 public:
  CallerMemo();
  ~CallerMemo();
  CallerMemo(const CallerMemo&) = delete;
  CallerMemo& operator=(const CallerMemo&) = delete;

 private:
  friend class Gatekeeper;
  struct Contents;
  std::unique_ptr<Contents> contents_;
};

// Who a request comes from, as its frontend saw it. Views: valid for the call only.
struct Caller {
  std::string_view authorization;   // the Authorization header (HTTP) or authorization metadata (gRPC); may be empty
  std::string_view client_subject;  // a verified client certificate's subject (mTLS); empty when none
  std::string_view peer_address;    // the client's IP address
  CallerMemo* memo = nullptr;       // the connection's, when it has one
};

// The answer for one request.
struct Admission {
  // Ok; Unauthenticated (no or a bad credential); PermissionDenied (a good one without the scope);
  // ResourceExhausted with retry_after (over the caller's rate). The message names no model and says nothing
  // about the server's state.
  Status status;
  // Who the request runs as, for logs: "key:<id>", "jwt:<sub>", "anonymous"; empty when unauthenticated.
  std::string identity;
};

// Checks credentials, scopes and rate limits for both frontends and the metrics port. Reads its files at Create
// and again when they change (a bad new file is logged and the old one kept). Thread-safe: Admit is called on every
// request, from any thread, and takes no lock but a rate limiter shard's and, for JWTs, a cache shard's.
class Gatekeeper {
 public:
  // InvalidArgument naming the file when a given file cannot be read or parsed.
  static Result<std::unique_ptr<Gatekeeper>> Create(GatekeeperOptions options, MetricsRegistry* metrics,
                                                    const Clock* clock = &RealClock::Instance());
  ~Gatekeeper();
  Gatekeeper(const Gatekeeper&) = delete;
  Gatekeeper& operator=(const Gatekeeper&) = delete;

  // Whether callers need a credential (a key file or a JWKS was given).
  bool authenticates() const;
  // Whether Admit could refuse anything at all; false: the frontends may skip it.
  bool active() const;

  // May `caller` use a route that needs `permission` (on `model`, for kInfer) now? `route` ("POST /v2/...") is
  // for the audit log only. Refusals are counted, and authentication failures audited.
  Admission Admit(const Caller& caller, Permission permission, std::string_view model, std::string_view route);
  // Only the credential: Ok when authentication is off or `caller` holds a valid one, whatever its scopes. For a
  // call whose scopes are checked later (each request of a stream names its model).
  Status Authenticate(const Caller& caller, std::string_view route);
  // Writes the audit line of an admin action (repository control, rollouts, settings, shared memory) once it is
  // answered. Rate-limited.
  void AuditAdmin(const Admission& admission, std::string_view route, std::string_view outcome);
  // Checks the files now instead of at the next interval (tests; SIGHUP). Ok, or why the new file was refused.
  Status ReloadNow();

 private:
  struct State;
  explicit Gatekeeper(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace weft
