#include "frontend/http/statistics_codec.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <vector>

namespace weft {
namespace {

// Every member a Triton client reads is there, with numbers as numbers (perf_analyzer reads them with GetUint64).
TEST(StatisticsCodecTest, WritesTritonsShapeWithEveryMember) {
  VersionStatistics v;
  v.model = "det";
  v.version = 3;
  v.inference_count = 12;
  v.execution_count = 4;
  v.success = {10, 5'000'000};
  v.fail = {2, 7'000};
  v.last_inference_ms = 1'780'000'000'123;
  v.batch_stats = {
      {.batch_size = 1, .compute_input = {3, 300}, .compute_infer = {3, 3'000}, .compute_output = {3, 30}},
      {.batch_size = 4, .compute_input = {1, 100}, .compute_infer = {1, 1'000}, .compute_output = {1, 10}}};
  v.queue = {10, 1'000};
  v.compute_input = {10, 2'000};
  v.compute_infer = {10, 3'000'000};
  v.compute_output = {10, 4'000};
  const std::vector<VersionStatistics> all{v, VersionStatistics{.model = "other", .version = 1}};
  simdjson::padded_string body(EncodeModelStatistics(all));
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc = parser.iterate(body);
  simdjson::ondemand::array stats = doc["model_stats"].get_array();
  std::vector<std::string> names;
  bool first = true;
  for (simdjson::ondemand::object m : stats) {
    names.emplace_back(std::string_view(m["name"].get_string()));
    const std::string version(std::string_view(m["version"].get_string()));
    const uint64_t last_inference = m["last_inference"].get_uint64();
    const uint64_t inferences = m["inference_count"].get_uint64();
    const uint64_t executions = m["execution_count"].get_uint64();
    simdjson::ondemand::object s = m["inference_stats"].get_object();
    auto count = [&](const char* key) { return uint64_t(s[key]["count"].get_uint64()); };
    auto ns = [&](const char* key) { return uint64_t(s[key]["ns"].get_uint64()); };
    if (first) {
      EXPECT_EQ(version, "3");
      EXPECT_EQ(inferences, 12u);
      EXPECT_EQ(executions, 4u);
      EXPECT_EQ(count("success"), 10u);
      EXPECT_EQ(ns("success"), 5'000'000u);
      EXPECT_EQ(last_inference, 1'780'000'000'123u);
      EXPECT_EQ(count("fail"), 2u);
      EXPECT_EQ(ns("fail"), 7'000u);
      EXPECT_EQ(ns("queue"), 1'000u);
      EXPECT_EQ(ns("compute_input"), 2'000u);
      EXPECT_EQ(ns("compute_infer"), 3'000'000u);
      EXPECT_EQ(count("compute_output"), 10u);
      EXPECT_EQ(ns("compute_output"), 4'000u);
    }
    EXPECT_EQ(count("cache_hit"), 0u);
    EXPECT_EQ(ns("cache_miss"), 0u);
    std::vector<std::pair<uint64_t, uint64_t>> batches;  // batch size, compute_infer ns
    for (simdjson::ondemand::object b : m["batch_stats"].get_array()) {
      const uint64_t size = b["batch_size"].get_uint64();
      const uint64_t executions = b["compute_input"]["count"].get_uint64();
      EXPECT_EQ(uint64_t(b["compute_output"]["count"].get_uint64()), executions);
      batches.emplace_back(size, uint64_t(b["compute_infer"]["ns"].get_uint64()));
    }
    simdjson::ondemand::array memory = m["memory_usage"].get_array();
    EXPECT_EQ(size_t(memory.count_elements()), 0u);
    if (first) {
      EXPECT_EQ(batches, (std::vector<std::pair<uint64_t, uint64_t>>{{1, 3'000}, {4, 1'000}}));
    } else {
      EXPECT_EQ(last_inference, 0u);
      EXPECT_TRUE(batches.empty());
    }
    first = false;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"det", "other"}));
}

TEST(StatisticsCodecTest, NoVersionsIsAnEmptyList) { EXPECT_EQ(EncodeModelStatistics({}), R"({"model_stats":[]})"); }

}  // namespace
}  // namespace weft
