#include "auth/api_keys.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft {
namespace {

// SHA-256("abc"), FIPS 180-2's first example.
constexpr std::string_view kAbcDigest = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

std::string KeyFile(const std::string& keys) { return R"({"keys": [)" + keys + "]}"; }

ApiKeySet ParsedKeys(const std::string& json) {
  Result<ApiKeySet> set = ApiKeySet::Parse(json);
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  return set.ok() ? std::move(*set) : ApiKeySet();
}

// The error for `json`, which must be refused.
std::string Refusal(const std::string& json) {
  Result<ApiKeySet> set = ApiKeySet::Parse(json);
  if (set.ok()) return "(accepted)";
  EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument) << set.status().ToString();
  return set.status().message();
}

TEST(Sha256Test, MatchesTheStandardsExamples) {
  EXPECT_EQ(Sha256Hex("abc"), kAbcDigest);
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::array<uint8_t, 32> digest = Sha256("abc");
  EXPECT_EQ(digest[0], 0xba);
  EXPECT_EQ(digest[31], 0xad);
}

TEST(ParseRateLimitTest, ReadsRateAndBurst) {
  auto parsed = [](std::string_view text) {
    Result<RateLimit> limit = ParseRateLimit(text);
    EXPECT_TRUE(limit.ok()) << text << ": " << limit.status().ToString();
    return limit.ok() ? *limit : RateLimit{};
  };
  EXPECT_EQ(parsed("100"), (RateLimit{.rate = 100, .burst = 100}));
  EXPECT_EQ(parsed("10:20"), (RateLimit{.rate = 10, .burst = 20}));
  EXPECT_EQ(parsed("0.5"), (RateLimit{.rate = 0.5, .burst = 1}));
  EXPECT_EQ(parsed("2.5:1"), (RateLimit{.rate = 2.5, .burst = 1}));
  EXPECT_EQ(parsed("1e3:1.5"), (RateLimit{.rate = 1000, .burst = 1.5}));
  EXPECT_TRUE(parsed("1").limited());
  EXPECT_FALSE(RateLimit{}.limited());
}

TEST(ParseRateLimitTest, RefusesWhatIsNotARateOrABurst) {
  for (std::string_view text : {"", "0", "-1", "0:5", "inf", "nan", "1:0.5", "1:0", "1:", ":5", "x", "1:2:3", " 1",
                                "1 ", "+1", "1:inf", "1e400", "10/s"}) {
    Result<RateLimit> limit = ParseRateLimit(text);
    ASSERT_FALSE(limit.ok()) << "'" << text << "'";
    EXPECT_EQ(limit.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(ApiKeySetTest, ReadsAGoodFile) {
  const ApiKeySet set = ParsedKeys(KeyFile(R"(
    {"id": "cam-ingest", "sha256": ")" + std::string(kAbcDigest) +
                                           R"(", "scopes": ["infer:detector"],
     "rate": 100, "burst": 200},
    {"id": "camera-7", "subject": "CN=camera-7,O=acme", "scopes": ["infer", "metadata"]},
    {"id": "ops", "sha256": ")" + Sha256Hex("ops secret") +
                                           R"(", "subject": "CN=ops", "scopes": ["admin"],
     "rate": 0.5},
    {"id": "probe", "sha256": ")" + Sha256Hex("probe") +
                                           R"(", "scopes": [], "rate": 7})"));
  ASSERT_EQ(set.size(), 4u);
  const ApiKey& ingest = set.keys()[0];
  EXPECT_EQ(ingest.id, "cam-ingest");
  ASSERT_TRUE(ingest.sha256.has_value());
  EXPECT_EQ(*ingest.sha256, Sha256("abc"));
  EXPECT_TRUE(ingest.subject.empty());
  EXPECT_EQ(ingest.scopes.ToString(), "infer:detector");
  EXPECT_EQ(ingest.rate_limit, (RateLimit{.rate = 100, .burst = 200}));

  const ApiKey& camera = set.keys()[1];
  EXPECT_FALSE(camera.sha256.has_value());
  EXPECT_EQ(camera.subject, "CN=camera-7,O=acme");
  EXPECT_EQ(camera.scopes.ToString(), "metadata infer");
  EXPECT_FALSE(camera.rate_limit.has_value());

  // burst defaults to max(1, rate).
  EXPECT_EQ(set.keys()[2].rate_limit, (RateLimit{.rate = 0.5, .burst = 1}));
  EXPECT_EQ(set.keys()[3].rate_limit, (RateLimit{.rate = 7, .burst = 7}));
  EXPECT_TRUE(set.keys()[3].scopes.empty());
}

TEST(ApiKeySetTest, FindsKeysBySecretAndBySubject) {
  const ApiKeySet set = ParsedKeys(KeyFile(R"(
    {"id": "a", "sha256": ")" + Sha256Hex("secret-a") +
                                           R"(", "scopes": ["infer"]},
    {"id": "b", "sha256": ")" + Sha256Hex("secret-b") +
                                           R"(", "subject": "CN=b", "scopes": ["metrics"]},
    {"id": "c", "subject": "CN=c,O=acme", "scopes": []},
    {"id": "d", "sha256": ")" + std::string(kAbcDigest) +
                                           R"(", "scopes": []})"));
  ASSERT_NE(set.FindBySecret("secret-a"), nullptr);
  EXPECT_EQ(set.FindBySecret("secret-a")->id, "a");
  ASSERT_NE(set.FindBySecret("secret-b"), nullptr);
  EXPECT_EQ(set.FindBySecret("secret-b")->id, "b");
  ASSERT_NE(set.FindBySecret("abc"), nullptr);
  EXPECT_EQ(set.FindBySecret("abc")->id, "d");
  for (std::string_view wrong : {std::string_view(""), std::string_view("secret-a "), std::string_view("Secret-a"),
                                 std::string_view("secret-c"), kAbcDigest}) {
    EXPECT_EQ(set.FindBySecret(wrong), nullptr) << wrong;
  }
  ASSERT_NE(set.FindBySubject("CN=b"), nullptr);
  EXPECT_EQ(set.FindBySubject("CN=b")->id, "b");
  ASSERT_NE(set.FindBySubject("CN=c,O=acme"), nullptr);
  EXPECT_EQ(set.FindBySubject("CN=c,O=acme")->id, "c");
  for (std::string_view wrong : {"", "CN=a", "CN=c", "cn=b", "CN=b ", "CN=c,O=acme,C=DE"}) {
    EXPECT_EQ(set.FindBySubject(wrong), nullptr) << wrong;
  }
  // A copy finds the same keys in its own storage.
  const ApiKeySet copy = set;
  ASSERT_NE(copy.FindBySubject("CN=b"), nullptr);
  EXPECT_EQ(copy.FindBySubject("CN=b"), &copy.keys()[1]);
}

TEST(ApiKeySetTest, FindsEachOfManyKeysBySecretAndNoOther) {
  std::string entries;
  for (int i = 0; i < 2000; ++i) {
    if (i > 0) entries += ",";
    entries += R"({"id": "k)" + std::to_string(i) + R"(", "sha256": ")" + Sha256Hex("secret-" + std::to_string(i)) +
               R"(", "scopes": []})";
  }
  const ApiKeySet set = ParsedKeys(KeyFile(entries));
  for (int i = 0; i < 2000; ++i) {
    const ApiKey* key = set.FindBySecret("secret-" + std::to_string(i));
    ASSERT_NE(key, nullptr) << i;
    EXPECT_EQ(key->id, "k" + std::to_string(i));
  }
  for (int i = 2000; i < 2100; ++i) EXPECT_EQ(set.FindBySecret("secret-" + std::to_string(i)), nullptr) << i;
  const ApiKeySet copy = set;
  EXPECT_EQ(copy.FindBySecret("secret-7"), &copy.keys()[7]);
}

TEST(ApiKeySetTest, AcceptsAnUppercaseDigestAndAnEmptyList) {
  std::string upper(kAbcDigest);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const ApiKeySet set = ParsedKeys(KeyFile(R"({"id": "a", "sha256": ")" + upper + R"(", "scopes": []})"));
  ASSERT_NE(set.FindBySecret("abc"), nullptr);
  EXPECT_EQ(ParsedKeys(KeyFile("")).size(), 0u);
}

TEST(ApiKeySetTest, RefusesEveryMalformedFieldNamingTheKeyAndTheField) {
  const std::string digest(kAbcDigest);
  struct Case {
    std::string key;       // the second key of the file; the first is good
    std::string expected;  // in the message
  };
  const std::vector<Case> cases = {
      {R"("not an object")", "key 1: must be a JSON object"},
      {R"({"sha256": ")" + digest + R"(", "scopes": []})", "key 1: has no 'id'"},
      {R"({"id": "", "subject": "CN=x", "scopes": []})", "key 1: 'id'"},
      {R"({"id": 7, "subject": "CN=x", "scopes": []})", "key 1: 'id'"},
      {R"({"id": ")" + std::string(129, 'x') + R"(", "subject": "CN=x", "scopes": []})", "key 1: 'id'"},
      {R"({"id": "tab\there", "subject": "CN=x", "scopes": []})", "key 1: 'id'"},
      {R"({"id": "caf\u00e9", "subject": "CN=x", "scopes": []})", "key 1: 'id'"},
      {R"({"id": "k", "scopes": []})", "key 1 ('k'): has neither 'sha256' nor 'subject'"},
      {R"({"id": "k", "sha256": ")" + digest.substr(1) + R"(", "scopes": []})", "key 1 ('k'): 'sha256'"},
      {R"({"id": "k", "sha256": ")" + digest + R"(0", "scopes": []})", "key 1 ('k'): 'sha256'"},
      {R"({"id": "k", "sha256": ")" + digest.substr(1) + R"(g", "scopes": []})", "key 1 ('k'): 'sha256'"},
      {R"({"id": "k", "sha256": 5, "scopes": []})", "key 1 ('k'): 'sha256'"},
      {R"({"id": "k", "subject": "", "scopes": []})", "key 1 ('k'): 'subject'"},
      {R"({"id": "k", "subject": ["CN=x"], "scopes": []})", "key 1 ('k'): 'subject'"},
      {R"({"id": "k", "subject": ")" + std::string(4097, 'x') + R"(", "scopes": []})", "key 1 ('k'): 'subject'"},
      {R"({"id": "k", "subject": "CN=x"})", "key 1 ('k'): has no 'scopes'"},
      {R"({"id": "k", "subject": "CN=x", "scopes": "infer"})", "key 1 ('k'): 'scopes' must be an array"},
      {R"({"id": "k", "subject": "CN=x", "scopes": [1]})", "key 1 ('k'): 'scopes' must hold strings"},
      {R"({"id": "k", "subject": "CN=x", "scopes": ["inference"]})",
       "key 1 ('k'): 'scopes': unknown scope 'inference'"},
      {R"({"id": "k", "subject": "CN=x", "scopes": [")" + std::string(257, 'x') + R"("]})", "'scopes' must hold"},
      {R"({"id": "k", "subject": "CN=x", "scopes": [], "rate": 0})", "key 1 ('k'): 'rate'"},
      {R"({"id": "k", "subject": "CN=x", "scopes": [], "rate": -5})", "key 1 ('k'): 'rate'"},
      {R"({"id": "k", "subject": "CN=x", "scopes": [], "rate": "5"})", "key 1 ('k'): 'rate'"},
      {R"({"id": "k", "subject": "CN=x", "scopes": [], "rate": 5, "burst": 0.5})", "key 1 ('k'): 'burst'"},
      {R"({"id": "k", "subject": "CN=x", "scopes": [], "rate": 5, "burst": null})", "key 1 ('k'): 'burst'"},
      {R"({"id": "k", "subject": "CN=x", "scopes": [], "burst": 5})", "key 1 ('k'): 'burst' needs a 'rate'"},
      {R"({"id": "k", "subject": "CN=x", "scopes": [], "scope": []})", "key 1: unknown field 'scope'"},
      {R"({"id": "k", "subject": "CN=x", "scopes": [], "secret": "abc"})", "key 1: unknown field 'secret'"},
      {R"({"id": "k", "id": "j", "subject": "CN=x", "scopes": []})", "key 1: field 'id' is given twice"},
      {R"({"id": "k", "subject": "CN=x", "scopes": [], "scopes": []})", "key 1: field 'scopes' is given twice"},
  };
  for (const Case& c : cases) {
    const std::string message =
        Refusal(KeyFile(R"({"id": "good", "sha256": ")" + Sha256Hex("good") + R"(", "scopes": []}, )" + c.key));
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.key << "\n  gave: " << message;
  }
}

TEST(ApiKeySetTest, RefusesDuplicates) {
  const std::string a = R"({"id": "a", "sha256": ")" + Sha256Hex("a") + R"(", "subject": "CN=a", "scopes": []})";
  EXPECT_NE(Refusal(KeyFile(a + R"(, {"id": "a", "subject": "CN=b", "scopes": []})")).find("key 1 ('a'): the id"),
            std::string::npos);
  EXPECT_NE(Refusal(KeyFile(a + R"(, {"id": "b", "sha256": ")" + Sha256Hex("a") + R"(", "scopes": []})"))
                .find("key 1 ('b'): the sha256"),
            std::string::npos);
  // The same digest written in the other case is the same secret.
  std::string upper = Sha256Hex("a");
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_NE(Refusal(KeyFile(a + R"(, {"id": "b", "sha256": ")" + upper + R"(", "scopes": []})")).find("the sha256"),
            std::string::npos);
  EXPECT_NE(Refusal(KeyFile(a + R"(, {"id": "b", "subject": "CN=a", "scopes": []})")).find("key 1 ('b'): the subject"),
            std::string::npos);
}

TEST(ApiKeySetTest, RefusesAMalformedFile) {
  for (const std::string& bad : {std::string(""), std::string("{"), std::string("[]"), std::string("{}"),
                                 std::string(R"({"keys": {}})"), std::string(R"({"keys": [], "extra": 1})"),
                                 std::string(R"({"keys": [], "keys": []})"), std::string(R"({"keys": null})")}) {
    EXPECT_NE(Refusal(bad), "(accepted)") << bad;
  }
  EXPECT_NE(Refusal(R"({"keys": [], "version": 2})").find("unknown field 'version'"), std::string::npos);
}

TEST(ApiKeySetTest, BoundsTheFileAndItsLists) {
  std::string big = KeyFile("") + std::string(ApiKeySet::kMaxFileBytes, ' ');
  EXPECT_NE(Refusal(big).find("bytes"), std::string::npos);

  std::string scopes;
  for (int i = 0; i < 1025; ++i) scopes += std::string(i ? "," : "") + "\"infer:m" + std::to_string(i) + "\"";
  EXPECT_NE(Refusal(KeyFile(R"({"id": "k", "subject": "CN=x", "scopes": [)" + scopes + "]}")).find("more than 1024"),
            std::string::npos);
  // 1024 scopes of 256 bytes are fine.
  scopes.clear();
  for (int i = 0; i < 1024; ++i) {
    const std::string model = std::to_string(i);
    scopes += std::string(i ? "," : "") + "\"infer:" + model + std::string(250 - model.size(), 'm') + "\"";
  }
  EXPECT_EQ(Refusal(KeyFile(R"({"id": "k", "subject": "CN=x", "scopes": [)" + scopes + "]}")), "(accepted)");

  // One key past the limit, each as short as a key can be (three characters of id and subject) to fit in the file.
  static constexpr std::string_view kDigits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string keys;
  keys.reserve(ApiKeySet::kMaxFileBytes);
  for (size_t i = 0; i <= ApiKeySet::kMaxKeys; ++i) {
    const std::string name = {kDigits[i % 62], kDigits[i / 62 % 62], kDigits[i / (62 * 62)]};
    keys += std::string(i ? "," : "") + R"({"id":")" + name + R"(","subject":")" + name + R"(","scopes":[]})";
  }
  const std::string file = KeyFile(keys);
  ASSERT_LE(file.size(), ApiKeySet::kMaxFileBytes);
  EXPECT_NE(Refusal(file).find("more than 100000 keys"), std::string::npos);
}

}  // namespace
}  // namespace weft
