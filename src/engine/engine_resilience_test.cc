// The engine's circuit breakers and fallback chains, on real schedulers: a model whose instance fails on demand,
// its fallbacks, and clients that must see no server error once a fallback can answer.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <thread>

#include "engine/engine.h"

namespace weft {
namespace {

using std::chrono::milliseconds;

// Adds `offset` to its FP32 input, so answers say which model gave them; fails while `failing` is set.
class SwitchableInstance : public ModelInstance {
 public:
  SwitchableInstance(float offset, std::atomic<bool>* failing, std::atomic<int>* executions,
                     std::chrono::milliseconds delay)
      : offset_(offset), failing_(failing), executions_(executions), delay_(delay) {}
  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    executions_->fetch_add(1);
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (failing_->load()) return Internal("injected failure");
    std::byte* out;
    Tensor t = Tensor::Allocate("OUTPUT0", DataType::kFp32, inputs[0].shape(), &out);
    auto in = inputs[0].as<float>();
    for (size_t i = 0; i < in.size(); ++i) reinterpret_cast<float*>(out)[i] = in[i] + offset_;
    return std::vector<Tensor>{t};
  }

 private:
  const float offset_;
  std::atomic<bool>* failing_;
  std::atomic<int>* executions_;
  const std::chrono::milliseconds delay_;
};

struct FakeModel {
  std::atomic<bool> failing{false};
  std::atomic<int> executions{0};
};

ModelConfig Config(const std::string& name, std::map<std::string, std::string> parameters = {}) {
  ModelConfig c;
  c.name = name;
  c.backend = "test";
  c.max_batch_size = 4;
  c.inputs = {{"INPUT0", DataType::kFp32, {1}, std::nullopt}};
  c.outputs = {{"OUTPUT0", DataType::kFp32, {1}, std::nullopt}};
  c.parameters = std::move(parameters);
  return c;
}

std::unique_ptr<InferenceRequest> Request(const std::string& model, float value) {
  auto r = std::make_unique<InferenceRequest>();
  r->model_name = model;
  std::vector<std::byte> bytes(4);
  std::memcpy(bytes.data(), &value, 4);
  r->inputs.push_back(Tensor::FromBytes("INPUT0", DataType::kFp32, {1, 1}, std::move(bytes)));
  return r;
}

float Value(const InferenceResponse& r) { return r.outputs.at(0).as<float>()[0]; }

// A breaker that opens after 3 failures in a row, stays open 100 ms, and closes after 2 good probes.
const std::map<std::string, std::string> kQuickBreaker = {
    {"weft.breaker.consecutive_failures", "3"}, {"weft.breaker.minimum_calls", "1000"},
    {"weft.breaker.window_calls", "1000"},      {"weft.breaker.open_ms", "100"},
    {"weft.breaker.max_open_ms", "100"},        {"weft.breaker.half_open_probes", "2"}};

class EngineResilienceTest : public ::testing::Test {
 protected:
  // `edit` changes the version before it starts (its instances, its backend).
  void Serve(const ModelConfig& config, float offset, FakeModel* model, milliseconds delay = milliseconds(0),
             std::function<void(LoadedVersion&)> edit = nullptr) {
    auto loaded = std::make_shared<LoadedVersion>();
    loaded->version = 1;
    loaded->config = config;
    loaded->instances.push_back(
        std::make_unique<SwitchableInstance>(offset, &model->failing, &model->executions, delay));
    if (edit) edit(*loaded);
    Result<VersionHandle> handle = engine_.StartVersion(loaded);
    ASSERT_TRUE(handle.ok()) << handle.status().ToString();
    auto route = std::make_shared<ModelRoute>();
    route->serving[1] = *handle;
    route->versions.push_back({1, VersionState::kReady, ""});
    route->state = VersionState::kReady;
    engine_.PublishModel(config.name, std::move(route));
  }

  Result<InferenceResponse> Infer(const std::string& model, float value = 1) {
    std::promise<Result<InferenceResponse>> done;
    auto future = done.get_future();
    engine_.Submit(Request(model, value), [&done](Result<InferenceResponse> r) { done.set_value(std::move(r)); });
    return future.get();
  }

  bool Exposes(const std::string& series) { return metrics_.Exposition().find(series) != std::string::npos; }

  MetricsRegistry metrics_;
  Engine engine_{Engine::Options{}, &metrics_};
};

TEST_F(EngineResilienceTest, AnOpenBreakerAnswers503WithRetryAfterWithoutRunningTheModel) {
  FakeModel det;
  Serve(Config("det", kQuickBreaker), 10, &det);
  det.failing = true;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Infer("det").status().code(), StatusCode::kInternal);
  EXPECT_TRUE(Exposes("weft_breaker_state{model=\"det\",version=\"1\"} 1"));
  const int ran = det.executions.load();
  Result<InferenceResponse> refused = Infer("det");
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().ToString();
  EXPECT_GT(refused.status().retry_after().count(), 0);
  EXPECT_LE(refused.status().retry_after().count(), 100);
  EXPECT_EQ(det.executions.load(), ran);
  EXPECT_TRUE(Exposes("weft_breaker_rejected_total{model=\"det\",version=\"1\"} 1"));
  EXPECT_TRUE(Exposes("weft_breaker_transitions_total{model=\"det\",version=\"1\",to=\"open\"} 1"));
}

TEST_F(EngineResilienceTest, ClientErrorsDoNotOpenTheBreaker) {
  FakeModel det;
  Serve(Config("det", kQuickBreaker), 10, &det);
  for (int i = 0; i < 10; ++i) {
    auto bad = Request("det", 1);
    bad->inputs[0] = Tensor::FromBytes("INPUT0", DataType::kFp32, {1, 2}, std::vector<std::byte>(8));
    std::promise<Status> done;
    engine_.Submit(std::move(bad), [&](Result<InferenceResponse> r) { done.set_value(r.status()); });
    EXPECT_EQ(done.get_future().get().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(Infer("det").ok());
  EXPECT_TRUE(Exposes("weft_breaker_state{model=\"det\",version=\"1\"} 0"));
}

TEST_F(EngineResilienceTest, FallbacksAnswerEveryRequestWhileThePrimaryFails) {
  FakeModel det, small;
  auto parameters = kQuickBreaker;
  parameters["weft.fallback_models"] = "det_small";
  // Open for the whole test: under ThreadSanitizer 50 requests can take longer than the quick breaker's 100 ms, and a
  // half-open probe would then run the primary a fourth time.
  parameters["weft.breaker.open_ms"] = parameters["weft.breaker.max_open_ms"] = "60000";
  Serve(Config("det_small"), 100, &small);
  Serve(Config("det", parameters), 10, &det);
  det.failing = true;
  for (int i = 0; i < 50; ++i) {
    Result<InferenceResponse> r = Infer("det", static_cast<float>(i));
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().ToString();
    EXPECT_EQ(r->model_name, "det_small");
    EXPECT_EQ(Value(*r), 100 + i);
    EXPECT_EQ(r->parameters.at("weft_fallback_from"), "det/1");
    // The first three failed on the primary; after them its breaker is open and turns the rest away at once.
    EXPECT_EQ(r->parameters.at("weft_fallback_reason"), i < 3 ? "server_error" : "circuit_open");
  }
  EXPECT_EQ(det.executions.load(), 3);
  EXPECT_TRUE(Exposes("weft_fallback_answers_total{model=\"det\",fallback=\"det_small\",reason=\"circuit_open\"} 47"));
  EXPECT_TRUE(Exposes("weft_fallback_answers_total{model=\"det\",fallback=\"det_small\",reason=\"server_error\"} 3"));
}

TEST_F(EngineResilienceTest, HalfOpenProbesCloseTheBreakerOnceThePrimaryHeals) {
  FakeModel det, small;
  auto parameters = kQuickBreaker;
  parameters["weft.fallback_models"] = "det_small";
  Serve(Config("det_small"), 100, &small);
  Serve(Config("det", parameters), 10, &det);
  det.failing = true;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Infer("det").ok());
  det.failing = false;
  EXPECT_EQ(Infer("det")->model_name, "det_small");  // still open
  std::this_thread::sleep_for(milliseconds(150));
  // Half-open: two probes go to the primary and succeed; it is closed and answers from then on.
  for (int i = 0; i < 5; ++i) {
    Result<InferenceResponse> r = Infer("det");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->model_name, "det") << i;
    EXPECT_TRUE(r->parameters.empty());
  }
  EXPECT_TRUE(Exposes("weft_breaker_state{model=\"det\",version=\"1\"} 0"));
  EXPECT_TRUE(Exposes("weft_breaker_transitions_total{model=\"det\",version=\"1\",to=\"half_open\"} 1"));
  EXPECT_TRUE(Exposes("weft_breaker_transitions_total{model=\"det\",version=\"1\",to=\"closed\"} 1"));
}

TEST_F(EngineResilienceTest, AFailedProbeReopens) {
  FakeModel det;
  Serve(Config("det", kQuickBreaker), 10, &det);
  det.failing = true;
  for (int i = 0; i < 3; ++i) (void)Infer("det");
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_EQ(Infer("det").status().code(), StatusCode::kInternal);  // the probe ran, and failed
  EXPECT_EQ(Infer("det").status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Exposes("weft_breaker_transitions_total{model=\"det\",version=\"1\",to=\"open\"} 2"));
}

TEST_F(EngineResilienceTest, TheChainMovesOnToTheFirstFallbackThatAnswers) {
  FakeModel det, small, cpu;
  auto parameters = kQuickBreaker;
  parameters["weft.fallback_models"] = "missing, det_small, det_cpu";
  Serve(Config("det_small"), 100, &small);
  Serve(Config("det_cpu"), 1000, &cpu);
  Serve(Config("det", parameters), 10, &det);
  det.failing = true;
  small.failing = true;
  for (int i = 0; i < 10; ++i) {
    Result<InferenceResponse> r = Infer("det");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->model_name, "det_cpu");
    EXPECT_EQ(Value(*r), 1001);
  }
  // det_small's own breaker (the defaults: open after 5 failures in a row) opened too, and then it is skipped
  // without running.
  EXPECT_EQ(small.executions.load(), 5);
}

TEST_F(EngineResilienceTest, WithNoFallbackLeftTheClientGets503AndRetryAfter) {
  FakeModel det, small;
  auto parameters = kQuickBreaker;
  parameters["weft.fallback_models"] = "det_small";
  Serve(Config("det_small"), 100, &small);
  Serve(Config("det", parameters), 10, &det);
  det.failing = true;
  small.failing = true;
  Result<InferenceResponse> failed = Infer("det");
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable) << failed.status().ToString();
  EXPECT_GT(failed.status().retry_after().count(), 0);
  EXPECT_NE(failed.status().message().find("injected failure"), std::string::npos) << failed.status().message();
  for (int i = 0; i < 5; ++i) (void)Infer("det");
  Result<InferenceResponse> open = Infer("det");
  EXPECT_EQ(open.status().code(), StatusCode::kUnavailable);
  EXPECT_GT(open.status().retry_after().count(), 0);
  EXPECT_LE(open.status().retry_after().count(), 100);
}

// weft.degrade_to: once the primary's queue would make a request miss its deadline (measured: the queue, its
// executions' mean duration), the request goes to the cheaper model; requests that fit still go to the primary.
TEST_F(EngineResilienceTest, RequestsThatWouldMissTheirDeadlineGoToTheCheaperModel) {
  FakeModel det, small;
  Serve(Config("det_small"), 100, &small);
  Serve(Config("det", {{"weft.degrade_to", "det_small"}}), 10, &det, milliseconds(20));
  ASSERT_TRUE(Infer("det").ok());  // no deadline: measures one execution of det
  constexpr int kRequests = 10;
  std::vector<std::promise<Result<InferenceResponse>>> done(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    auto request = Request("det", 1);
    request->deadline = std::chrono::steady_clock::now() + milliseconds(50);
    engine_.Submit(std::move(request), [&done, i](Result<InferenceResponse> r) { done[i].set_value(std::move(r)); });
  }
  int by_det = 0, degraded = 0;
  for (auto& d : done) {
    Result<InferenceResponse> r = d.get_future().get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (r->model_name == "det") {
      ++by_det;
      EXPECT_TRUE(r->parameters.empty());
    } else {
      ++degraded;
      EXPECT_EQ(r->model_name, "det_small");
      EXPECT_EQ(r->parameters.at("weft_degraded_from"), "det/1");
    }
  }
  // det takes 20 ms a request, one at a time: the first one or two fit in 50 ms, the rest would not.
  EXPECT_GE(by_det, 1);
  EXPECT_GE(degraded, kRequests - 3);
  EXPECT_TRUE(Exposes("weft_degraded_answers_total{model=\"det\",to=\"det_small\"} " + std::to_string(degraded)));
  // Without a deadline nothing is degraded, however long the queue.
  EXPECT_EQ(Infer("det")->model_name, "det");
}

// Many clients at once while the primary flips between failing and healthy: every request is answered exactly
// once, and none with a server error, since the fallback always can.
TEST_F(EngineResilienceTest, ConcurrentClientsSeeNoServerErrorWhileAFallbackCanAnswer) {
  FakeModel det, small;
  auto parameters = kQuickBreaker;
  parameters["weft.fallback_models"] = "det_small";
  parameters["weft.breaker.open_ms"] = "5";
  parameters["weft.breaker.max_open_ms"] = "20";
  Serve(Config("det_small"), 100, &small);
  Serve(Config("det", parameters), 10, &det);
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    while (!stop) {
      det.failing = !det.failing.load();
      std::this_thread::sleep_for(milliseconds(3));
    }
  });
  constexpr int kClients = 4, kEach = 300;
  std::atomic<int> answered{0}, errors{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        Result<InferenceResponse> r = Infer("det");
        answered++;
        if (!r.ok()) errors++;
      }
    });
  }
  for (auto& t : clients) t.join();
  stop = true;
  flipper.join();
  EXPECT_EQ(answered.load(), kClients * kEach);
  EXPECT_EQ(errors.load(), 0);
}

// An instance that hangs in its first execution until `release` is ready.
class HangingInstance : public ModelInstance {
 public:
  explicit HangingInstance(std::shared_future<void> release) : release_(std::move(release)) {}
  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    release_.wait();
    return Internal("released late");
  }

 private:
  std::shared_future<void> release_;
};

// Creates SwitchableInstances of `model` that add 100.
class ReplacingBackend : public Backend {
 public:
  explicit ReplacingBackend(FakeModel* model) : model_(model) {}
  Status Validate(const ModelConfig&) const override { return Status::Ok(); }
  Result<std::unique_ptr<ModelInstance>> CreateInstance(const ModelConfig&, const std::filesystem::path&,
                                                        int) const override {
    created_.fetch_add(1);
    return std::unique_ptr<ModelInstance>(
        std::make_unique<SwitchableInstance>(100, &model_->failing, &model_->executions, milliseconds(0)));
  }
  std::string DefaultModelFilename() const override { return ""; }
  int created() const { return created_.load(); }

 private:
  FakeModel* const model_;
  mutable std::atomic<int> created_{0};
};

TEST_F(EngineResilienceTest, AHungExecutionIsAnsweredAtTheLimitAndItsInstanceReplacedFromTheBackend) {
  FakeModel det;
  std::promise<void> release;
  auto backend = std::make_shared<ReplacingBackend>(&det);
  Serve(Config("det", {{"weft.execution_timeout_ms", "50"}}), 10, &det, milliseconds(0), [&](LoadedVersion& loaded) {
    loaded.instances[0] = std::make_unique<HangingInstance>(release.get_future().share());
    loaded.backend = backend;
  });
  const auto start = std::chrono::steady_clock::now();
  Result<InferenceResponse> hung = Infer("det");
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(50));
  EXPECT_EQ(hung.status().code(), StatusCode::kInternal) << hung.status().ToString();
  EXPECT_NE(hung.status().message().find("weft.execution_timeout_ms (50 ms)"), std::string::npos)
      << hung.status().message();
  // The instance that hangs still hangs; the fresh one from the backend answers.
  Result<InferenceResponse> next = Infer("det", 1);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(Value(*next), 101);
  EXPECT_EQ(backend->created(), 1);
  EXPECT_TRUE(Exposes("weft_execution_timeouts_total{model=\"det\",version=\"1\"} 1"));
  for (int i = 0; i < 1000 && !Exposes("weft_instances_replaced_total{model=\"det\",version=\"1\"} 1"); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(Exposes("weft_instances_replaced_total{model=\"det\",version=\"1\"} 1"));
  release.set_value();  // the hung execution returns; the engine's teardown waits for it
}

}  // namespace
}  // namespace weft
