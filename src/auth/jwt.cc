#include "auth/jwt.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <simdjson.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>
#include <utility>

#include "auth/openssl_error_scope.h"

namespace weft {
namespace {

enum class JwtAlgorithm : uint8_t { kRs256, kEs256, kHs256 };

namespace dom = simdjson::dom;

// Bounds on one key's members: RSA moduli up to 16384 bits (verification cost grows with the square of the size),
// exponents up to 64 bits, HMAC secrets up to 1 KiB, key ids up to 256 bytes.
constexpr size_t kMinRsaBits = 2048;
constexpr size_t kMaxRsaBytes = 16384 / 8;
constexpr size_t kMaxRsaExponentBytes = 8;
constexpr size_t kMinHmacKeyBytes = 32;
constexpr size_t kMaxHmacKeyBytes = 1024;
constexpr size_t kMaxKidBytes = 256;
constexpr size_t kP256CoordinateBytes = 32;
constexpr size_t kEs256SignatureBytes = 2 * kP256CoordinateBytes;
constexpr size_t kHs256SignatureBytes = 32;
// NumericDates and the skew are clamped to these, so that sums of them cannot overflow.
constexpr int64_t kMaxDate = int64_t{1} << 62;
constexpr int64_t kMaxSkewSeconds = int64_t{1} << 32;

struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using UniquePkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

std::string_view AlgorithmName(JwtAlgorithm algorithm) {
  switch (algorithm) {
    case JwtAlgorithm::kRs256: return "RS256";
    case JwtAlgorithm::kEs256: return "ES256";
    case JwtAlgorithm::kHs256: return "HS256";
  }
  return "?";
}

std::optional<JwtAlgorithm> AlgorithmNamed(std::string_view name) {
  if (name == "RS256") return JwtAlgorithm::kRs256;
  if (name == "ES256") return JwtAlgorithm::kEs256;
  if (name == "HS256") return JwtAlgorithm::kHs256;
  return std::nullopt;
}

// Text from a token, fit for a log line: at most 64 characters, anything but printable ASCII as '?'.
std::string Printable(std::string_view text) {
  std::string out(text.substr(0, 64));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  if (text.size() > 64) out += "...";
  return out;
}

int Base64UrlValue(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

// RFC 4648 section 5 without padding, as JWS and JWK use it. Strict: no '=', no other characters, and the bits
// left over after the last whole byte must be zero, so that each byte string has exactly one encoding.
std::optional<std::string> DecodeBase64Url(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  uint32_t pending = 0;
  int pending_bits = 0;
  for (char c : text) {
    const int value = Base64UrlValue(c);
    if (value < 0) return std::nullopt;
    pending = (pending << 6 | static_cast<uint32_t>(value)) & 0xfff;
    pending_bits += 6;
    if (pending_bits >= 8) {
      pending_bits -= 8;
      out.push_back(static_cast<char>(pending >> pending_bits));
      pending &= (uint32_t{1} << pending_bits) - 1;
    }
  }
  if (pending != 0) return std::nullopt;
  return out;
}

// Builds a public key of `type` ("RSA", "EC") from `params`, and has OpenSSL check it.
UniquePkey PublicKeyFromParams(const char* type, const OSSL_PARAM* params) {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr),
                                                                  &EVP_PKEY_CTX_free);
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, const_cast<OSSL_PARAM*>(params)) != 1) {
    return nullptr;
  }
  UniquePkey key(raw);
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> check(
      EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr), &EVP_PKEY_CTX_free);
  if (!check || EVP_PKEY_public_check(check.get()) != 1) return nullptr;
  return key;
}

struct ParamBuilder {
  ParamBuilder() : builder(OSSL_PARAM_BLD_new()) {}
  ~ParamBuilder() { OSSL_PARAM_BLD_free(builder); }
  ParamBuilder(const ParamBuilder&) = delete;
  ParamBuilder& operator=(const ParamBuilder&) = delete;
  OSSL_PARAM_BLD* builder;
};

struct ParamsFree {
  void operator()(OSSL_PARAM* params) const { OSSL_PARAM_free(params); }
};
struct BignumFree {
  void operator()(BIGNUM* n) const { BN_free(n); }
};
using UniqueBignum = std::unique_ptr<BIGNUM, BignumFree>;

UniqueBignum BignumOf(std::string_view bytes) {
  return UniqueBignum(
      BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()), nullptr));
}

std::string_view StripLeadingZeros(std::string_view bytes) {
  while (!bytes.empty() && bytes.front() == '\0') bytes.remove_prefix(1);
  return bytes;
}

UniquePkey RsaPublicKey(std::string_view modulus, std::string_view exponent) {
  UniqueBignum n = BignumOf(modulus);
  UniqueBignum e = BignumOf(exponent);
  ParamBuilder params;
  if (!n || !e || params.builder == nullptr ||
      OSSL_PARAM_BLD_push_BN(params.builder, OSSL_PKEY_PARAM_RSA_N, n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(params.builder, OSSL_PKEY_PARAM_RSA_E, e.get()) != 1) {
    return nullptr;
  }
  std::unique_ptr<OSSL_PARAM, ParamsFree> built(OSSL_PARAM_BLD_to_param(params.builder));
  return built ? PublicKeyFromParams("RSA", built.get()) : nullptr;
}

UniquePkey P256PublicKey(std::string_view x, std::string_view y) {
  // The uncompressed point of SEC 1: 0x04, x, y.
  std::string point = "\x04";
  point.append(x);
  point.append(y);
  ParamBuilder params;
  if (params.builder == nullptr ||
      OSSL_PARAM_BLD_push_utf8_string(params.builder, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) != 1 ||
      OSSL_PARAM_BLD_push_octet_string(params.builder, OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()) != 1) {
    return nullptr;
  }
  std::unique_ptr<OSSL_PARAM, ParamsFree> built(OSSL_PARAM_BLD_to_param(params.builder));
  return built ? PublicKeyFromParams("EC", built.get()) : nullptr;
}

// The members of one JWK that this server reads, each found at most once; the rest are ignored (RFC 7517 4).
struct JwkMembers {
  std::optional<dom::element> kty, kid, use, alg, n, e, crv, x, y, k;

  std::optional<dom::element>* Slot(std::string_view name) {
    if (name == "kty") return &kty;
    if (name == "kid") return &kid;
    if (name == "use") return &use;
    if (name == "alg") return &alg;
    if (name == "n") return &n;
    if (name == "e") return &e;
    if (name == "crv") return &crv;
    if (name == "x") return &x;
    if (name == "y") return &y;
    if (name == "k") return &k;
    return nullptr;
  }
};

}  // namespace

struct JsonWebKeySet::Key {
  Key() = default;
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;
  ~Key() { OPENSSL_cleanse(secret.data(), secret.size()); }

  JwtAlgorithm algorithm = JwtAlgorithm::kRs256;
  std::string kid;
  UniquePkey public_key;  // RS256 and ES256
  std::string secret;     // HS256
};

namespace {

using Key = JsonWebKeySet::Key;

// A member that must be a string when present; `where` and `name` name it in the error.
Result<std::optional<std::string_view>> StringMember(const std::optional<dom::element>& member,
                                                     const std::string& where, std::string_view name) {
  if (!member) return std::optional<std::string_view>();
  std::string_view text;
  if (member->get_string().get(text)) return InvalidArgument(where + ": '" + std::string(name) + "' must be a string");
  return std::optional<std::string_view>(text);
}

// A required base64url member, decoded.
Result<std::string> BytesMember(const std::optional<dom::element>& member, const std::string& where,
                                std::string_view name) {
  WEFT_ASSIGN_OR_RETURN(std::optional<std::string_view> text, StringMember(member, where, name));
  if (!text) return InvalidArgument(where + ": has no '" + std::string(name) + "'");
  std::optional<std::string> bytes = DecodeBase64Url(*text);
  if (!bytes) return InvalidArgument(where + ": '" + std::string(name) + "' is not base64url");
  return std::move(*bytes);
}

// One entry of "keys"; null for a key that is not for signatures.
Result<std::shared_ptr<const Key>> ParseJwk(dom::element entry, size_t index) {
  std::string where = "key " + std::to_string(index);
  dom::object object;
  if (entry.get_object().get(object)) return InvalidArgument(where + ": must be a JSON object");
  JwkMembers members;
  for (dom::key_value_pair member : object) {
    std::optional<dom::element>* slot = members.Slot(member.key);
    if (slot == nullptr) continue;
    if (slot->has_value()) return InvalidArgument(where + ": '" + std::string(member.key) + "' is given twice");
    *slot = member.value;
  }
  auto key = std::make_shared<Key>();
  WEFT_ASSIGN_OR_RETURN(std::optional<std::string_view> kid, StringMember(members.kid, where, "kid"));
  if (kid) {
    if (kid->size() > kMaxKidBytes) {
      return InvalidArgument(where + ": 'kid' has more than " + std::to_string(kMaxKidBytes) + " bytes");
    }
    key->kid = std::string(*kid);
    where += " ('" + Printable(key->kid) + "')";
  }
  WEFT_ASSIGN_OR_RETURN(std::optional<std::string_view> use, StringMember(members.use, where, "use"));
  if (use && *use != "sig") return std::shared_ptr<const Key>();
  WEFT_ASSIGN_OR_RETURN(std::optional<std::string_view> kty, StringMember(members.kty, where, "kty"));
  if (!kty) return InvalidArgument(where + ": has no 'kty'");

  if (*kty == "RSA") {
    key->algorithm = JwtAlgorithm::kRs256;
    WEFT_ASSIGN_OR_RETURN(std::string n, BytesMember(members.n, where, "n"));
    WEFT_ASSIGN_OR_RETURN(std::string e, BytesMember(members.e, where, "e"));
    const std::string_view modulus = StripLeadingZeros(n);
    const std::string_view exponent = StripLeadingZeros(e);
    if (modulus.size() > kMaxRsaBytes) {
      return InvalidArgument(where + ": the RSA modulus has more than " + std::to_string(kMaxRsaBytes * 8) + " bits");
    }
    if (modulus.empty() ||
        (modulus.size() - 1) * 8 + std::bit_width(static_cast<uint8_t>(modulus.front())) < kMinRsaBits) {
      return InvalidArgument(where + ": the RSA modulus has fewer than " + std::to_string(kMinRsaBits) + " bits");
    }
    if (exponent.empty() || exponent.size() > kMaxRsaExponentBytes) {
      return InvalidArgument(where + ": the RSA exponent must be 1 to " + std::to_string(kMaxRsaExponentBytes) +
                             " bytes");
    }
    key->public_key = RsaPublicKey(modulus, exponent);
    if (!key->public_key) {
      return InvalidArgument(where +
                             ": not a valid RSA public key (OpenSSL's check wants an odd modulus without "
                             "small factors and an odd exponent above 1)");
    }
  } else if (*kty == "EC") {
    key->algorithm = JwtAlgorithm::kEs256;
    WEFT_ASSIGN_OR_RETURN(std::optional<std::string_view> crv, StringMember(members.crv, where, "crv"));
    if (!crv) return InvalidArgument(where + ": has no 'crv'");
    if (*crv != "P-256") return InvalidArgument(where + ": unsupported crv '" + Printable(*crv) + "' (only P-256)");
    WEFT_ASSIGN_OR_RETURN(std::string x, BytesMember(members.x, where, "x"));
    WEFT_ASSIGN_OR_RETURN(std::string y, BytesMember(members.y, where, "y"));
    if (x.size() != kP256CoordinateBytes || y.size() != kP256CoordinateBytes) {
      return InvalidArgument(where + ": 'x' and 'y' of a P-256 key must be 32 bytes each");
    }
    key->public_key = P256PublicKey(x, y);
    if (!key->public_key) return InvalidArgument(where + ": the point (x, y) is not on P-256");
  } else if (*kty == "oct") {
    key->algorithm = JwtAlgorithm::kHs256;
    WEFT_ASSIGN_OR_RETURN(key->secret, BytesMember(members.k, where, "k"));
    if (key->secret.size() < kMinHmacKeyBytes || key->secret.size() > kMaxHmacKeyBytes) {
      return InvalidArgument(where + ": an oct key must have " + std::to_string(kMinHmacKeyBytes) + " to " +
                             std::to_string(kMaxHmacKeyBytes) + " bytes (HS256)");
    }
  } else {
    return InvalidArgument(where + ": unsupported kty '" + Printable(*kty) + "' (RSA, EC or oct)");
  }

  WEFT_ASSIGN_OR_RETURN(std::optional<std::string_view> alg, StringMember(members.alg, where, "alg"));
  if (alg && *alg != AlgorithmName(key->algorithm)) {
    return InvalidArgument(where + ": 'alg' is '" + Printable(*alg) + "', but a key of kty " + std::string(*kty) +
                           " verifies " + std::string(AlgorithmName(key->algorithm)) + " only");
  }
  return std::shared_ptr<const Key>(std::move(key));
}

// RFC 7518 3.4: an ES256 signature is r and s, 32 bytes each; OpenSSL verifies the DER form of ECDSA-Sig-Value.
std::optional<std::string> EcdsaSignatureAsDer(std::string_view raw) {
  std::unique_ptr<ECDSA_SIG, decltype(&ECDSA_SIG_free)> signature(ECDSA_SIG_new(), &ECDSA_SIG_free);
  UniqueBignum r = BignumOf(raw.substr(0, kP256CoordinateBytes));
  UniqueBignum s = BignumOf(raw.substr(kP256CoordinateBytes));
  if (!signature || !r || !s || ECDSA_SIG_set0(signature.get(), r.get(), s.get()) != 1) return std::nullopt;
  r.release();  // owned by `signature` now
  s.release();
  const int size = i2d_ECDSA_SIG(signature.get(), nullptr);
  if (size <= 0) return std::nullopt;
  std::string der(static_cast<size_t>(size), '\0');
  auto* out = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_ECDSA_SIG(signature.get(), &out) != size) return std::nullopt;
  return der;
}

bool VerifyWithPublicKey(EVP_PKEY* key, std::string_view signed_part, std::string_view signature) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  // RSA keys verify with PKCS #1 v1.5 padding, OpenSSL's default.
  return ctx && EVP_DigestVerifyInit_ex(ctx.get(), nullptr, "SHA256", nullptr, nullptr, key, nullptr) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                          reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size()) == 1;
}

// `signature` is the decoded signature, of the length the key's algorithm has (checked by the caller for ES256
// and HS256), DER already for ES256.
bool VerifySignature(const Key& key, std::string_view signed_part, std::string_view signature) {
  if (key.algorithm != JwtAlgorithm::kHs256) return VerifyWithPublicKey(key.public_key.get(), signed_part, signature);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_size = 0;
  if (HMAC(EVP_sha256(), key.secret.data(), static_cast<int>(key.secret.size()),
           reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size(), mac, &mac_size) == nullptr ||
      mac_size != signature.size()) {
    return false;
  }
  return CRYPTO_memcmp(mac, signature.data(), mac_size) == 0;
}

Status Refused(std::string why) { return Unauthenticated("JWT refused: " + why); }

// A JSON object decoded from a base64url segment, parsed by this thread's parser (which the next parse reuses).
Result<dom::object> ParseSegment(std::string_view encoded, std::string_view name) {
  std::optional<std::string> json = DecodeBase64Url(encoded);
  if (!json) return Refused("the " + std::string(name) + " is not base64url");
  thread_local dom::parser parser;
  dom::element root;
  if (auto error = parser.parse(simdjson::padded_string(*json)).get(root)) {
    return Refused("the " + std::string(name) + " is not JSON: " + simdjson::error_message(error));
  }
  dom::object object;
  if (root.get_object().get(object)) return Refused("the " + std::string(name) + " is not a JSON object");
  return object;
}

// A NumericDate (RFC 7519 2) in whole seconds, clamped to +-kMaxDate; nullopt when it is not a number.
std::optional<int64_t> NumericDate(dom::element value) {
  int64_t whole = 0;
  uint64_t unsigned_whole = 0;
  double fraction = 0;
  if (!value.get_int64().get(whole)) return std::clamp(whole, -kMaxDate, kMaxDate);
  if (!value.get_uint64().get(unsigned_whole)) return kMaxDate;  // only values above INT64_MAX get here
  if (!value.get_double().get(fraction)) {
    return static_cast<int64_t>(std::floor(std::clamp(fraction, double(-kMaxDate), double(kMaxDate))));
  }
  return std::nullopt;
}

// The header members read here, each found at most once; the rest are ignored.
struct JwtHeader {
  std::optional<dom::element> alg, kid, crit;

  std::optional<dom::element>* Slot(std::string_view name) {
    if (name == "alg") return &alg;
    if (name == "kid") return &kid;
    if (name == "crit") return &crit;
    return nullptr;
  }
};

// The claims read here, each found at most once; the rest are ignored.
struct JwtPayload {
  std::optional<dom::element> exp, nbf, iss, aud, sub, scope;

  std::optional<dom::element>* Slot(std::string_view name) {
    if (name == "exp") return &exp;
    if (name == "nbf") return &nbf;
    if (name == "iss") return &iss;
    if (name == "aud") return &aud;
    if (name == "sub") return &sub;
    if (name == "scope") return &scope;
    return nullptr;
  }
};

Status CheckAudience(const std::optional<dom::element>& aud, const std::string& audience) {
  if (!aud) return audience.empty() ? Status::Ok() : Refused("no aud, and the audience must be " + audience);
  std::string_view text;
  if (!aud->get_string().get(text)) {
    return audience.empty() || text == audience ? Status::Ok()
                                                : Refused("aud '" + Printable(text) + "' is not " + audience);
  }
  dom::array list;
  if (aud->get_array().get(list)) return Refused("aud is neither a string nor an array of strings");
  bool found = false;
  for (dom::element item : list) {
    if (item.get_string().get(text)) return Refused("aud is neither a string nor an array of strings");
    found = found || text == audience;
  }
  return audience.empty() || found ? Status::Ok() : Refused("aud does not hold " + audience);
}

}  // namespace

JsonWebKeySet::JsonWebKeySet() = default;
JsonWebKeySet::~JsonWebKeySet() = default;
JsonWebKeySet::JsonWebKeySet(JsonWebKeySet&&) noexcept = default;
JsonWebKeySet& JsonWebKeySet::operator=(JsonWebKeySet&&) noexcept = default;

size_t JsonWebKeySet::size() const { return keys_.size(); }

Result<JsonWebKeySet> JsonWebKeySet::Parse(std::string_view json) {
  if (json.size() > kMaxFileBytes) {
    return InvalidArgument("the JWKS file has more than " + std::to_string(kMaxFileBytes) + " bytes");
  }
  OpensslErrorScope errors;
  simdjson::padded_string padded(json);
  dom::parser parser;
  dom::element root;
  if (auto error = parser.parse(padded).get(root)) {
    return InvalidArgument(std::string("the JWKS file is not JSON: ") + simdjson::error_message(error));
  }
  dom::object top;
  if (root.get_object().get(top)) return InvalidArgument("the JWKS file must be a JSON object: {\"keys\": [...]}");
  std::optional<dom::element> keys_member;
  for (dom::key_value_pair member : top) {
    if (member.key != "keys") continue;
    if (keys_member) return InvalidArgument("the JWKS file gives 'keys' twice");
    keys_member = member.value;
  }
  dom::array entries;
  if (!keys_member || keys_member->get_array().get(entries)) {
    return InvalidArgument("the JWKS file must have 'keys', an array of keys (RFC 7517 5)");
  }
  JsonWebKeySet set;
  size_t index = 0;
  for (dom::element entry : entries) {
    if (index == kMaxKeys) return InvalidArgument("the JWKS file has more than " + std::to_string(kMaxKeys) + " keys");
    WEFT_ASSIGN_OR_RETURN(std::shared_ptr<const Key> key, ParseJwk(entry, index));
    if (key) set.keys_.push_back(std::move(key));
    ++index;
  }
  return set;
}

Result<JwtClaims> VerifyJwt(std::string_view token, const JsonWebKeySet& keys, const JwtPolicy& policy, int64_t now) {
  if (token.size() > kMaxTokenBytes) {
    return Refused("the token has more than " + std::to_string(kMaxTokenBytes) + " bytes");
  }
  const size_t first_dot = token.find('.');
  const size_t second_dot = first_dot == std::string_view::npos ? first_dot : token.find('.', first_dot + 1);
  if (second_dot == std::string_view::npos || token.find('.', second_dot + 1) != std::string_view::npos) {
    return Refused("not a compact JWS (three segments joined by dots)");
  }
  const std::string_view encoded_header = token.substr(0, first_dot);
  const std::string_view encoded_payload = token.substr(first_dot + 1, second_dot - first_dot - 1);
  const std::string_view encoded_signature = token.substr(second_dot + 1);
  if (encoded_header.empty() || encoded_payload.empty()) return Refused("an empty header or payload");
  if (encoded_signature.empty()) return Refused("the token is not signed");
  OpensslErrorScope errors;

  // The header: only what chooses the key. Its strings are copied out before the payload reuses the parser.
  WEFT_ASSIGN_OR_RETURN(dom::object header_object, ParseSegment(encoded_header, "header"));
  JwtHeader header;
  for (dom::key_value_pair member : header_object) {
    std::optional<dom::element>* slot = header.Slot(member.key);
    if (slot == nullptr) continue;
    if (slot->has_value()) return Refused("the header gives '" + std::string(member.key) + "' twice");
    *slot = member.value;
  }
  // RFC 7515 4.1.11: extensions marked critical must be understood, and this server understands none.
  if (header.crit) return Refused("the header has 'crit' extensions");
  std::string_view alg_name;
  if (!header.alg || header.alg->get_string().get(alg_name)) return Refused("the header has no alg string");
  const std::optional<JwtAlgorithm> algorithm = AlgorithmNamed(alg_name);
  if (!algorithm) return Refused("alg '" + Printable(alg_name) + "' is not accepted (RS256, ES256 or HS256 only)");
  std::string_view kid_view;
  if (header.kid && header.kid->get_string().get(kid_view)) return Refused("the header's kid is not a string");
  const std::string kid(kid_view);

  std::optional<std::string> signature = DecodeBase64Url(encoded_signature);
  if (!signature) return Refused("the signature is not base64url");
  if (*algorithm == JwtAlgorithm::kEs256) {
    if (signature->size() != kEs256SignatureBytes) {
      return Refused("an ES256 signature has 64 bytes (r and s), this one " + std::to_string(signature->size()));
    }
    signature = EcdsaSignatureAsDer(*signature);
    if (!signature) return Internal("cannot encode an ECDSA signature: out of memory");
  } else if (*algorithm == JwtAlgorithm::kHs256 && signature->size() != kHs256SignatureBytes) {
    return Refused("an HS256 signature has 32 bytes, this one " + std::to_string(signature->size()));
  }

  // Only keys of the header's algorithm are tried, so that no key is ever used with an algorithm other than its
  // own (an RSA public key as an HMAC secret, say).
  const std::string_view signed_part = token.substr(0, second_dot);
  bool kid_found = false;
  bool algorithm_found = false;
  bool verified = false;
  for (const std::shared_ptr<const JsonWebKeySet::Key>& key : keys.keys()) {
    if (header.kid) {
      if (key->kid != kid) continue;
      kid_found = true;
    }
    if (key->algorithm != *algorithm) continue;
    algorithm_found = true;
    if (VerifySignature(*key, signed_part, *signature)) {
      verified = true;
      break;
    }
  }
  if (!verified) {
    if (header.kid && !kid_found) return Refused("no key has kid '" + Printable(kid) + "'");
    if (!algorithm_found) {
      return Refused(header.kid ? "the key '" + Printable(kid) + "' does not verify " + std::string(alg_name)
                                : "no key verifies " + std::string(alg_name));
    }
    return Refused("the signature does not verify");
  }

  WEFT_ASSIGN_OR_RETURN(dom::object payload_object, ParseSegment(encoded_payload, "payload"));
  JwtPayload payload;
  for (dom::key_value_pair member : payload_object) {
    std::optional<dom::element>* slot = payload.Slot(member.key);
    if (slot == nullptr) continue;
    if (slot->has_value()) return Refused("the payload gives '" + std::string(member.key) + "' twice");
    *slot = member.value;
  }

  const int64_t skew = std::clamp<int64_t>(policy.clock_skew.count(), 0, kMaxSkewSeconds);
  now = std::clamp(now, -kMaxDate, kMaxDate);
  if (!payload.exp) return Refused("no exp");
  const std::optional<int64_t> expires_at = NumericDate(*payload.exp);
  if (!expires_at) return Refused("exp is not a number");
  if (now >= *expires_at + skew) {
    return Refused("expired at " + std::to_string(*expires_at) + ", now is " + std::to_string(now) + " (skew " +
                   std::to_string(skew) + " s)");
  }
  if (payload.nbf) {
    const std::optional<int64_t> not_before = NumericDate(*payload.nbf);
    if (!not_before) return Refused("nbf is not a number");
    if (now + skew < *not_before) {
      return Refused("not valid before " + std::to_string(*not_before) + ", now is " + std::to_string(now) + " (skew " +
                     std::to_string(skew) + " s)");
    }
  }
  std::string_view text;
  if (payload.iss && payload.iss->get_string().get(text)) return Refused("iss is not a string");
  if (!policy.issuer.empty()) {
    if (!payload.iss) return Refused("no iss, and the issuer must be " + policy.issuer);
    if (text != policy.issuer) return Refused("iss '" + Printable(text) + "' is not " + policy.issuer);
  }
  WEFT_RETURN_IF_ERROR(CheckAudience(payload.aud, policy.audience));

  JwtClaims claims;
  claims.key_id = kid;
  claims.expires_at = *expires_at;
  if (payload.sub) {
    if (payload.sub->get_string().get(text)) return Refused("sub is not a string");
    claims.subject = std::string(text);
  }
  if (payload.scope) {
    if (payload.scope->get_string().get(text)) return Refused("scope is not a string");
    claims.scopes = ScopeSet::ParseClaim(text);
  }
  return claims;
}

}  // namespace weft
