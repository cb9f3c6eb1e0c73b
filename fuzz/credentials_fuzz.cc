// Fuzzes authentication's parsers of untrusted input (src/auth/): ParseBearer and LooksLikeJwt (the Authorization
// header or `authorization` metadata of every request), ApiKeySet::Parse (--auth-keys), JsonWebKeySet::Parse
// (--auth-jwks), and VerifyJwt against a fixed key set (an RSA, a P-256 and an oct key, below): on tokens as sent,
// and on a header and payload that the target signs itself with the oct key, so that the claim checks behind the
// signature are reached too.
//
// Besides the sanitizers it checks: a bearer token is a non-empty token68 inside the header value; every refusal
// has its documented code (Unauthenticated for credentials, InvalidArgument for files); a token VerifyJwt accepts
// has a JWT's shape, an expiry not yet passed (with the skew) and scopes that read back as themselves; an accepted
// key file keeps its bounds (ids of 1 to 128 printable characters, unique; a secret's digest or a subject on each
// key; rates above 0 and bursts of at least 1), finds each key by its subject, and finds a key by a secret only
// when the secret's SHA-256 is the key's; an accepted key set keeps within 256 keys.
//
// Input: the first byte picks the parser (its value modulo 5; the seeds use the digits '0' to '4'), the rest is:
// 0: an Authorization value, whose token is then checked as the server would (VerifyJwt when LooksLikeJwt);
// 1: a key file; 2: a JWKS, which then checks a fixed HS256 token; 3: a token; 4: a JWT header (JSON), '\n', and
// its payload (JSON), which the target encodes and signs with HS256 and the oct key.

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cctype>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "auth/api_keys.h"
#include "auth/credentials.h"
#include "auth/jwt.h"
#include "auth/scopes.h"
#include "base/log.h"
#include "fuzz/fuzz_target.h"

namespace weft {
namespace {

// The public halves of keys made for this target only, and a 32-byte secret ("weft-fuzz-hs256-secret-32-bytes!").
constexpr std::string_view kJwks =
    R"({"keys":[)"
    R"({"kty":"RSA","kid":"rsa-1","e":"AQAB","n":")"
    "swqHIpA1VN4U41iGI-NSbr5LG7tq4qOcSrnaZqnFmgWpZDbVkED65sG4KCWjpwtW-5__CH0s5VG4jejClIDh1RE_DYmY0Oywq3oi"
    "mdzc1uMVW6JR2U3TLcqBDmnJz53mHYJfzgxoyKQEimPwSTo_jDtz0jSgwYKFNhfJ-Qmay0e6UE_wvhLQCvkPLCAh05lTurqzI-IV"
    "rTesvFM6tPtI3y2NGsFAAp8ezv41NnO5sMLL6ocSmuCFRl3PqpoG-tIg4xurFbAMC5DRth32ug1ZfPWfSj8F1M9NKaJbOkwbnuyZ"
    "P-ms_iGX78deMO7D7jXm0otSyrQ2EwIIKq1VW9SSIw"
    R"("},)"
    R"({"kty":"EC","kid":"ec-1","crv":"P-256","x":"OeaoouHQ_maZTjjQBKIwv7pL5PFIo1GhmUsA5VK2Zvk",)"
    R"("y":"l-1Y2m7JYjCxf_3Ck6ZTYXTARFE_I25HTjchmheO3To"},)"
    R"({"kty":"oct","kid":"oct-1","k":"d2VmdC1mdXp6LWhzMjU2LXNlY3JldC0zMi1ieXRlcyE"}]})";
constexpr std::string_view kSecret = "weft-fuzz-hs256-secret-32-bytes!";
// An HS256 token of the secret above: {"alg":"HS256","kid":"oct-1"} and {"sub":"fuzz","exp":4102444800}.
constexpr std::string_view kFixedToken =
    "eyJhbGciOiJIUzI1NiIsImtpZCI6Im9jdC0xIn0.eyJzdWIiOiJmdXp6IiwiZXhwIjo0MTAyNDQ0ODAwfQ."
    "q0VTVNqkhwxxbg84gG1jy2UXJY1mWXRKVqdM-N6p2_c";
constexpr int64_t kNow = 1700000000;

const JsonWebKeySet& FixedKeys() {
  static const JsonWebKeySet* keys = [] {
    Result<JsonWebKeySet> parsed = JsonWebKeySet::Parse(kJwks);
    WEFT_CHECK(parsed.ok()) << "the fixed key set does not parse: " << parsed.status().ToString();
    WEFT_CHECK(parsed->size() == 3) << "the fixed key set has " << parsed->size() << " keys";
    return new JsonWebKeySet(std::move(*parsed));
  }();
  return *keys;
}

JwtPolicy Policy() { return JwtPolicy{.issuer = "https://issuer.example", .audience = "weft"}; }

std::string Base64Url(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t pending = 0;
  int bits = 0;
  for (char c : bytes) {
    pending = (pending << 8 | static_cast<uint8_t>(c)) & 0xffff;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[pending >> bits & 63];
    }
  }
  if (bits > 0) out += kAlphabet[pending << (6 - bits) & 63];
  return out;
}

void CheckScopes(const ScopeSet& scopes) {
  const std::string text = scopes.ToString();
  WEFT_CHECK(ScopeSet::ParseClaim(text).ToString() == text) << "scopes '" << text << "' read back otherwise";
}

void CheckVerdict(std::string_view token, const Result<JwtClaims>& claims, const JwtPolicy& policy) {
  if (!claims.ok()) {
    WEFT_CHECK(claims.status().code() == StatusCode::kUnauthenticated)
        << "unexpected error " << claims.status().ToString();
    return;
  }
  WEFT_CHECK(LooksLikeJwt(token)) << "an accepted token without a JWT's shape";
  WEFT_CHECK(token.size() <= kMaxTokenBytes) << "an accepted token of " << token.size() << " bytes";
  WEFT_CHECK(claims->expires_at + policy.clock_skew.count() > kNow) << "accepted after exp " << claims->expires_at;
  CheckScopes(claims->scopes);
}

bool IsToken68(std::string_view token) {
  size_t i = 0;
  while (i < token.size() && (std::isalnum(static_cast<unsigned char>(token[i])) ||
                              std::string_view("-._~+/").find(token[i]) != std::string_view::npos)) {
    ++i;
  }
  if (i == 0) return false;
  while (i < token.size() && token[i] == '=') ++i;
  return i == token.size();
}

void CheckBearer(std::string_view header) {
  Result<std::optional<std::string_view>> token = ParseBearer(header);
  if (!token.ok()) {
    WEFT_CHECK(token.status().code() == StatusCode::kUnauthenticated) << token.status().ToString();
    return;
  }
  if (!token->has_value()) return;
  const std::string_view value = **token;
  WEFT_CHECK(value.data() >= header.data() && value.data() + value.size() <= header.data() + header.size())
      << "the token is not inside the header";
  WEFT_CHECK(IsToken68(value)) << "token '" << value << "' is not a token68";
  if (LooksLikeJwt(value)) CheckVerdict(value, VerifyJwt(value, FixedKeys(), Policy(), kNow), Policy());
}

void CheckKeyFile(std::string_view json) {
  Result<ApiKeySet> set = ApiKeySet::Parse(json);
  if (!set.ok()) {
    WEFT_CHECK(set.status().code() == StatusCode::kInvalidArgument) << set.status().ToString();
    return;
  }
  WEFT_CHECK(set->size() <= ApiKeySet::kMaxKeys) << set->size() << " keys";
  std::set<std::string> ids;
  for (const ApiKey& key : set->keys()) {
    WEFT_CHECK(!key.id.empty() && key.id.size() <= 128) << "id of " << key.id.size() << " bytes";
    for (char c : key.id) WEFT_CHECK(c >= 0x20 && c <= 0x7e) << "id '" << key.id << "' is not printable ASCII";
    WEFT_CHECK(ids.insert(key.id).second) << "id '" << key.id << "' twice";
    WEFT_CHECK(key.sha256 || !key.subject.empty()) << "key '" << key.id << "' has neither digest nor subject";
    if (!key.subject.empty()) {
      WEFT_CHECK(set->FindBySubject(key.subject) == &key) << "key '" << key.id << "' is not found by its subject";
    }
    if (key.rate_limit) {
      WEFT_CHECK(std::isfinite(key.rate_limit->rate) && key.rate_limit->rate > 0) << "rate " << key.rate_limit->rate;
      WEFT_CHECK(std::isfinite(key.rate_limit->burst) && key.rate_limit->burst >= 1)
          << "burst " << key.rate_limit->burst;
    }
    CheckScopes(key.scopes);
  }
  // The file's own text as a secret: found only by its digest.
  if (const ApiKey* found = set->FindBySecret(json)) {
    WEFT_CHECK(found->sha256 && *found->sha256 == Sha256(json)) << "key '" << found->id << "' found by another secret";
  }
}

void CheckKeySet(std::string_view json) {
  Result<JsonWebKeySet> keys = JsonWebKeySet::Parse(json);
  if (!keys.ok()) {
    WEFT_CHECK(keys.status().code() == StatusCode::kInvalidArgument) << keys.status().ToString();
    return;
  }
  WEFT_CHECK(keys->size() <= JsonWebKeySet::kMaxKeys) << keys->size() << " keys";
  CheckVerdict(kFixedToken, VerifyJwt(kFixedToken, *keys, JwtPolicy{}, kNow), JwtPolicy{});
}

void CheckSignedToken(FramedInput input) {
  const std::string_view header = input.Line();
  const std::string_view payload = input.Rest();
  const std::string signed_part = Base64Url(header) + "." + Base64Url(payload);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_size = 0;
  WEFT_CHECK(HMAC(EVP_sha256(), kSecret.data(), static_cast<int>(kSecret.size()),
                  reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size(), mac,
                  &mac_size) != nullptr)
      << "HMAC failed";
  const std::string token =
      signed_part + "." + Base64Url(std::string_view(reinterpret_cast<const char*>(mac), mac_size));
  CheckVerdict(token, VerifyJwt(token, FixedKeys(), Policy(), kNow), Policy());
  CheckVerdict(token, VerifyJwt(token, FixedKeys(), JwtPolicy{}, kNow), JwtPolicy{});
}

void Run(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const FramedInput rest(data + 1, size - 1);
  switch (data[0] % 5) {
    case 0: return CheckBearer(rest.Rest());
    case 1: return CheckKeyFile(rest.Rest());
    case 2: return CheckKeySet(rest.Rest());
    case 3: {
      const std::string_view token = rest.Rest();
      return CheckVerdict(token, VerifyJwt(token, FixedKeys(), Policy(), kNow), Policy());
    }
    default: return CheckSignedToken(rest);
  }
}

}  // namespace
}  // namespace weft

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::SetLogLevel(weft::LogLevel::kError);
  weft::FixedKeys();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::Run(data, size);
  return 0;
}
