#include "auth/scopes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft {
namespace {

constexpr Permission kEveryPermission[] = {Permission::kHealth,       Permission::kMetadata, Permission::kInfer,
                                           Permission::kSharedMemory, Permission::kAdmin,    Permission::kMetrics};

ScopeSet Parsed(const std::vector<std::string>& scopes) {
  Result<ScopeSet> set = ScopeSet::Parse(scopes);
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  return set.ok() ? *set : ScopeSet();
}

TEST(ScopesTest, NamesEveryPermission) {
  std::vector<std::string> names;
  for (Permission p : kEveryPermission) names.emplace_back(PermissionName(p));
  EXPECT_EQ(names, (std::vector<std::string>{"health", "metadata", "infer", "shm", "admin", "metrics"}));
}

TEST(ScopesTest, EachScopeGrantsItsOwnPermissionOnly) {
  struct Case {
    std::string scope;
    Permission permission;
  };
  for (const Case& c : {Case{"infer", Permission::kInfer}, Case{"metadata", Permission::kMetadata},
                        Case{"shm", Permission::kSharedMemory}, Case{"metrics", Permission::kMetrics}}) {
    const ScopeSet set = Parsed({c.scope});
    for (Permission p : kEveryPermission) {
      EXPECT_EQ(set.Allows(p, "detector"), p == c.permission || p == Permission::kHealth)
          << c.scope << " for " << PermissionName(p);
    }
  }
}

TEST(ScopesTest, AdminAlsoGrantsSharedMemoryButNothingElse) {
  const ScopeSet set = Parsed({"admin"});
  EXPECT_TRUE(set.Allows(Permission::kAdmin, ""));
  EXPECT_TRUE(set.Allows(Permission::kSharedMemory, ""));
  EXPECT_FALSE(set.Allows(Permission::kInfer, "detector"));
  EXPECT_FALSE(set.Allows(Permission::kMetadata, ""));
  EXPECT_FALSE(set.Allows(Permission::kMetrics, ""));
  EXPECT_EQ(set.ToString(), "admin");
}

TEST(ScopesTest, InferForOneModelAllowsThatModelOnly) {
  const ScopeSet set = Parsed({"infer:detector", "infer:classifier", "infer:detector"});
  EXPECT_TRUE(set.Allows(Permission::kInfer, "detector"));
  EXPECT_TRUE(set.Allows(Permission::kInfer, "classifier"));
  EXPECT_FALSE(set.Allows(Permission::kInfer, "detector2"));
  EXPECT_FALSE(set.Allows(Permission::kInfer, "detecto"));
  EXPECT_FALSE(set.Allows(Permission::kInfer, ""));
  EXPECT_FALSE(set.Allows(Permission::kMetadata, "detector"));
  EXPECT_EQ(set.ToString(), "infer:classifier infer:detector");
  EXPECT_TRUE(Parsed({"infer"}).Allows(Permission::kInfer, "anything"));
}

TEST(ScopesTest, HealthIsAllowedToEveryIdentityEvenWithoutScopes) {
  const ScopeSet none;
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(none.Allows(Permission::kHealth, ""));
  for (Permission p : kEveryPermission) {
    if (p != Permission::kHealth) {
      EXPECT_FALSE(none.Allows(p, "m")) << PermissionName(p);
    }
  }
  EXPECT_TRUE(Parsed({}).empty());
  EXPECT_FALSE(Parsed({"metrics"}).empty());
  EXPECT_FALSE(Parsed({"infer:m"}).empty());
}

TEST(ScopesTest, RefusesUnknownScopesByName) {
  for (const std::string bad : {"inference", "Infer", "infer:", "health", "", " infer", "admin ", "*", "shm:x"}) {
    Result<ScopeSet> set = ScopeSet::Parse({"metadata", bad});
    ASSERT_FALSE(set.ok()) << "'" << bad << "'";
    EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(set.status().message().find("'" + bad + "'"), std::string::npos) << set.status().message();
  }
}

TEST(ScopesTest, ClaimSkipsScopesOfOtherServices) {
  const ScopeSet set = ScopeSet::ParseClaim("openid  profile infer:detector email metrics read:all infer: Admin");
  EXPECT_EQ(set.ToString(), "infer:detector metrics");
  EXPECT_TRUE(set.Allows(Permission::kInfer, "detector"));
  EXPECT_FALSE(set.Allows(Permission::kAdmin, ""));
  EXPECT_TRUE(ScopeSet::ParseClaim("").empty());
  EXPECT_TRUE(ScopeSet::ParseClaim("   ").empty());
}

TEST(ScopesTest, ToStringHasAFixedOrder) {
  EXPECT_EQ(Parsed({"metrics", "admin", "shm", "infer:b", "infer", "infer:a", "metadata"}).ToString(),
            "metadata infer infer:a infer:b shm admin metrics");
  EXPECT_EQ(ScopeSet::ParseClaim("metrics admin shm infer:b infer infer:a metadata").ToString(),
            "metadata infer infer:a infer:b shm admin metrics");
  EXPECT_EQ(ScopeSet().ToString(), "");
}

}  // namespace
}  // namespace weft
