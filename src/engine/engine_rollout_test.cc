// The engine's side of a rollout, on real schedulers: which version answers requests that name none, the canary's
// share, stickiness, and shadow copies that are compared, bounded and never answer a client.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include "device/cpu/cpu_device.h"
#include "engine/engine.h"

namespace weft {
namespace {

using std::chrono::milliseconds;

// Adds `offset` to its FP32 input, so answers say which version gave them. Fails while `failing` is set; waits while
// `held` is set.
struct Behaviour {
  std::atomic<bool> failing{false};
  std::atomic<int> executions{0};
  std::mutex mu;
  std::condition_variable cv;
  bool held = false;  // guarded by mu

  void Hold(bool on) {
    {
      std::lock_guard lock(mu);
      held = on;
    }
    cv.notify_all();
  }
};

class OffsetInstance : public ModelInstance {
 public:
  OffsetInstance(float offset, Behaviour* behaviour) : offset_(offset), behaviour_(behaviour) {}
  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    {
      std::unique_lock lock(behaviour_->mu);
      behaviour_->cv.wait(lock, [&] { return !behaviour_->held; });
    }
    behaviour_->executions.fetch_add(1);
    if (behaviour_->failing.load()) return Internal("injected failure");
    std::byte* out;
    Tensor t = Tensor::Allocate("OUTPUT0", DataType::kFp32, inputs[0].shape(), &out);
    auto in = inputs[0].as<float>();
    for (size_t i = 0; i < in.size(); ++i) reinterpret_cast<float*>(out)[i] = in[i] + offset_;
    return std::vector<Tensor>{t};
  }

 private:
  const float offset_;
  Behaviour* behaviour_;
};

ModelConfig Config() {
  ModelConfig c;
  c.name = "det";
  c.backend = "test";
  c.max_batch_size = 4;
  c.inputs = {{"INPUT0", DataType::kFp32, {1}, std::nullopt}};
  c.outputs = {{"OUTPUT0", DataType::kFp32, {1}, std::nullopt}};
  return c;
}

std::unique_ptr<InferenceRequest> Request(float value, int64_t version = 0, std::string camera = "") {
  auto r = std::make_unique<InferenceRequest>();
  r->model_name = "det";
  r->model_version = version;
  if (!camera.empty()) r->parameters["camera"] = camera;
  std::vector<std::byte> bytes(4);
  std::memcpy(bytes.data(), &value, 4);
  r->inputs.push_back(Tensor::FromBytes("INPUT0", DataType::kFp32, {1, 1}, std::move(bytes)));
  return r;
}

float AnswerValue(const InferenceResponse& r) { return r.outputs.at(0).as<float>()[0]; }

class EngineRolloutTest : public ::testing::Test {
 protected:
  // Versions 1 (adds 10) and 2 (adds `candidate_offset`), version 1 the default, with `rollout` (may be null).
  void Serve(float candidate_offset, std::shared_ptr<RolloutRoute> rollout) {
    auto route = std::make_shared<ModelRoute>();
    for (int64_t version : {1, 2}) {
      auto loaded = std::make_shared<LoadedVersion>();
      loaded->version = version;
      loaded->config = Config();
      loaded->instances.push_back(std::make_unique<OffsetInstance>(version == 1 ? 10.0f : candidate_offset,
                                                                   version == 1 ? &primary_ : &candidate_));
      Result<VersionHandle> handle = engine_.StartVersion(loaded);
      ASSERT_TRUE(handle.ok()) << handle.status().ToString();
      route->serving[version] = *handle;
      route->versions.push_back({version, VersionState::kReady, ""});
    }
    route->state = VersionState::kReady;
    route->default_version = 1;
    route->rollout = std::move(rollout);
    engine_.PublishModel("det", std::move(route));
  }

  std::shared_ptr<RolloutRoute> Rollout(double canary, double shadow, uint32_t shadow_max_in_flight = 64) {
    auto r = std::make_shared<RolloutRoute>();
    r->primary = 1;
    r->candidate = 2;
    r->canary_share = canary;
    r->shadow_share = shadow;
    r->recorder = std::make_shared<StageRecorder>(std::chrono::steady_clock::now(), shadow_max_in_flight);
    return r;
  }

  Result<InferenceResponse> Infer(std::unique_ptr<InferenceRequest> request) {
    std::promise<Result<InferenceResponse>> done;
    auto future = done.get_future();
    engine_.Submit(std::move(request), [&done](Result<InferenceResponse> r) { done.set_value(std::move(r)); });
    return future.get();
  }

  // Waits (up to 10 s) until the recorder has seen `answers` candidate answers.
  static StageFigures WaitForCandidate(const RolloutRoute& rollout, uint64_t answers) {
    StageFigures figures;
    for (int i = 0; i < 1000; ++i) {
      figures = rollout.recorder->Snapshot(RolloutCriteria{}, std::chrono::steady_clock::now());
      if (figures.candidate.requests >= answers) break;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return figures;
  }

  Behaviour primary_;
  Behaviour candidate_;
  MetricsRegistry metrics_;
  // Batches run on CPU device streams, as in the server: the candidate's shadow copies on the background stream.
  std::unique_ptr<Device> device_ = std::move(CreateCpuDevice({.workers = 2}).value());
  Engine engine_{Engine::Options{.device = device_.get()}, &metrics_};
};

TEST_F(EngineRolloutTest, TheDefaultVersionAnswersRequestsNamingNoneAndANamedVersionStillAnswers) {
  Serve(20, nullptr);
  EXPECT_EQ(AnswerValue(*Infer(Request(1))), 11);
  EXPECT_EQ(AnswerValue(*Infer(Request(1, /*version=*/2))), 21);
  EXPECT_EQ(engine_.FindVersion("det", 0).value()->version, 1);
}

TEST_F(EngineRolloutTest, ACanaryAnswersItsShareAndEveryAnswerIsRecordedForItsArm) {
  auto rollout = Rollout(/*canary=*/0.3, /*shadow=*/0);
  Serve(20, rollout);
  int candidate = 0;
  constexpr int kRequests = 1000;
  for (int i = 0; i < kRequests; ++i) {
    Result<InferenceResponse> r = Infer(Request(1));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (AnswerValue(*r) == 21) ++candidate;
    EXPECT_EQ(r->model_version, AnswerValue(*r) == 21 ? 2 : 1);
  }
  EXPECT_NEAR(candidate, 300, 75);
  StageFigures figures = rollout->recorder->Snapshot(RolloutCriteria{}, std::chrono::steady_clock::now());
  EXPECT_EQ(figures.candidate.requests, static_cast<uint64_t>(candidate));
  EXPECT_EQ(figures.primary.requests, static_cast<uint64_t>(kRequests - candidate));
  // A request that names its version is not part of the rollout.
  EXPECT_EQ(AnswerValue(*Infer(Request(1, /*version=*/1))), 11);
  figures = rollout->recorder->Snapshot(RolloutCriteria{}, std::chrono::steady_clock::now());
  EXPECT_EQ(figures.primary.requests + figures.candidate.requests, static_cast<uint64_t>(kRequests));
}

TEST_F(EngineRolloutTest, AStickyKeyKeepsEachClientOnOneArm) {
  auto rollout = Rollout(/*canary=*/0.5, /*shadow=*/0);
  rollout->sticky_key = "camera";
  Serve(20, rollout);
  int on_candidate = 0;
  for (int camera = 0; camera < 40; ++camera) {
    const float first = AnswerValue(*Infer(Request(1, 0, "cam-" + std::to_string(camera))));
    for (int i = 0; i < 5; ++i) EXPECT_EQ(AnswerValue(*Infer(Request(1, 0, "cam-" + std::to_string(camera)))), first);
    if (first == 21) ++on_candidate;
  }
  EXPECT_GT(on_candidate, 5);
  EXPECT_LT(on_candidate, 35);
}

TEST_F(EngineRolloutTest, AShadowedCandidateNeverAnswersAClientAndItsWrongAnswersDiverge) {
  auto rollout = Rollout(/*canary=*/0, /*shadow=*/1.0);
  Serve(/*candidate_offset=*/30, rollout);  // a wrong candidate
  constexpr int kRequests = 50;
  for (int i = 0; i < kRequests; ++i) EXPECT_EQ(AnswerValue(*Infer(Request(static_cast<float>(i)))), i + 10.0f);
  StageFigures figures = WaitForCandidate(*rollout, kRequests);
  EXPECT_EQ(figures.candidate.requests, static_cast<uint64_t>(kRequests));
  EXPECT_EQ(figures.shadow_sent, static_cast<uint64_t>(kRequests));
  for (int i = 0; i < 1000 && (figures.divergence.compared < kRequests || figures.noise.compared == 0); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    figures = rollout->recorder->Snapshot(RolloutCriteria{}, std::chrono::steady_clock::now());
  }
  EXPECT_EQ(figures.divergence.compared, static_cast<uint64_t>(kRequests));
  EXPECT_EQ(figures.divergence.diverged, static_cast<uint64_t>(kRequests));
  EXPECT_DOUBLE_EQ(figures.divergence.max_abs, 20);
  // The noise floor: the primary against itself, on some of the copies.
  EXPECT_GT(figures.noise.compared, 0u);
  EXPECT_EQ(figures.noise.max_abs, 0);
}

TEST_F(EngineRolloutTest, AFaithfulShadowedCandidateDoesNotDiverge) {
  auto rollout = Rollout(/*canary=*/0, /*shadow=*/1.0);
  Serve(/*candidate_offset=*/10, rollout);
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(Infer(Request(static_cast<float>(i))).ok());
  StageFigures figures = WaitForCandidate(*rollout, 30);
  for (int i = 0; i < 100 && figures.divergence.compared < 30; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    figures = rollout->recorder->Snapshot(RolloutCriteria{}, std::chrono::steady_clock::now());
  }
  EXPECT_EQ(figures.divergence.compared, 30u);
  EXPECT_EQ(figures.divergence.diverged, 0u);
  // The candidate's copies ran on the device's background stream, where they take no core from the primary.
  const std::string text = metrics_.Exposition();
  const std::string series = "weft_stream_busy_seconds_total{device=\"cpu\",stream=\"background\"} ";
  const size_t at = text.find(series);
  ASSERT_NE(at, std::string::npos);
  EXPECT_GT(std::strtod(text.c_str() + at + series.size(), nullptr), 0.0);
}

TEST_F(EngineRolloutTest, ShadowCopiesBeyondTheBoundAreDroppedAndThePrimaryIsNotDelayed) {
  auto rollout = Rollout(/*canary=*/0, /*shadow=*/1.0, /*shadow_max_in_flight=*/2);
  Serve(10, rollout);
  candidate_.Hold(true);  // the candidate is busy
  for (int i = 0; i < 6; ++i) {
    std::promise<Result<InferenceResponse>> done;
    auto future = done.get_future();
    engine_.Submit(Request(1), [&done](Result<InferenceResponse> r) { done.set_value(std::move(r)); });
    ASSERT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "the primary waited";
    EXPECT_EQ(AnswerValue(*future.get()), 11);
  }
  StageFigures figures = rollout->recorder->Snapshot(RolloutCriteria{}, std::chrono::steady_clock::now());
  EXPECT_EQ(figures.shadow_sent, 2u);
  EXPECT_EQ(figures.shadow_dropped, 4u);
  candidate_.Hold(false);
  figures = WaitForCandidate(*rollout, 2);
  EXPECT_EQ(figures.candidate.requests, 2u);
  // Room again: the next copy goes out.
  ASSERT_TRUE(Infer(Request(1)).ok());
  EXPECT_EQ(rollout->recorder->Snapshot(RolloutCriteria{}, std::chrono::steady_clock::now()).shadow_sent, 3u);
}

TEST_F(EngineRolloutTest, ACanaryThatFailsCountsItsFaultsAndItsBreakersRefusalsOnItsArm) {
  auto rollout = Rollout(/*canary=*/1.0, /*shadow=*/0);
  Serve(20, rollout);
  candidate_.failing = true;
  // Five faults, then the candidate's breaker opens: its refusals are errors the client sees as the server's too.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Infer(Request(1)).status().code(), i < 5 ? StatusCode::kInternal : StatusCode::kUnavailable);
  }
  StageFigures figures = rollout->recorder->Snapshot(RolloutCriteria{}, std::chrono::steady_clock::now());
  EXPECT_EQ(figures.candidate.requests, 10u);
  EXPECT_EQ(figures.candidate.errors, 10u);
  EXPECT_EQ(figures.primary.requests, 0u);
}

TEST_F(EngineRolloutTest, WithoutTheCandidateServingEverythingGoesToThePrimary) {
  auto route = std::make_shared<ModelRoute>();
  auto loaded = std::make_shared<LoadedVersion>();
  loaded->version = 1;
  loaded->config = Config();
  loaded->instances.push_back(std::make_unique<OffsetInstance>(10.0f, &primary_));
  route->serving[1] = engine_.StartVersion(loaded).value();
  route->state = VersionState::kReady;
  route->rollout = Rollout(/*canary=*/1.0, /*shadow=*/0);
  engine_.PublishModel("det", route);
  EXPECT_EQ(AnswerValue(*Infer(Request(1))), 11);
}

}  // namespace
}  // namespace weft
