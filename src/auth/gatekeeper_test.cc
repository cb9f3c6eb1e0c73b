#include "auth/gatekeeper.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "auth/api_keys.h"
#include "auth/jwt_testing.h"

namespace weft {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kOpsSecret = "ops-0123456789abcdef0123456789abcdef";
constexpr const char* kCamSecret = "cam-0123456789abcdef0123456789abcdef";

class GatekeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("weft_gatekeeper_test_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    keys_ = (dir_ / "keys.json").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void WriteKeys(const std::string& json) {
    const std::string tmp = keys_ + ".tmp";
    std::ofstream(tmp) << json;
    std::filesystem::rename(tmp, keys_);  // a new inode: seen as a change whatever the clock's resolution
  }

  static std::string Key(const std::string& id, const std::string& secret, const std::string& scopes,
                         const std::string& extra = "") {
    return R"({"id": ")" + id + R"(", "sha256": ")" + Sha256Hex(secret) + R"(", "scopes": [)" + scopes + "]" + extra +
           "}";
  }

  std::unique_ptr<Gatekeeper> Make(GatekeeperOptions options) {
    options.reload_interval = milliseconds(0);  // reloads only when the test asks
    auto made = Gatekeeper::Create(std::move(options), &metrics_, &clock_);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    return made.ok() ? std::move(made).value() : nullptr;
  }

  static Caller Bearer(const std::string& header, std::string_view peer = "10.0.0.1") {
    return Caller{.authorization = header, .client_subject = {}, .peer_address = peer};
  }

  std::filesystem::path dir_;
  std::string keys_;
  MetricsRegistry metrics_;
  ManualClock clock_{SteadyTime(seconds(1000))};
};

TEST_F(GatekeeperTest, WithoutFilesEveryoneIsServedAsAnonymous) {
  auto gatekeeper = Make({});
  EXPECT_FALSE(gatekeeper->authenticates());
  EXPECT_FALSE(gatekeeper->active());
  Admission a = gatekeeper->Admit(Caller{}, Permission::kAdmin, {}, "POST /v2/repository/index");
  EXPECT_TRUE(a.status.ok());
  EXPECT_EQ(a.identity, "anonymous");
}

TEST_F(GatekeeperTest, KeysAreCheckedWithTheirScopes) {
  WriteKeys(R"({"keys": [)" + Key("ops", kOpsSecret, R"("admin", "metadata")") + ", " +
            Key("cam", kCamSecret, R"("infer:detector")") + "]}");
  auto gatekeeper = Make({.keys_file = keys_});
  ASSERT_TRUE(gatekeeper->authenticates());

  const std::string ops = std::string("Bearer ") + kOpsSecret;
  const std::string cam = std::string("Bearer ") + kCamSecret;
  EXPECT_TRUE(gatekeeper->Admit(Bearer(ops), Permission::kAdmin, {}, "r").status.ok());
  EXPECT_TRUE(gatekeeper->Admit(Bearer(ops), Permission::kSharedMemory, {}, "r").status.ok());  // admin grants shm
  EXPECT_EQ(gatekeeper->Admit(Bearer(ops), Permission::kInfer, "detector", "r").status.code(),
            StatusCode::kPermissionDenied);
  Admission admitted = gatekeeper->Admit(Bearer(cam), Permission::kInfer, "detector", "r");
  EXPECT_TRUE(admitted.status.ok());
  EXPECT_EQ(admitted.identity, "key:cam");
  EXPECT_EQ(gatekeeper->Admit(Bearer(cam), Permission::kInfer, "other", "r").status.code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(gatekeeper->Admit(Bearer(cam), Permission::kMetrics, {}, "r").status.code(), StatusCode::kPermissionDenied);

  for (const std::string& bad : {std::string(), std::string("Bearer nope"), std::string("Basic abc"),
                                 std::string("Bearer"), std::string("bearer ") + kCamSecret + "x"}) {
    Admission refused = gatekeeper->Admit(Bearer(bad), Permission::kInfer, "detector", "r");
    EXPECT_EQ(refused.status.code(), StatusCode::kUnauthenticated) << bad;
    EXPECT_TRUE(refused.identity.empty());
    EXPECT_EQ(refused.status.message().find("detector"), std::string::npos);
  }
  // The scheme is matched without regard to case.
  EXPECT_TRUE(
      gatekeeper->Admit(Bearer(std::string("bearer ") + kCamSecret), Permission::kInfer, "detector", "r").status.ok());
  EXPECT_EQ(metrics_.GetCounter("weft_auth_denied_total", "", {{"reason", "missing"}})->value(), 1);
  EXPECT_EQ(metrics_.GetCounter("weft_auth_denied_total", "", {{"reason", "invalid"}})->value(), 4);
  EXPECT_EQ(metrics_.GetCounter("weft_auth_denied_total", "", {{"reason", "forbidden"}})->value(), 3);
}

TEST_F(GatekeeperTest, HealthIsOpenUnlessProtected) {
  WriteKeys(R"({"keys": [)" + Key("cam", kCamSecret, R"("infer")") + "]}");
  auto open = Make({.keys_file = keys_});
  EXPECT_TRUE(open->Admit(Caller{}, Permission::kHealth, {}, "GET /v2/health/ready").status.ok());
  auto closed = Make({.keys_file = keys_, .protect_health = true});
  EXPECT_EQ(closed->Admit(Caller{}, Permission::kHealth, {}, "r").status.code(), StatusCode::kUnauthenticated);
  // Any valid credential will do, whatever its scopes.
  EXPECT_TRUE(closed->Admit(Bearer(std::string("Bearer ") + kCamSecret), Permission::kHealth, {}, "r").status.ok());
}

TEST_F(GatekeeperTest, AClientCertificateSubjectNamesAKey) {
  WriteKeys(R"({"keys": [{"id": "camera-7", "subject": "CN=camera-7,O=acme", "scopes": ["infer"]}]})");
  auto gatekeeper = Make({.keys_file = keys_});
  Admission a = gatekeeper->Admit(Caller{.client_subject = "CN=camera-7,O=acme"}, Permission::kInfer, "m", "r");
  EXPECT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.identity, "key:camera-7");
  EXPECT_EQ(
      gatekeeper->Admit(Caller{.client_subject = "CN=camera-8,O=acme"}, Permission::kInfer, "m", "r").status.code(),
      StatusCode::kUnauthenticated);
  // A bearer credential, when there is one, decides: a bad one is not rescued by the certificate.
  EXPECT_EQ(gatekeeper
                ->Admit(Caller{.authorization = "Bearer nope", .client_subject = "CN=camera-7,O=acme"},
                        Permission::kInfer, "m", "r")
                .status.code(),
            StatusCode::kUnauthenticated);
}

TEST_F(GatekeeperTest, AKeysOwnRateLimitHoldsAndOthersHaveTheirOwnBuckets) {
  WriteKeys(R"({"keys": [)" + Key("cam", kCamSecret, R"("infer")", R"(, "rate": 10, "burst": 2)") + ", " +
            Key("ops", kOpsSecret, R"("infer")") + "]}");
  auto gatekeeper = Make({.keys_file = keys_, .default_limit = {.rate = 1, .burst = 1}});
  const std::string cam = std::string("Bearer ") + kCamSecret;
  const std::string ops = std::string("Bearer ") + kOpsSecret;
  EXPECT_TRUE(gatekeeper->Admit(Bearer(cam), Permission::kInfer, "m", "r").status.ok());
  EXPECT_TRUE(gatekeeper->Admit(Bearer(cam), Permission::kInfer, "m", "r").status.ok());
  Admission limited = gatekeeper->Admit(Bearer(cam), Permission::kInfer, "m", "r");
  EXPECT_EQ(limited.status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(limited.status.retry_after(), milliseconds(100));
  // The default bucket of another key is its own.
  EXPECT_TRUE(gatekeeper->Admit(Bearer(ops), Permission::kInfer, "m", "r").status.ok());
  EXPECT_EQ(gatekeeper->Admit(Bearer(ops), Permission::kInfer, "m", "r").status.code(), StatusCode::kResourceExhausted);
  clock_.Advance(milliseconds(100));
  EXPECT_TRUE(gatekeeper->Admit(Bearer(cam), Permission::kInfer, "m", "r").status.ok());
  EXPECT_EQ(metrics_.GetCounter("weft_rate_limited_total", "", {{"identity", "key:cam"}})->value(), 1);
  // Health checks are never limited.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(gatekeeper->Admit(Bearer(ops), Permission::kHealth, {}, "r").status.ok());
}

TEST_F(GatekeeperTest, AnonymousCallersAreLimitedByAddress) {
  auto gatekeeper = Make({.default_limit = {.rate = 2, .burst = 1}});
  EXPECT_TRUE(gatekeeper->active());
  EXPECT_TRUE(gatekeeper->Admit(Bearer("", "10.0.0.1"), Permission::kInfer, "m", "r").status.ok());
  EXPECT_EQ(gatekeeper->Admit(Bearer("", "10.0.0.1"), Permission::kInfer, "m", "r").status.code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(gatekeeper->Admit(Bearer("", "10.0.0.2"), Permission::kInfer, "m", "r").status.ok());
  EXPECT_EQ(metrics_.GetCounter("weft_rate_limited_total", "", {{"identity", "anonymous"}})->value(), 1);
  clock_.Advance(milliseconds(500));
  EXPECT_TRUE(gatekeeper->Admit(Bearer("", "10.0.0.1"), Permission::kInfer, "m", "r").status.ok());
}

TEST_F(GatekeeperTest, AChangedKeyFileIsReadAgainAndABadOneIsRefused) {
  WriteKeys(R"({"keys": [)" + Key("cam", kCamSecret, R"("infer")") + "]}");
  auto gatekeeper = Make({.keys_file = keys_});
  const std::string cam = std::string("Bearer ") + kCamSecret;
  const std::string ops = std::string("Bearer ") + kOpsSecret;
  EXPECT_EQ(gatekeeper->Admit(Bearer(ops), Permission::kInfer, "m", "r").status.code(), StatusCode::kUnauthenticated);

  WriteKeys(R"({"keys": [)" + Key("ops", kOpsSecret, R"("infer")") + "]}");
  EXPECT_TRUE(gatekeeper->ReloadNow().ok());
  EXPECT_TRUE(gatekeeper->Admit(Bearer(ops), Permission::kInfer, "m", "r").status.ok());
  EXPECT_EQ(gatekeeper->Admit(Bearer(cam), Permission::kInfer, "m", "r").status.code(), StatusCode::kUnauthenticated);

  WriteKeys(R"({"keys": [{"id": "x", "sha256": "not hex", "scopes": []}]})");
  Status refused = gatekeeper->ReloadNow();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find(keys_), std::string::npos) << refused.message();
  EXPECT_TRUE(gatekeeper->Admit(Bearer(ops), Permission::kInfer, "m", "r").status.ok());  // the old keys stay
  EXPECT_EQ(metrics_.GetCounter("weft_auth_reloads_total", "", {{"file", "keys"}, {"outcome", "refused"}})->value(), 1);
  // An unchanged file is not read again.
  EXPECT_TRUE(gatekeeper->ReloadNow().ok());
  EXPECT_EQ(metrics_.GetCounter("weft_auth_reloads_total", "", {{"file", "keys"}, {"outcome", "refused"}})->value(), 1);
}

TEST_F(GatekeeperTest, CreateRefusesAnUnreadableOrBadFile) {
  auto missing = Gatekeeper::Create({.keys_file = (dir_ / "nope.json").string()}, &metrics_, &clock_);
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  WriteKeys("{");
  auto bad = Gatekeeper::Create({.keys_file = keys_}, &metrics_, &clock_);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  std::ofstream(dir_ / "jwks.json") << R"({"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB"}]})";
  auto weak = Gatekeeper::Create({.jwks_file = (dir_ / "jwks.json").string()}, &metrics_, &clock_);
  EXPECT_EQ(weak.status().code(), StatusCode::kInvalidArgument);
}

// A key file replaced by a FIFO with no writer once hung the start (and, at a reload, every later reload, keeping
// revoked keys valid): it is refused at once, and a reload keeps the keys it had.
TEST_F(GatekeeperTest, AFifoInPlaceOfAKeyFileIsRefusedWithoutWaiting) {
  const std::string fifo = (dir_ / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto made = Gatekeeper::Create({.keys_file = fifo}, &metrics_, &clock_);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("not a regular file"), std::string::npos) << made.status().message();

  WriteKeys(R"({"keys": [)" + Key("ops", kOpsSecret, R"("infer")") + "]}");
  auto gatekeeper = Make({.keys_file = keys_});
  ASSERT_NE(gatekeeper, nullptr);
  std::filesystem::remove(keys_);
  ASSERT_EQ(::mkfifo(keys_.c_str(), 0600), 0);
  EXPECT_EQ(gatekeeper->ReloadNow().code(), StatusCode::kInvalidArgument);
  const std::string ops = std::string("Bearer ") + kOpsSecret;
  EXPECT_TRUE(gatekeeper->Admit(Bearer(ops), Permission::kInfer, "m", "r").status.ok());  // the old keys stay
}

TEST_F(GatekeeperTest, AJwtWithoutAJwksIsRefused) {
  WriteKeys(R"({"keys": [)" + Key("cam", kCamSecret, R"("infer")") + "]}");
  auto gatekeeper = Make({.keys_file = keys_});
  EXPECT_EQ(gatekeeper->Admit(Bearer("Bearer aaa.bbb.ccc"), Permission::kInfer, "m", "r").status.code(),
            StatusCode::kUnauthenticated);
}

// A verified JWT is kept by its credential's text, in the cache and in the connection's memo; keeping it must not
// outlive the key that signed it.
TEST_F(GatekeeperTest, AVerifiedJwtIsKeptUntilItsKeyLeavesTheKeySet) {
  const std::string jwks = (dir_ / "jwks.json").string();
  auto write_jwks = [&jwks](std::string_view secret) {
    std::ofstream(jwks + ".tmp") << jwt_testing::Jwks({jwt_testing::OctJwk(secret, "k")});
    std::filesystem::rename(jwks + ".tmp", jwks);
  };
  const std::string payload = R"({"sub":"alice","iss":"iss","aud":"weft","scope":"infer","exp":)" +
                              std::to_string(std::time(nullptr) + 600) + "}";
  auto token_of = [&payload](std::string secret) {
    return jwt_testing::Token(R"({"alg":"HS256","kid":"k"})", payload,
                              [secret](std::string_view data) { return jwt_testing::Hmac(secret, data); });
  };
  const std::string first = "first-secret-0123456789abcdef0123";
  const std::string second = "second-secret-0123456789abcdef012";

  for (bool with_memo : {false, true}) {
    SCOPED_TRACE(with_memo ? "with a memo" : "without a memo");
    write_jwks(first);
    auto gatekeeper = Make({.jwks_file = jwks, .jwt = {.issuer = "iss", .audience = "weft"}});
    CallerMemo memo;
    auto caller = [&](const std::string& header) {
      return Caller{.authorization = header, .peer_address = "10.0.0.1", .memo = with_memo ? &memo : nullptr};
    };
    auto admit = [&](const std::string& header, Permission permission = Permission::kInfer) {
      return gatekeeper->Admit(caller(header), permission, "m", "r");
    };
    const std::string credential = "Bearer " + token_of(first);

    for (int i = 0; i < 3; ++i) {  // verified, then found
      Admission admitted = admit(credential);
      EXPECT_TRUE(admitted.status.ok()) << admitted.status.ToString();
      EXPECT_EQ(admitted.identity, "jwt:alice");
    }
    EXPECT_EQ(admit(credential, Permission::kAdmin).status.code(), StatusCode::kPermissionDenied);  // scopes count
    EXPECT_TRUE(admit("bearer  " + token_of(first)).status.ok());
    // Another text is parsed on its own, whatever was verified before, and does not stop the first from counting.
    EXPECT_EQ(admit(credential + "!").status.code(), StatusCode::kUnauthenticated);
    EXPECT_EQ(admit(credential.substr(0, credential.size() - 2)).status.code(), StatusCode::kUnauthenticated);
    EXPECT_EQ(admit("Bearer " + token_of(second)).status.code(), StatusCode::kUnauthenticated);
    EXPECT_TRUE(admit(credential).status.ok());

    write_jwks(second);
    ASSERT_TRUE(gatekeeper->ReloadNow().ok());
    EXPECT_EQ(admit(credential).status.code(), StatusCode::kUnauthenticated);
    EXPECT_EQ(admit("bearer  " + token_of(first)).status.code(), StatusCode::kUnauthenticated);
    EXPECT_TRUE(admit("Bearer " + token_of(second)).status.ok());
  }
}

// A connection's memo keeps the key set it read, never past a change of the file, and never the secret: a key
// is found by its hash at every request.
TEST_F(GatekeeperTest, AConnectionsMemoFollowsTheKeyFileAndItsGatekeeper) {
  WriteKeys(R"({"keys": [)" + Key("cam", kCamSecret, R"("infer")") + "]}");
  auto gatekeeper = Make({.keys_file = keys_});
  CallerMemo memo;
  const std::string cam = std::string("Bearer ") + kCamSecret;
  const std::string ops = std::string("Bearer ") + kOpsSecret;
  auto admit = [&memo](Gatekeeper& g, const std::string& header) {
    return g.Admit(Caller{.authorization = header, .peer_address = "10.0.0.1", .memo = &memo}, Permission::kInfer, "m",
                   "r");
  };
  EXPECT_TRUE(admit(*gatekeeper, cam).status.ok());
  EXPECT_EQ(admit(*gatekeeper, ops).status.code(), StatusCode::kUnauthenticated);

  WriteKeys(R"({"keys": [)" + Key("ops", kOpsSecret, R"("infer")") + "]}");
  ASSERT_TRUE(gatekeeper->ReloadNow().ok());
  EXPECT_EQ(admit(*gatekeeper, cam).status.code(), StatusCode::kUnauthenticated);
  Admission ops_admitted = admit(*gatekeeper, ops);
  EXPECT_TRUE(ops_admitted.status.ok());
  EXPECT_EQ(ops_admitted.identity, "key:ops");

  // The same connection object in front of another gatekeeper (a test's, or a restarted server's) starts over.
  WriteKeys(R"({"keys": [)" + Key("cam", kCamSecret, R"("infer")") + "]}");
  auto other = Make({.keys_file = keys_});
  EXPECT_TRUE(admit(*other, cam).status.ok());
  EXPECT_EQ(admit(*other, ops).status.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(admit(*gatekeeper, cam).status.code(), StatusCode::kUnauthenticated);  // its own file, not reread
  EXPECT_TRUE(admit(*gatekeeper, ops).status.ok());
}

TEST_F(GatekeeperTest, AuditLinesAreRateLimited) {
  WriteKeys(R"({"keys": [)" + Key("cam", kCamSecret, R"("infer")") + "]}");
  auto gatekeeper = Make({.keys_file = keys_, .audit_lines_per_second = 2});
  for (int i = 0; i < 10; ++i) gatekeeper->Admit(Caller{}, Permission::kInfer, "m", "r");
  EXPECT_EQ(metrics_.GetCounter("weft_audit_lines_suppressed_total", "")->value(), 8);
  clock_.Advance(seconds(1));
  gatekeeper->Admit(Caller{}, Permission::kInfer, "m", "r");
  EXPECT_EQ(metrics_.GetCounter("weft_audit_lines_suppressed_total", "")->value(), 8);
}

}  // namespace
}  // namespace weft
