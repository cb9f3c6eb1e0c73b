#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/engine.h"
#include "metrics/metrics.h"
#include "model/backend.h"
#include "rollout/rollout_report.h"

namespace weft {

// Triton's --model-control-mode, plus watch.
enum class ModelControlMode {
  kNone,      // load every model at start; nothing changes afterwards; the load and unload API answer an error
  kPoll,      // rescan the repository every poll interval and apply what changed
  kExplicit,  // load what --load-model names at start; afterwards only the load and unload API change anything
  kWatch,     // inotify on the repository: apply each change as it settles (polling where inotify is unavailable)
};
Result<ModelControlMode> ParseModelControlMode(std::string_view text);  // "none", "poll", "explicit", "watch"
std::string_view ModelControlModeName(ModelControlMode mode);

// Reads a config's text (config.pbtxt's, or the load API's JSON override) into a validated ModelConfig; errors start
// with `source`; an empty name takes `default_name`. Injected so that lifecycle/ needs no protobuf.
using ConfigTextParser = std::function<Result<ModelConfig>(std::string_view text, const std::string& source,
                                                           const std::string& default_name)>;

struct LiveRepositoryOptions {
  std::filesystem::path root;
  ModelControlMode mode = ModelControlMode::kNone;
  // Poll mode's rescan interval; watch mode rescans this often where it cannot watch.
  std::chrono::milliseconds poll_interval{15000};
  // Watch and poll mode: a version directory (or a config) loads once nothing in it has changed for this long, so
  // that one being copied is never loaded half way. Not applied at start or to API loads: those take the files as
  // they are.
  std::chrono::milliseconds settle{1000};
  std::vector<std::string> startup_models;  // explicit mode: the models to load at start; "*" = every model
  bool require_checksums = false;           // refuse a version directory without SHA256SUMS
  int load_threads = 4;                     // versions loading at once
  ConfigTextParser parse_config;            // config.pbtxt
  ConfigTextParser parse_config_json;       // the load API's parameters.config
  const BackendRegistry* backends = nullptr;
};

// The live model repository: the control plane over the engine. It decides which versions of which models serve,
// from the repository's files (watch, poll, or once at start) or the repository API (explicit mode), and gets the
// engine there without failing a request: a new version or a changed one is loaded beside what serves (checksums
// verified, instances created, warm-up run), at low priority on its own threads, then published in one step;
// what it replaces finishes the requests it took and is then unloaded. See docs/architecture.md ("Live
// repository") and lifecycle/version_plan.h for the rules.
//
// One controller thread owns every decision; loads run on `load_threads` threads. Public methods are thread-safe and
// never block on a load.
class LiveRepository {
 public:
  // `engine` and `metrics` must outlive it. Nothing happens before Start().
  LiveRepository(Engine* engine, MetricsRegistry* metrics, LiveRepositoryOptions options);
  // Answers the API loads still waiting, stops the threads (a load under way finishes first) and releases its hold on
  // every version; what serves stays published in the engine until the engine goes.
  ~LiveRepository();
  LiveRepository(const LiveRepository&) = delete;
  LiveRepository& operator=(const LiveRepository&) = delete;

  // Loads what the mode says (every model; explicit mode: the startup models) and returns once each has loaded or
  // failed, then starts watching or polling. Fails only when the repository's root cannot be read or a startup model
  // does not exist.
  Status Start();
  // The server is stopping: API loads waiting or arriving are answered UNAVAILABLE, and nothing new loads.
  void BeginShutdown();
  ModelControlMode mode() const;

  // The repository index: every model in the repository or serving, with each version's state (READY, LOADING,
  // UNLOADING, UNAVAILABLE) and the reason. A model without versions to report has one entry, version 0.
  struct IndexEntry {
    std::string name;
    int64_t version = 0;
    std::string state;
    std::string reason;
  };
  std::vector<IndexEntry> Index(bool ready_only) const;

  // Rollouts (docs/rollouts.md). Answered exactly once, on any thread; must not block.
  using RolloutDone = std::function<void(Result<RolloutReport>)>;
  // Starts rolling `spec.candidate` out against the version that now answers requests naming none (the primary):
  // the candidate is loaded beside it if it does not serve yet (in mode none it must already serve), then goes
  // through the stages. Answers at once with the report: NotFound for an unknown model or a candidate not in its
  // directory, InvalidArgument for a candidate that is the primary, Aborted while another rollout of the model is
  // under way, Unavailable while the model does not serve.
  void StartRollout(const std::string& model, RolloutSpec spec, RolloutDone done);
  // The rollout under way, or the model's last one: NotFound when it has had none since it loaded.
  void GetRollout(const std::string& model, RolloutDone done);
  // Rolls the rollout under way back at once (DELETE): the primary answers everything from now on. NotFound when
  // none is under way.
  void AbortRollout(const std::string& model, RolloutDone done);

  // Answered exactly once, on any thread; must not block.
  using Done = std::function<void(Status)>;
  // Explicit mode: loads the model, or reloads it from its files as they are now, with `config_json` instead of its
  // config.pbtxt when given. `done` fires once every version the policy selects has loaded or failed: Ok when all
  // serve; an error naming the failures otherwise (what served before keeps serving). A load of a model already
  // loading joins it. Other modes: Unavailable at once. Unknown model: NotFound.
  void Load(const std::string& model, std::optional<std::string> config_json, Done done);
  // Explicit mode: takes the model out of service at once; its queued and running requests finish, then it is
  // unloaded. `done` fires when that has begun. Other modes: Unavailable. A model neither in the repository nor
  // loaded: NotFound.
  void Unload(const std::string& model, Done done);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft
