#include "repository/repository.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "repository/testing/fake_backend.h"
#include "repository/testing/fake_config_parser.h"

namespace weft {
namespace {

namespace fs = std::filesystem;
using fakes::FakeBackend;
using fakes::FakeConfigParser;
using fakes::SimpleConfig;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

VersionPolicyConfig Latest(int n) {
  VersionPolicyConfig p;
  p.kind = VersionPolicyConfig::Kind::kLatest;
  p.num_versions = n;
  return p;
}
VersionPolicyConfig All() {
  VersionPolicyConfig p;
  p.kind = VersionPolicyConfig::Kind::kAll;
  return p;
}
VersionPolicyConfig Specific(std::vector<int64_t> versions) {
  VersionPolicyConfig p;
  p.kind = VersionPolicyConfig::Kind::kSpecific;
  p.versions = std::move(versions);
  return p;
}

FakeBackend::Options BackendOptions(std::string default_model_filename, Status validate_status = Status::Ok(),
                                    std::map<std::string, Status> create_failures = {}) {
  FakeBackend::Options o;
  o.default_model_filename = std::move(default_model_filename);
  o.validate_status = std::move(validate_status);
  o.create_failures = std::move(create_failures);
  return o;
}

TEST(SelectVersionsTest, Table) {
  struct Case {
    const char* what;
    VersionPolicyConfig policy;
    std::vector<int64_t> available;
    std::vector<int64_t> want;
  };
  const Case cases[] = {
      {"latest 1 takes the highest", Latest(1), {1, 3, 2}, {3}},
      {"latest 2 takes the two highest, ascending", Latest(2), {3, 1, 2}, {2, 3}},
      {"latest n larger than available takes all", Latest(5), {2, 1}, {1, 2}},
      {"latest of nothing is nothing", Latest(1), {}, {}},
      {"latest 0 takes nothing", Latest(0), {1, 2}, {}},
      {"all takes all, ascending", All(), {10, 2, 7}, {2, 7, 10}},
      {"all of nothing is nothing", All(), {}, {}},
      {"specific takes the listed ones present", Specific({1, 3, 7}), {1, 2, 3}, {1, 3}},
      {"specific versions not present are absent", Specific({5}), {1, 2}, {}},
      {"specific with no versions takes nothing", Specific({}), {1, 2}, {}},
      {"duplicates count once", Latest(2), {2, 2, 1, 1}, {1, 2}},
      {"non-positive numbers are not versions", All(), {0, -3, 4}, {4}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(SelectVersions(c.policy, c.available), c.want) << c.what;
  }
}

class LoadRepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("weft_repository_test_" + std::to_string(getpid()) + "_" + std::string(info->name()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    UseBackend(BackendOptions("model.fake"));
  }
  void TearDown() override { fs::remove_all(root_); }

  void UseBackend(FakeBackend::Options options) {
    backend_ = std::make_shared<FakeBackend>(std::move(options));
    registry_ = BackendRegistry();
    registry_.Register("fake", {"fake_platform"}, backend_);
  }

  // Creates <root>/<model>/config.pbtxt (content is ignored by the fake parser) and registers `config` for it.
  void AddModel(const std::string& model, Result<ModelConfig> config) {
    fs::create_directories(root_ / model);
    Touch(root_ / model / "config.pbtxt");
    parser_.Set(model, std::move(config));
  }
  // Creates <root>/<model>/<version>/ with the model file when `with_file`.
  void AddVersion(const std::string& model, const std::string& version, bool with_file = true) {
    fs::create_directories(root_ / model / version);
    if (with_file) Touch(root_ / model / version / "model.fake");
  }
  static void Touch(const fs::path& file) { std::ofstream(file) << "x"; }

  std::vector<ModelEntry> Load() {
    auto entries = LoadRepository({.root = root_, .parse_config = parser_.AsParser(), .backends = &registry_});
    EXPECT_TRUE(entries.ok()) << entries.status().ToString();
    return entries.ok() ? std::move(entries).value() : std::vector<ModelEntry>{};
  }
  static std::vector<int64_t> Versions(const ModelEntry& e) {
    std::vector<int64_t> v;
    for (const auto& lv : e.versions) v.push_back(lv->version);
    return v;
  }

  fs::path root_;
  FakeConfigParser parser_;
  std::shared_ptr<FakeBackend> backend_;
  BackendRegistry registry_;
};

TEST_F(LoadRepositoryTest, LoadsSelectedVersionsWithTheirInstances) {
  ModelConfig config = SimpleConfig("mlp");
  config.version_policy = Latest(2);
  config.instance_groups = {{.name = "g", .count = 2, .kind = InstanceKind::kCpu, .gpus = {}}};
  AddModel("mlp", config);
  for (const char* v : {"1", "2", "3"}) AddVersion("mlp", v);

  auto entries = Load();
  ASSERT_EQ(entries.size(), 1u);
  const ModelEntry& e = entries[0];
  EXPECT_EQ(e.name, "mlp");
  ASSERT_TRUE(e.status.ok()) << e.status.ToString();
  ASSERT_TRUE(e.config.has_value());
  EXPECT_THAT(Versions(e), ElementsAre(2, 3));
  EXPECT_TRUE(e.failed_versions.empty());
  for (const auto& v : e.versions) {
    EXPECT_EQ(v->dir, root_ / "mlp" / std::to_string(v->version));
    EXPECT_EQ(v->config.name, "mlp");
    EXPECT_EQ(v->instances.size(), 2u);
  }
  auto created = backend_->creations();
  ASSERT_EQ(created.size(), 4u);
  EXPECT_EQ(created[0].version_dir, root_ / "mlp" / "2");
  EXPECT_EQ(created[0].index, 0);
  EXPECT_EQ(created[1].index, 1);
  EXPECT_EQ(created[3].version_dir, root_ / "mlp" / "3");
}

TEST_F(LoadRepositoryTest, AConfigWithoutInstanceGroupsGetsTheBackendsDefaultAndOnlyThatOne) {
  FakeBackend::Options options = BackendOptions("model.fake");
  options.default_instance_groups = {{.name = "cpu", .count = 3, .kind = InstanceKind::kCpu, .gpus = {}}};
  UseBackend(options);
  AddModel("plain", SimpleConfig("plain"));
  AddVersion("plain", "1");
  ModelConfig pinned = SimpleConfig("pinned");
  pinned.instance_groups = {{.name = "one", .count = 1, .kind = InstanceKind::kCpu, .gpus = {}}};
  AddModel("pinned", pinned);
  AddVersion("pinned", "1");

  auto entries = Load();
  ASSERT_EQ(entries.size(), 2u);
  const ModelEntry& p = entries[0].name == "plain" ? entries[0] : entries[1];
  const ModelEntry& q = entries[0].name == "plain" ? entries[1] : entries[0];
  ASSERT_TRUE(p.status.ok() && q.status.ok());
  // The entry's config is the one that serves: it names the groups the instances came from.
  ASSERT_EQ(p.config->instance_groups.size(), 1u);
  EXPECT_EQ(p.config->instance_groups[0].count, 3);
  EXPECT_EQ(p.versions[0]->instances.size(), 3u);
  EXPECT_EQ(p.versions[0]->config.InstanceCount(), 3);
  ASSERT_EQ(q.config->instance_groups.size(), 1u);
  EXPECT_EQ(q.config->instance_groups[0].name, "one");
  EXPECT_EQ(q.versions[0]->instances.size(), 1u);
}

TEST_F(LoadRepositoryTest, SkipsHiddenEntriesAndFilesAndSortsByName) {
  AddModel("b", SimpleConfig("b"));
  AddVersion("b", "1");
  AddModel("a", SimpleConfig("a"));
  AddVersion("a", "1");
  fs::create_directories(root_ / ".git" / "1");
  Touch(root_ / "README.md");

  auto entries = Load();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].name, "a");
  EXPECT_EQ(entries[1].name, "b");
  EXPECT_TRUE(entries[0].status.ok());
  EXPECT_TRUE(entries[1].status.ok());
}

TEST_F(LoadRepositoryTest, MissingConfigIsAnErrorEntryAndOthersStillLoad) {
  fs::create_directories(root_ / "noconfig" / "1");
  AddModel("ok", SimpleConfig("ok"));
  AddVersion("ok", "1");

  auto entries = Load();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].name, "noconfig");
  EXPECT_FALSE(entries[0].status.ok());
  EXPECT_THAT(entries[0].status.message(), HasSubstr("config.pbtxt not found"));
  EXPECT_THAT(entries[0].status.message(), HasSubstr(std::string("noconfig")));
  // Hardening issue, item 6: reasons reach clients, so they name files within the repository, never its path.
  EXPECT_THAT(entries[0].status.message(), Not(HasSubstr(root_.string())));
  EXPECT_FALSE(entries[0].config.has_value());
  EXPECT_TRUE(entries[1].status.ok());
}

TEST_F(LoadRepositoryTest, ParserErrorBecomesTheModelStatus) {
  AddModel("bad", InvalidArgument("bad/config.pbtxt:3:7: Expected \":\""));
  AddVersion("bad", "1");
  auto entries = Load();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(entries[0].status.message(), "bad/config.pbtxt:3:7: Expected \":\"");
  EXPECT_FALSE(entries[0].config.has_value());
  EXPECT_TRUE(backend_->creations().empty());
}

TEST_F(LoadRepositoryTest, EmptyNameTakesTheDirectoryName) {
  AddModel("unnamed", SimpleConfig(""));
  AddVersion("unnamed", "1");
  auto entries = Load();
  ASSERT_EQ(entries.size(), 1u);
  ASSERT_TRUE(entries[0].status.ok()) << entries[0].status.ToString();
  EXPECT_EQ(entries[0].config->name, "unnamed");
  EXPECT_EQ(entries[0].versions[0]->config.name, "unnamed");
}

TEST_F(LoadRepositoryTest, NameThatDiffersFromTheDirectoryIsAnError) {
  AddModel("dir_name", SimpleConfig("config_name"));
  AddVersion("dir_name", "1");
  auto entries = Load();
  ASSERT_EQ(entries.size(), 1u);
  const std::string& m = entries[0].status.message();
  EXPECT_THAT(m, HasSubstr(std::string("dir_name/config.pbtxt")));
  EXPECT_THAT(m, HasSubstr("'config_name'"));
  EXPECT_THAT(m, HasSubstr("'dir_name'"));
}

TEST_F(LoadRepositoryTest, InvalidConfigFromTheParserIsRejected) {
  ModelConfig config = SimpleConfig("m");
  config.inputs.clear();
  AddModel("m", config);
  AddVersion("m", "1");
  auto entries = Load();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].status.message(), std::string("m/config.pbtxt") + ": input: a model needs at least one input");
}

TEST_F(LoadRepositoryTest, UnknownPlatformNamesTheFileAndThePlatform) {
  ModelConfig config = SimpleConfig("m");
  config.platform = "tensorrt_plan";
  AddModel("m", config);
  AddVersion("m", "1");
  auto entries = Load();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_THAT(entries[0].status.message(), HasSubstr(std::string("m/config.pbtxt") + ": "));
  EXPECT_THAT(entries[0].status.message(), HasSubstr("tensorrt_plan"));
  EXPECT_TRUE(entries[0].config.has_value());  // the config itself is valid
}

TEST_F(LoadRepositoryTest, BackendValidationFailureNamesTheFile) {
  UseBackend(BackendOptions("", InvalidArgument("input 'x': TYPE_FP32 is not supported")));
  AddModel("m", SimpleConfig("m"));
  AddVersion("m", "1");
  auto entries = Load();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].status.message(), std::string("m/config.pbtxt") + ": input 'x': TYPE_FP32 is not supported");
}

TEST_F(LoadRepositoryTest, OnlyNumericVersionDirectoriesWithoutLeadingZeroCount) {
  ModelConfig config = SimpleConfig("m");
  config.version_policy = All();
  AddModel("m", config);
  for (const char* v : {"1", "2", "0", "01", "abc", "3x", ".4"}) AddVersion("m", v);
  Touch(root_ / "m" / "5");  // a file, not a directory
  auto entries = Load();
  ASSERT_EQ(entries.size(), 1u);
  ASSERT_TRUE(entries[0].status.ok()) << entries[0].status.ToString();
  EXPECT_THAT(Versions(entries[0]), ElementsAre(1, 2));
}

TEST_F(LoadRepositoryTest, NoVersionDirectoryIsAnError) {
  AddModel("m", SimpleConfig("m"));
  auto entries = Load();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].status.code(), StatusCode::kNotFound);
  EXPECT_THAT(entries[0].status.message(), HasSubstr(std::string("m: ")));
  EXPECT_THAT(entries[0].status.message(), HasSubstr("no version directory matches the version policy"));
}

TEST_F(LoadRepositoryTest, SpecificVersionsThatAreAbsentAreSkipped) {
  ModelConfig config = SimpleConfig("m");
  config.version_policy = Specific({2, 5});
  AddModel("m", config);
  AddVersion("m", "1");
  AddVersion("m", "2");
  auto entries = Load();
  ASSERT_EQ(entries.size(), 1u);
  ASSERT_TRUE(entries[0].status.ok());
  EXPECT_THAT(Versions(entries[0]), ElementsAre(2));
  EXPECT_TRUE(entries[0].failed_versions.empty());

  config.version_policy = Specific({5});
  parser_.Set("m", config);
  entries = Load();
  EXPECT_THAT(entries[0].status.message(), HasSubstr("no version directory matches the version policy"));
}

TEST_F(LoadRepositoryTest, VersionWithoutModelFileFailsAlone) {
  ModelConfig config = SimpleConfig("m");
  config.version_policy = All();
  AddModel("m", config);
  AddVersion("m", "1");
  AddVersion("m", "2", /*with_file=*/false);
  auto entries = Load();
  ASSERT_EQ(entries.size(), 1u);
  const ModelEntry& e = entries[0];
  ASSERT_TRUE(e.status.ok());
  EXPECT_THAT(Versions(e), ElementsAre(1));
  ASSERT_EQ(e.failed_versions.size(), 1u);
  EXPECT_EQ(e.failed_versions[0].first, 2);
  EXPECT_EQ(e.failed_versions[0].second.code(), StatusCode::kNotFound);
  EXPECT_EQ(e.failed_versions[0].second.message(), std::string("m/2/model.fake") + ": model file not found");
}

TEST_F(LoadRepositoryTest, DefaultModelFilenameOverridesTheBackendDefault) {
  ModelConfig config = SimpleConfig("m");
  config.default_model_filename = "custom.bin";
  AddModel("m", config);
  AddVersion("m", "1");  // has model.fake only
  auto entries = Load();
  EXPECT_THAT(entries[0].status.message(), HasSubstr("custom.bin: model file not found"));

  Touch(root_ / "m" / "1" / "custom.bin");
  entries = Load();
  EXPECT_TRUE(entries[0].status.ok()) << entries[0].status.ToString();
}

TEST_F(LoadRepositoryTest, BackendWithoutModelFileNeedsNone) {
  UseBackend(BackendOptions(""));
  AddModel("m", SimpleConfig("m"));
  AddVersion("m", "1", /*with_file=*/false);
  auto entries = Load();
  EXPECT_TRUE(entries[0].status.ok()) << entries[0].status.ToString();
}

TEST_F(LoadRepositoryTest, ModelWithNoReadyVersionTakesTheFirstFailure) {
  UseBackend(BackendOptions("model.fake", Status::Ok(),
                            {{"1", Internal("cuda out of memory")}, {"2", Internal("corrupt file")}}));
  ModelConfig config = SimpleConfig("m");
  config.version_policy = All();
  AddModel("m", config);
  AddVersion("m", "1");
  AddVersion("m", "2");
  auto entries = Load();
  const ModelEntry& e = entries[0];
  EXPECT_TRUE(e.versions.empty());
  ASSERT_EQ(e.failed_versions.size(), 2u);
  EXPECT_EQ(e.status.code(), StatusCode::kInternal);
  EXPECT_EQ(e.status.message(), std::string("m/1") + ": instance 0: cuda out of memory");
  EXPECT_THAT(e.failed_versions[1].second.message(), HasSubstr("corrupt file"));
}

TEST_F(LoadRepositoryTest, RootThatDoesNotExistFails) {
  auto entries = LoadRepository({.root = root_ / "absent", .parse_config = parser_.AsParser(), .backends = &registry_});
  ASSERT_FALSE(entries.ok());
  EXPECT_EQ(entries.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(entries.status().message(), HasSubstr(std::string("absent")));
}

TEST_F(LoadRepositoryTest, EmptyRootHasNoModels) { EXPECT_TRUE(Load().empty()); }

}  // namespace
}  // namespace weft
