#include "auth/api_keys.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <memory>
#include <set>
#include <utility>

#include "base/log.h"

namespace weft {
namespace {

namespace dom = simdjson::dom;

// Limits on one key. An id names a client in logs and metric labels; a scope list of more than a few dozen entries
// is already a mistake, so these only keep a broken or hostile file from costing much.
constexpr size_t kMaxIdBytes = 128;
constexpr size_t kMaxSubjectBytes = 4096;
constexpr size_t kMaxScopesPerKey = 1024;
constexpr size_t kMaxScopeBytes = 256;

// A number in full, or nullopt (no leading '+', spaces or trailing characters; from_chars takes "inf" and "nan",
// which the callers refuse as not finite).
std::optional<double> ParseNumber(std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::array<uint8_t, 32>> ParseDigest(std::string_view hex) {
  std::array<uint8_t, 32> digest{};
  if (hex.size() != 2 * digest.size()) return std::nullopt;
  for (size_t i = 0; i < digest.size(); ++i) {
    const int high = HexValue(hex[2 * i]);
    const int low = HexValue(hex[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    digest[i] = static_cast<uint8_t>(high << 4 | low);
  }
  return digest;
}

bool IsPrintableAscii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

// The members of one key, each found at most once.
struct KeyMembers {
  std::optional<dom::element> id, sha256, subject, scopes, rate, burst;

  std::optional<dom::element>* Slot(std::string_view name) {
    if (name == "id") return &id;
    if (name == "sha256") return &sha256;
    if (name == "subject") return &subject;
    if (name == "scopes") return &scopes;
    if (name == "rate") return &rate;
    if (name == "burst") return &burst;
    return nullptr;
  }
};

// One entry of "keys". `where` names it in errors ("key 3"); the id is added once it is known.
Result<ApiKey> ParseKey(dom::element entry, std::string where) {
  dom::object object;
  if (entry.get_object().get(object)) return InvalidArgument(where + ": must be a JSON object");
  KeyMembers members;
  for (dom::key_value_pair member : object) {
    std::optional<dom::element>* slot = members.Slot(member.key);
    if (slot == nullptr) {
      return InvalidArgument(where + ": unknown field '" + std::string(member.key.substr(0, kMaxScopeBytes)) +
                             "' (the fields are id, sha256, subject, scopes, rate and burst)");
    }
    if (slot->has_value()) return InvalidArgument(where + ": field '" + std::string(member.key) + "' is given twice");
    *slot = member.value;
  }

  ApiKey key;
  std::string_view text;
  if (!members.id) return InvalidArgument(where + ": has no 'id'");
  if (members.id->get_string().get(text) || text.empty() || text.size() > kMaxIdBytes || !IsPrintableAscii(text)) {
    return InvalidArgument(where + ": 'id' must be a string of 1 to " + std::to_string(kMaxIdBytes) +
                           " printable ASCII characters");
  }
  key.id = std::string(text);
  where += " ('" + key.id + "')";

  if (members.sha256) {
    if (members.sha256->get_string().get(text) || !(key.sha256 = ParseDigest(text))) {
      return InvalidArgument(where + ": 'sha256' must be 64 hex digits (the SHA-256 of the secret)");
    }
  }
  if (members.subject) {
    if (members.subject->get_string().get(text) || text.empty() || text.size() > kMaxSubjectBytes) {
      return InvalidArgument(where + ": 'subject' must be a non-empty string of at most " +
                             std::to_string(kMaxSubjectBytes) + " bytes");
    }
    key.subject = std::string(text);
  }
  if (!key.sha256 && key.subject.empty()) {
    return InvalidArgument(where + ": has neither 'sha256' nor 'subject', so no client can present it");
  }

  // A key without scopes would authenticate and then be refused everywhere; more likely the list was forgotten.
  if (!members.scopes)
    return InvalidArgument(where + ": has no 'scopes' (write [] for a key that may reach health only)");
  dom::array list;
  if (members.scopes->get_array().get(list)) return InvalidArgument(where + ": 'scopes' must be an array of strings");
  std::vector<std::string> scopes;
  for (dom::element item : list) {
    if (scopes.size() == kMaxScopesPerKey) {
      return InvalidArgument(where + ": 'scopes' has more than " + std::to_string(kMaxScopesPerKey) + " entries");
    }
    if (item.get_string().get(text) || text.size() > kMaxScopeBytes) {
      return InvalidArgument(where + ": 'scopes' must hold strings of at most " + std::to_string(kMaxScopeBytes) +
                             " bytes");
    }
    scopes.emplace_back(text);
  }
  Result<ScopeSet> scope_set = ScopeSet::Parse(scopes);
  if (!scope_set.ok()) return InvalidArgument(where + ": 'scopes': " + scope_set.status().message());
  key.scopes = std::move(*scope_set);

  if (members.rate) {
    double rate = 0;
    if (members.rate->get_double().get(rate) || !std::isfinite(rate) || rate <= 0) {
      return InvalidArgument(where + ": 'rate' must be a number of requests per second above 0");
    }
    double burst = std::max(1.0, rate);
    if (members.burst && (members.burst->get_double().get(burst) || !std::isfinite(burst) || burst < 1)) {
      return InvalidArgument(where + ": 'burst' must be a number of at least 1");
    }
    key.rate_limit = RateLimit{.rate = rate, .burst = burst};
  } else if (members.burst) {
    return InvalidArgument(where + ": 'burst' needs a 'rate'");
  }
  return key;
}

}  // namespace

Result<RateLimit> ParseRateLimit(std::string_view text) {
  const size_t colon = text.find(':');
  const std::optional<double> rate = ParseNumber(text.substr(0, colon));
  if (!rate || !std::isfinite(*rate) || *rate <= 0) {
    return InvalidArgument("rate limit '" + std::string(text) +
                           "': RATE must be a number of requests per second above 0 (RATE[:BURST])");
  }
  RateLimit limit{.rate = *rate, .burst = std::max(1.0, *rate)};
  if (colon != std::string_view::npos) {
    const std::optional<double> burst = ParseNumber(text.substr(colon + 1));
    if (!burst || !std::isfinite(*burst) || *burst < 1) {
      return InvalidArgument("rate limit '" + std::string(text) + "': BURST must be a number of at least 1");
    }
    limit.burst = *burst;
  }
  return limit;
}

Result<ApiKeySet> ApiKeySet::Parse(std::string_view json) {
  if (json.size() > kMaxFileBytes) {
    return InvalidArgument("the key file has more than " + std::to_string(kMaxFileBytes) + " bytes");
  }
  simdjson::padded_string padded(json);
  dom::parser parser;
  dom::element root;
  if (auto error = parser.parse(padded).get(root)) {
    return InvalidArgument(std::string("the key file is not JSON: ") + simdjson::error_message(error));
  }
  dom::object top;
  if (root.get_object().get(top)) return InvalidArgument("the key file must be a JSON object: {\"keys\": [...]}");
  std::optional<dom::element> keys_member;
  for (dom::key_value_pair member : top) {
    if (member.key != "keys") {
      return InvalidArgument("the key file has an unknown field '" + std::string(member.key.substr(0, kMaxScopeBytes)) +
                             "' (only 'keys')");
    }
    if (keys_member) return InvalidArgument("the key file gives 'keys' twice");
    keys_member = member.value;
  }
  dom::array entries;
  if (!keys_member || keys_member->get_array().get(entries)) {
    return InvalidArgument("the key file must have 'keys', an array of keys");
  }

  ApiKeySet set;
  std::set<std::string_view> ids;
  std::set<std::array<uint8_t, 32>> digests;
  std::set<std::string_view> subjects;
  size_t index = 0;
  for (dom::element entry : entries) {
    if (index == kMaxKeys) return InvalidArgument("the key file has more than " + std::to_string(kMaxKeys) + " keys");
    WEFT_ASSIGN_OR_RETURN(ApiKey key, ParseKey(entry, "key " + std::to_string(index)));
    set.keys_.push_back(std::move(key));
    ++index;
  }
  // The views point into keys_, which no longer grows.
  for (size_t i = 0; i < set.keys_.size(); ++i) {
    const ApiKey& key = set.keys_[i];
    const std::string where = "key " + std::to_string(i) + " ('" + key.id + "')";
    if (!ids.insert(key.id).second) return InvalidArgument(where + ": the id is given to an earlier key too");
    if (key.sha256 && !digests.insert(*key.sha256).second) {
      return InvalidArgument(where + ": the sha256 is an earlier key's too (one secret, one identity)");
    }
    if (!key.subject.empty()) {
      if (!subjects.insert(key.subject).second) {
        return InvalidArgument(where + ": the subject is an earlier key's too");
      }
      set.by_subject_.push_back(i);
    }
    if (key.sha256) set.by_digest_.push_back(i);
  }
  std::sort(set.by_digest_.begin(), set.by_digest_.end(),
            [&keys = set.keys_](size_t a, size_t b) { return *keys[a].sha256 < *keys[b].sha256; });
  std::sort(set.by_subject_.begin(), set.by_subject_.end(),
            [&keys = set.keys_](size_t a, size_t b) { return keys[a].subject < keys[b].subject; });
  return set;
}

const ApiKey* ApiKeySet::FindBySecret(std::string_view secret) const {
  const std::array<uint8_t, 32> digest = Sha256(secret);
  // A search by digest, not by secret: where it stops depends on SHA-256 of what the caller sent, which tells the
  // caller nothing about any key's secret. The last comparison is in constant time all the same.
  auto it =
      std::lower_bound(by_digest_.begin(), by_digest_.end(), digest,
                       [this](size_t index, const std::array<uint8_t, 32>& d) { return *keys_[index].sha256 < d; });
  if (it == by_digest_.end()) return nullptr;
  const ApiKey& key = keys_[*it];
  return CRYPTO_memcmp(key.sha256->data(), digest.data(), digest.size()) == 0 ? &key : nullptr;
}

const ApiKey* ApiKeySet::FindBySubject(std::string_view subject) const {
  auto it = std::lower_bound(by_subject_.begin(), by_subject_.end(), subject,
                             [this](size_t index, std::string_view s) { return keys_[index].subject < s; });
  if (it == by_subject_.end() || keys_[*it].subject != subject) return nullptr;
  return &keys_[*it];
}

std::array<uint8_t, 32> Sha256(std::string_view data) {
  // Fetched once: EVP_sha256() makes OpenSSL 3 look the implementation up at every call, which took 300 ns of the
  // 420 ns that hashing a key took (it runs on every request that carries a key).
  static EVP_MD* const kSha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  // A context per thread, reused: EVP_Digest makes one per call and takes a reference on the digest, a count that
  // every thread writes. Two threads hashing a key took 320 ns each that way, 112 ns with their own contexts.
  thread_local const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                                     &EVP_MD_CTX_free);
  std::array<uint8_t, 32> digest{};
  unsigned int size = 0;
  // Fails only without memory or without the default provider: the environment is broken.
  WEFT_CHECK(kSha256 != nullptr && context != nullptr && EVP_DigestInit_ex2(context.get(), kSha256, nullptr) == 1 &&
             EVP_DigestUpdate(context.get(), data.data(), data.size()) == 1 &&
             EVP_DigestFinal_ex(context.get(), digest.data(), &size) == 1 && size == digest.size())
      << "SHA-256 failed";
  return digest;
}

std::string Sha256Hex(std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::array<uint8_t, 32> digest = Sha256(data);
  std::string hex;
  hex.reserve(2 * digest.size());
  for (uint8_t byte : digest) {
    hex += kHex[byte >> 4];
    hex += kHex[byte & 0xf];
  }
  return hex;
}

}  // namespace weft
