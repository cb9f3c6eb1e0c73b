#include "auth/gatekeeper.h"

#include <sys/stat.h>

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <utility>

#include "auth/credentials.h"
#include "auth/rate_limiter.h"
#include "base/log.h"
#include "base/small_file.h"
#include "base/stoppable_sleep.h"
#include "base/thread_name.h"

namespace weft {
namespace {

constexpr const char* kDeniedHelp = "Requests refused by authentication, by reason: missing, invalid, forbidden.";
constexpr const char* kRateLimitedHelp = "Requests refused by a rate limit (429), by identity.";
constexpr const char* kReloadsHelp = "Credential files read again after a change, by file and outcome.";
constexpr const char* kAuditSuppressedHelp = "Audit log lines not written because of their rate limit.";

// Rate-limited identities get a label each up to this many; the rest share "other", so that a flood of distinct
// JWT subjects or addresses cannot grow the exposition without bound.
constexpr size_t kMaxIdentityLabels = 1000;

// Text from a client (a JWT subject, a route) as it goes into a log line: printable ASCII, bounded.
std::string Printable(std::string_view text, size_t max_bytes = 200) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  for (char c : text.substr(0, max_bytes)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (text.size() > max_bytes) out += "...";
  return out;
}

// What identifies one version of a file: a rewrite in place changes mtime or size, a rename changes the inode.
struct FileSignature {
  int64_t mtime_ns = 0;
  int64_t size = -1;
  uint64_t inode = 0;
  friend bool operator==(const FileSignature&, const FileSignature&) = default;
};

std::optional<FileSignature> SignatureOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileSignature{.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec,
                       .size = st.st_size,
                       .inode = st.st_ino};
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A verified JWT, kept until it expires or the key set changes, with the identity it gives.
struct CachedToken {
  JwtClaims claims;
  std::string identity;
  uint64_t key_generation = 0;
};

// Whether a kept token may still be used: signed under the current key set, and not expired.
bool Usable(const CachedToken& token, uint64_t generation, int64_t now, int64_t skew) {
  return token.key_generation == generation && token.claims.expires_at + skew >= now;
}

// A cache key and its hash, computed once per lookup: the shard and the map both use it, and a JWT credential is
// several hundred bytes.
struct HashedCredential {
  size_t hash;
  std::string_view text;
};
struct CachedCredential {
  size_t hash;
  std::string text;
};
struct CredentialHash {
  using is_transparent = void;
  size_t operator()(const HashedCredential& key) const { return key.hash; }
  size_t operator()(const CachedCredential& key) const { return key.hash; }
};
struct CredentialEqual {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return a.hash == b.hash && std::string_view(a.text) == std::string_view(b.text);
  }
};

// Verified tokens by the full text of the credential that carried them (the Authorization header or metadata), so
// that a credential seen before is found before it is parsed or scanned again: identical bytes parse and verify
// identically, and only credentials that passed both are kept. Sharded; a full shard drops its expired entries,
// then an arbitrary one. A hit allocates nothing and copies nothing but a reference.
class TokenCache {
 public:
  explicit TokenCache(size_t capacity) : per_shard_(std::max<size_t>(1, capacity / kShards)) {}

  std::shared_ptr<const CachedToken> Find(std::string_view credential, uint64_t generation, int64_t now, int64_t skew) {
    const HashedCredential key{std::hash<std::string_view>()(credential), credential};
    Shard& shard = ShardOf(key.hash);
    std::lock_guard lock(shard.mu);
    auto it = shard.tokens.find(key);
    if (it == shard.tokens.end()) return nullptr;
    if (!Usable(*it->second, generation, now, skew)) {
      shard.tokens.erase(it);
      return nullptr;
    }
    return it->second;
  }

  void Put(std::string_view credential, std::shared_ptr<const CachedToken> entry, int64_t now, int64_t skew) {
    const size_t hash = std::hash<std::string_view>()(credential);
    Shard& shard = ShardOf(hash);
    std::lock_guard lock(shard.mu);
    if (shard.tokens.size() >= per_shard_) {
      std::erase_if(shard.tokens, [&](const auto& e) { return !Usable(*e.second, entry->key_generation, now, skew); });
      if (shard.tokens.size() >= per_shard_) shard.tokens.erase(shard.tokens.begin());
    }
    shard.tokens.insert_or_assign(CachedCredential{hash, std::string(credential)}, std::move(entry));
  }

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    std::mutex mu;
    std::unordered_map<CachedCredential, std::shared_ptr<const CachedToken>, CredentialHash, CredentialEqual> tokens;
  };
  // The map takes the hash modulo a prime; the shard takes bits it does not depend on as much.
  Shard& ShardOf(size_t hash) { return shards_[(hash >> 32) % kShards]; }

  const size_t per_shard_;
  std::array<Shard, kShards> shards_;
};

// Who a request comes from, as far as the gatekeeper needs it.
struct Who {
  std::string identity;
  const ScopeSet* scopes = nullptr;    // lives as long as `holder`
  const ApiKey* key = nullptr;         // the key file's entry, when a key named the caller
  std::shared_ptr<const void> holder;  // the key set or the cached token that `scopes` and `key` point into
};

}  // namespace

// A connection's memo. Never holds an API key's secret: a key is found by its SHA-256 at every request.
struct CallerMemo::Contents {
  explicit Contents(uint64_t o) : owner(o) {}
  uint64_t owner;  // the id of the gatekeeper that filled it
  std::shared_ptr<const ApiKeySet> keys;
  uint64_t keys_generation = 0;
  bool keys_read = false;
  std::string jwt_credential;  // the text that carried `jwt`
  std::shared_ptr<const CachedToken> jwt;
};

struct Gatekeeper::State {
  // Unique in the process, unlike an address, which a later gatekeeper may reuse while a memo still names it.
  const uint64_t id = [] {
    static std::atomic<uint64_t> last{0};
    return last.fetch_add(1) + 1;
  }();
  GatekeeperOptions options;
  const Clock* clock = nullptr;

  std::atomic<std::shared_ptr<const ApiKeySet>> keys;
  std::atomic<uint64_t> keys_generation{0};  // counts stores to `keys`, each after its store
  std::atomic<std::shared_ptr<const JsonWebKeySet>> jwks;
  std::atomic<uint64_t> jwks_generation{0};
  std::optional<FileSignature> keys_signature;  // the reload thread's only
  std::optional<FileSignature> jwks_signature;
  std::mutex reload_mu;  // one reload at a time (the thread and ReloadNow)

  TokenCache token_cache{4096};
  RateLimiter limiter;

  MetricsRegistry* metrics = nullptr;
  Counter* denied_missing = nullptr;
  Counter* denied_invalid = nullptr;
  Counter* denied_forbidden = nullptr;
  Counter* audit_suppressed = nullptr;
  std::mutex identity_labels_mu;
  std::map<std::string, Counter*, std::less<>> rate_limited;  // by identity label

  std::mutex audit_mu;
  TokenBucket audit_bucket;
  uint64_t audit_suppressed_since_last = 0;

  std::jthread reload_thread;

  State(GatekeeperOptions o, MetricsRegistry* m, const Clock* c)
      : options(std::move(o)),
        clock(c),
        token_cache(options.jwt_cache_entries),
        limiter(options.max_rate_limited_identities),
        metrics(m) {
    denied_missing = m->GetCounter("weft_auth_denied_total", kDeniedHelp, {{"reason", "missing"}});
    denied_invalid = m->GetCounter("weft_auth_denied_total", kDeniedHelp, {{"reason", "invalid"}});
    denied_forbidden = m->GetCounter("weft_auth_denied_total", kDeniedHelp, {{"reason", "forbidden"}});
    audit_suppressed = m->GetCounter("weft_audit_lines_suppressed_total", kAuditSuppressedHelp);
  }

  bool authenticates() const { return !options.keys_file.empty() || !options.jwks_file.empty(); }

  // Reads the files that changed. Ok, or the first refusal (the old contents stay in use).
  Status Reload(bool at_start) {
    std::lock_guard lock(reload_mu);
    Status first = Status::Ok();
    if (!options.keys_file.empty()) {
      Status s = ReloadOne(options.keys_file, ApiKeySet::kMaxFileBytes, &keys_signature, at_start, "keys",
                           [this](std::string_view text) -> Status {
                             Result<ApiKeySet> parsed = ApiKeySet::Parse(text);
                             if (!parsed.ok()) return parsed.status();
                             const size_t n = parsed->size();
                             keys.store(std::make_shared<const ApiKeySet>(std::move(parsed).value()));
                             keys_generation.fetch_add(1);
                             WEFT_LOG(Info) << "auth: " << n << " API keys from " << options.keys_file;
                             return Status::Ok();
                           });
      if (first.ok()) first = s;
    }
    if (!options.jwks_file.empty()) {
      Status s = ReloadOne(options.jwks_file, JsonWebKeySet::kMaxFileBytes, &jwks_signature, at_start, "jwks",
                           [this](std::string_view text) -> Status {
                             Result<JsonWebKeySet> parsed = JsonWebKeySet::Parse(text);
                             if (!parsed.ok()) return parsed.status();
                             const size_t n = parsed->size();
                             jwks.store(std::make_shared<const JsonWebKeySet>(std::move(parsed).value()));
                             jwks_generation.fetch_add(1);
                             WEFT_LOG(Info) << "auth: " << n << " JSON web keys from " << options.jwks_file;
                             return Status::Ok();
                           });
      if (first.ok()) first = s;
    }
    return first;
  }

  Status ReloadOne(const std::string& path, size_t max_bytes, std::optional<FileSignature>* signature, bool at_start,
                   const char* file_label, const std::function<Status(std::string_view)>& install) {
    std::optional<FileSignature> now = SignatureOf(path);
    if (!at_start && now == *signature) return Status::Ok();
    // Recorded before reading: a bad file is reported once, not at every interval, and read again when it changes.
    *signature = now;
    Result<std::string> text = ReadSmallFile(path, max_bytes);
    Status status = text.ok() ? install(*text) : text.status();
    if (!status.ok()) status = InvalidArgument(path + ": " + status.message());
    metrics
        ->GetCounter("weft_auth_reloads_total", kReloadsHelp,
                     {{"file", file_label}, {"outcome", status.ok() ? "ok" : "refused"}})
        ->Increment();
    if (!status.ok() && !at_start) {
      WEFT_LOG(Error) << "auth: kept the previous file: " << status.message();
    }
    return status;
  }

  void RunReloads(const std::stop_token& stop) {
    while (SleepUnlessStopped(stop, options.reload_interval)) (void)Reload(/*at_start=*/false);
  }

  void CountRateLimited(std::string_view identity) {
    std::string label = identity.starts_with("anonymous") ? "anonymous" : std::string(identity);
    std::lock_guard lock(identity_labels_mu);
    auto it = rate_limited.find(label);
    if (it == rate_limited.end()) {
      if (rate_limited.size() >= kMaxIdentityLabels) label = "other";
      it = rate_limited.find(label);
      if (it == rate_limited.end()) {
        it =
            rate_limited
                .emplace(label, metrics->GetCounter("weft_rate_limited_total", kRateLimitedHelp, {{"identity", label}}))
                .first;
      }
    }
    it->second->Increment();
  }

  // Writes `line` unless the audit rate is spent; says how many were dropped before it.
  void Audit(const std::string& line) {
    uint64_t suppressed = 0;
    {
      std::lock_guard lock(audit_mu);
      const RateLimit limit{options.audit_lines_per_second, std::max(1.0, options.audit_lines_per_second)};
      if (limit.limited() && TakeToken(&audit_bucket, limit, clock->Now()).count() > 0) {
        ++audit_suppressed_since_last;
        audit_suppressed->Increment();
        return;
      }
      suppressed = std::exchange(audit_suppressed_since_last, 0);
    }
    if (suppressed > 0) {
      WEFT_LOG(Warning) << "audit: " << line << " (" << suppressed << " earlier lines not written: rate limit)";
    } else {
      WEFT_LOG(Warning) << "audit: " << line;
    }
  }

  // Who `caller` is: its bearer token, else its certificate's subject in the key file. Unauthenticated (counted
  // and audited) when neither names anyone.
  Result<Who> Identify(const Caller& caller, std::string_view route) {
    CallerMemo::Contents* memo = MemoOf(caller);
    if (std::optional<Who> known = FindVerifiedJwt(caller.authorization, memo)) return *std::move(known);
    Result<std::optional<std::string_view>> bearer = ParseBearer(caller.authorization);
    if (!bearer.ok() || *bearer) {
      Result<Who> who =
          bearer.ok() ? IdentifyToken(caller.authorization, **bearer, memo) : Result<Who>(bearer.status());
      if (!who.ok()) {
        denied_invalid->Increment();
        Audit("authentication failed: peer=" + Printable(caller.peer_address) + " route=" + Printable(route) +
              " reason=" + Printable(who.status().message()));
        return Unauthenticated("unauthenticated: the credential is not valid");
      }
      return who;
    }
    if (!caller.client_subject.empty()) {
      std::shared_ptr<const ApiKeySet> holder;
      const ApiKeySet* set = CurrentKeys(memo, &holder);
      if (const ApiKey* key = set ? set->FindBySubject(caller.client_subject) : nullptr) {
        return Who{.identity = "key:" + key->id, .scopes = &key->scopes, .key = key, .holder = std::move(holder)};
      }
    }
    denied_missing->Increment();
    Audit("authentication failed: peer=" + Printable(caller.peer_address) + " route=" + Printable(route) +
          " reason=no credential");
    return Unauthenticated("unauthenticated: this route needs a credential (Authorization: Bearer)");
  }

  // The memo of `caller`'s connection, emptied when it was filled by another gatekeeper; null without one.
  CallerMemo::Contents* MemoOf(const Caller& caller) {
    if (caller.memo == nullptr) return nullptr;
    std::unique_ptr<CallerMemo::Contents>& contents = caller.memo->contents_;
    if (!contents || contents->owner != id) contents = std::make_unique<CallerMemo::Contents>(id);
    return contents.get();
  }

  // The current key set, from `memo` while the one it holds is still current; `holder` keeps it alive otherwise.
  const ApiKeySet* CurrentKeys(CallerMemo::Contents* memo, std::shared_ptr<const ApiKeySet>* holder) {
    // The generation before the set: a reload in between leaves the memo a generation behind, to be read again.
    const uint64_t generation = keys_generation.load();
    if (memo != nullptr && memo->keys_read && memo->keys_generation == generation) return memo->keys.get();
    *holder = keys.load();
    if (memo != nullptr) {
      memo->keys = *holder;
      memo->keys_generation = generation;
      memo->keys_read = true;
    }
    return holder->get();
  }

  // Who a verified JWT names. Without a memo, `cached` keeps the scopes alive; with one, the memo does until the
  // connection's next request.
  static Who WhoOf(const std::shared_ptr<const CachedToken>& cached, CallerMemo::Contents* memo,
                   std::string_view credential) {
    if (memo != nullptr && memo->jwt != cached) {
      memo->jwt_credential.assign(credential);
      memo->jwt = cached;
    }
    return Who{.identity = cached->identity,
               .scopes = &cached->claims.scopes,
               .key = nullptr,
               .holder = memo != nullptr ? nullptr : cached};
  }

  // The caller of a JWT credential verified before, still unexpired and signed by a key still in the key set:
  // the connection's last one, else one in the cache.
  std::optional<Who> FindVerifiedJwt(std::string_view credential, CallerMemo::Contents* memo) {
    if (credential.empty() || options.jwks_file.empty()) return std::nullopt;
    const uint64_t generation = jwks_generation.load();
    const int64_t now = UnixSeconds();
    const int64_t skew = options.jwt.clock_skew.count();
    // nbf was checked when the token was verified; a kept one can only have grown older since.
    if (memo != nullptr && memo->jwt && memo->jwt_credential == credential) {
      if (Usable(*memo->jwt, generation, now, skew)) return WhoOf(memo->jwt, memo, credential);
      memo->jwt.reset();
    }
    std::shared_ptr<const CachedToken> cached = token_cache.Find(credential, generation, now, skew);
    if (!cached) return std::nullopt;
    return WhoOf(cached, memo, credential);
  }

  // The identity of `token`, the bearer token of `credential`, or why there is none.
  Result<Who> IdentifyToken(std::string_view credential, std::string_view token, CallerMemo::Contents* memo) {
    if (LooksLikeJwt(token)) {
      // The generation before the key set: a reload in between leaves this token cached under the old generation,
      // to be verified again, never a token of the old keys under the new one.
      const uint64_t generation = jwks_generation.load();
      std::shared_ptr<const JsonWebKeySet> set = jwks.load();
      if (!set) return Unauthenticated("JWTs are not accepted by this server (no --auth-jwks)");
      const int64_t now = UnixSeconds();
      Result<JwtClaims> verified = VerifyJwt(token, *set, options.jwt, now);
      if (!verified.ok()) return verified.status();
      auto entry = std::make_shared<CachedToken>();
      entry->identity = "jwt:" + (verified->subject.empty() ? std::string("(no subject)") : verified->subject);
      entry->claims = std::move(verified).value();
      entry->key_generation = generation;
      std::shared_ptr<const CachedToken> cached = std::move(entry);
      token_cache.Put(credential, cached, now, options.jwt.clock_skew.count());
      return WhoOf(cached, memo, credential);
    }
    std::shared_ptr<const ApiKeySet> holder;
    const ApiKeySet* set = CurrentKeys(memo, &holder);
    const ApiKey* found = set ? set->FindBySecret(token) : nullptr;
    if (!found) return Unauthenticated("unknown API key");
    return Who{.identity = "key:" + found->id, .scopes = &found->scopes, .key = found, .holder = std::move(holder)};
  }
};

CallerMemo::CallerMemo() = default;
CallerMemo::~CallerMemo() = default;

Result<std::unique_ptr<Gatekeeper>> Gatekeeper::Create(GatekeeperOptions options, MetricsRegistry* metrics,
                                                       const Clock* clock) {
  if (!options.jwks_file.empty() && options.jwt.issuer.empty() && options.jwt.audience.empty()) {
    WEFT_LOG(Warning) << "auth: JWTs are checked without an issuer or audience (--auth-jwt-issuer, "
                         "--auth-jwt-audience): any token signed by these keys is accepted";
  }
  auto state = std::make_unique<State>(std::move(options), metrics, clock);
  WEFT_RETURN_IF_ERROR(state->Reload(/*at_start=*/true));
  std::unique_ptr<Gatekeeper> gatekeeper(new Gatekeeper(std::move(state)));
  State* s = gatekeeper->state_.get();
  if (s->authenticates() && s->options.reload_interval.count() > 0) {
    s->reload_thread = std::jthread([s](std::stop_token stop) {
      SetCurrentThreadName("auth-reload");
      s->RunReloads(stop);
    });
  }
  return gatekeeper;
}

Gatekeeper::Gatekeeper(std::unique_ptr<State> state) : state_(std::move(state)) {}

Gatekeeper::~Gatekeeper() {
  if (state_->reload_thread.joinable()) {
    state_->reload_thread.request_stop();
    state_->reload_thread.join();
  }
}

bool Gatekeeper::authenticates() const { return state_->authenticates(); }

bool Gatekeeper::active() const { return authenticates() || state_->options.default_limit.limited(); }

Status Gatekeeper::ReloadNow() { return state_->Reload(/*at_start=*/false); }

Status Gatekeeper::Authenticate(const Caller& caller, std::string_view route) {
  if (!state_->authenticates()) return Status::Ok();
  return state_->Identify(caller, route).status();
}

Admission Gatekeeper::Admit(const Caller& caller, Permission permission, std::string_view model,
                            std::string_view route) {
  State& s = *state_;
  const bool health = permission == Permission::kHealth;
  if (health && !s.options.protect_health) return Admission{Status::Ok(), "anonymous"};

  Admission admission;
  const ApiKey* key = nullptr;
  Result<Who> who = Who{};
  if (s.authenticates()) {
    who = s.Identify(caller, route);
    if (!who.ok()) return Admission{who.status(), ""};
    admission.identity = std::move(who->identity);
    key = who->key;
    if (!who->scopes->Allows(permission, model)) {
      s.denied_forbidden->Increment();
      s.Audit("permission denied: identity=" + Printable(admission.identity) + " route=" + Printable(route) +
              " needs=" + std::string(PermissionName(permission)));
      std::string needed(PermissionName(permission));
      if (permission == Permission::kInfer) needed = "infer:" + Printable(model);
      return Admission{PermissionDenied("forbidden: the credential lacks the scope this route needs (" + needed + ")"),
                       std::move(admission.identity)};
    }
  } else {
    admission.identity = "anonymous";
  }

  // Probes and scrapes are not rate-limited: they come from the operator's own systems, at their own pace.
  if (health || permission == Permission::kMetrics) return admission;
  const RateLimit limit = key && key->rate_limit ? *key->rate_limit : s.options.default_limit;
  if (limit.limited()) {
    // Anonymous callers share nothing: each address has its own bucket.
    const std::string bucket =
        admission.identity == "anonymous" ? "anonymous@" + std::string(caller.peer_address) : admission.identity;
    const std::chrono::nanoseconds wait = s.limiter.Acquire(bucket, limit, s.clock->Now());
    if (wait.count() > 0) {
      s.CountRateLimited(admission.identity);
      auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(wait);
      std::ostringstream message;
      message << "rate limit: over " << limit.rate << " requests per second for this caller";
      admission.status = ResourceExhausted(message.str()).WithRetryAfter(wait_ms);
    }
  }
  return admission;
}

void Gatekeeper::AuditAdmin(const Admission& admission, std::string_view route, std::string_view outcome) {
  state_->Audit("admin: identity=" + Printable(admission.identity) + " route=" + Printable(route) +
                " outcome=" + Printable(outcome));
}

}  // namespace weft
