#include "lifecycle/live_repository.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <variant>

#include "base/log.h"
#include "base/thread_name.h"
#include "lifecycle/lifecycle_metrics.h"
#include "lifecycle/model_rollout.h"
#include "lifecycle/model_wish.h"
#include "lifecycle/repository_watcher.h"
#include "lifecycle/version_loader.h"
#include "lifecycle/version_plan.h"
#include "model/resilience_config.h"
#include "repository/repository_scan.h"
#include "resilience/fallback_compat.h"

namespace weft {
namespace fs = std::filesystem;

namespace {

using Phase = VersionCopy::Phase;
using SteadyClock = std::chrono::steady_clock;

int64_t RealtimeNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A model name from a client names a directory under the root: nothing that could point elsewhere.
Status CheckModelName(const std::string& name) {
  if (name.empty()) return InvalidArgument("a model name is required");
  if (name[0] == '.' || name.find('/') != std::string::npos || name.find('\0') != std::string::npos) {
    return InvalidArgument("'" + name + "' is not a model name: it names no directory of the repository");
  }
  return Status::Ok();
}

std::string JoinVersions(const std::vector<int64_t>& versions) {
  std::string s;
  for (int64_t v : versions) s += (s.empty() ? "" : ", ") + std::to_string(v);
  return "[" + s + "]";
}

std::string Millis(double seconds) { return std::to_string(static_cast<int64_t>(seconds * 1000 + 0.5)) + " ms"; }

// What reaches the controller thread from elsewhere.
struct ApiLoad {
  std::string model;
  std::optional<std::string> config_json;
  LiveRepository::Done done;
};
struct ApiUnload {
  std::string model;
  LiveRepository::Done done;
};
struct Loaded {
  LoadOutcome outcome;
};
struct Unloaded {
  std::string model;
  uint64_t copy_id = 0;
};
struct InitialLoad {
  std::promise<Status> done;
};
struct ApiRollout {
  enum class Kind { kStart, kGet, kAbort };
  Kind kind = Kind::kGet;
  std::string model;
  RolloutSpec spec;  // kStart
  LiveRepository::RolloutDone done;
};
struct Shutdown {};
using ControlEvent = std::variant<ApiLoad, ApiUnload, Loaded, Unloaded, InitialLoad, ApiRollout, Shutdown>;

// The controller's mailbox. Shared with the loader threads and the engine's unload callbacks, which may run after the
// repository is gone: then their events are dropped.
class Inbox {
 public:
  Inbox() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Inbox() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  bool ok() const { return fd_ >= 0; }

  void Post(ControlEvent event) {
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      events_.push_back(std::move(event));
    }
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(fd_, &one, sizeof(one));
  }
  std::deque<ControlEvent> Take() {
    uint64_t count = 0;
    [[maybe_unused]] ssize_t n = read(fd_, &count, sizeof(count));
    std::lock_guard lock(mu_);
    return std::exchange(events_, {});
  }
  // Later posts are dropped; returns what was still waiting.
  std::deque<ControlEvent> Close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    return std::exchange(events_, {});
  }

 private:
  const int fd_;
  std::mutex mu_;
  std::deque<ControlEvent> events_;  // guarded by mu_
  bool closed_ = false;              // guarded by mu_
};

}  // namespace

Result<ModelControlMode> ParseModelControlMode(std::string_view text) {
  if (text == "none") return ModelControlMode::kNone;
  if (text == "poll") return ModelControlMode::kPoll;
  if (text == "explicit") return ModelControlMode::kExplicit;
  if (text == "watch") return ModelControlMode::kWatch;
  return InvalidArgument("model control mode '" + std::string(text) + "': expected none, poll, explicit or watch");
}

std::string_view ModelControlModeName(ModelControlMode mode) {
  switch (mode) {
    case ModelControlMode::kNone: return "none";
    case ModelControlMode::kPoll: return "poll";
    case ModelControlMode::kExplicit: return "explicit";
    case ModelControlMode::kWatch: return "watch";
  }
  return "none";
}

struct LiveRepository::Impl {
  // One copy of a version: its place in the plan and, once loaded, its handle.
  struct Copy {
    uint64_t id = 0;
    VersionCopy copy;
    VersionHandle handle;  // kReady, kServing
  };
  struct Model {
    Wish wish;
    std::shared_ptr<const ModelConfig> config;  // what new copies load with (the latest valid config)
    uint64_t config_source = 0;                 // the text the latest settled wish was made from
    std::optional<std::string> override_json;   // explicit mode: the load API's config
    std::vector<Copy> copies;
    std::vector<Done> waiters;               // API loads answered once the model settles
    std::vector<int64_t> reported_versions;  // versions with a state series in the metrics

    // The last scan of its files and the config read from it: a rollout's decisions make the wish again from them
    // without reading the files again.
    ModelDirScan scan;
    Result<ModelConfig> scanned_config = Unavailable("no config");
    uint64_t scanned_config_source = 0;
    int64_t scanned_config_changed = 0;

    // Rollouts (docs/rollouts.md).
    std::unique_ptr<ModelRollout> rollout;  // under way, or the last one
    std::optional<RolloutSpec> policy;      // the config's weft.rollout.*: new versions are rolled out, not swapped in
    // The version that answers requests naming none, while it serves (a rollout's outcome), and the highest version
    // the directory held when it was set: without a policy, a newer version takes over as it would without a pin.
    std::optional<int64_t> default_pin;
    int64_t pin_horizon = 0;
    struct Rejected {
      int64_t version = 0;
      uint64_t source = 0;  // these files, with this config: not rolled out again until either changes
      bool unload = false;  // unloaded (not loaded again) rather than kept loaded and unused
    };
    std::optional<Rejected> rolled_back;
  };

  Engine* const engine;
  MetricsRegistry* const registry;
  const LiveRepositoryOptions options;
  const std::string root;
  LifecycleMetrics metrics;
  const std::shared_ptr<Inbox> inbox = std::make_shared<Inbox>();
  std::atomic<bool> shutting_down{false};

  // The controller thread's own; nothing else touches them.
  std::map<std::string, Model> models;
  std::unique_ptr<RepositoryWatcher> watcher;
  bool polling = false;                  // poll mode, or watch mode without inotify
  SteadyClock::time_point next_poll{};   // when polling
  std::set<std::string> dirty;           // models whose files changed, to rescan at refresh_at
  SteadyClock::time_point refresh_at{};  // when dirty is not empty
  SteadyClock::time_point next_rollout_tick{};
  uint64_t next_copy_id = 1;
  std::optional<std::promise<Status>> initial;  // Start() waits for it
  std::set<std::string> initial_models;         // not settled yet

  std::unique_ptr<VersionLoader> loader;  // after the state its callbacks post about, before the thread
  std::jthread controller;

  Impl(Engine* e, MetricsRegistry* m, LiveRepositoryOptions o)
      : engine(e), registry(m), options(std::move(o)), root(options.root.string()), metrics(m) {}

  // ---- Files to wishes ----

  std::chrono::milliseconds SettleTime(bool at_start) const {
    if (at_start) return std::chrono::milliseconds(0);
    return options.mode == ModelControlMode::kWatch || options.mode == ModelControlMode::kPoll
               ? options.settle
               : std::chrono::milliseconds(0);
  }

  // The config of `name` from the scan (or the override): parsed, named, with a backend that takes it.
  Result<ModelConfig> ReadConfig(const std::string& name, const ModelDirScan& scan, const Model& model,
                                 uint64_t* source, int64_t* changed) {
    *source = 0;
    *changed = 0;
    Result<ModelConfig> config = NotFound(name + "/config.pbtxt: not found");
    if (model.override_json) {
      *source = Fnv1a(model.override_json->data(), model.override_json->size(), 0x6f76657272696465ull);
      config = options.parse_config_json(*model.override_json, "parameters.config", name);
    } else if (!scan.config_error.ok()) {
      return scan.config_error;
    } else if (scan.config) {
      *source = Fnv1a(scan.config->data(), scan.config->size());
      *changed = scan.config_change_ns;
      config = options.parse_config(*scan.config, name + "/config.pbtxt", name);
    }
    if (!config.ok()) return WithoutRoot(config.status(), root);
    if (config->name.empty()) config->name = name;
    const std::string source_name = model.override_json ? "parameters.config" : name + "/config.pbtxt";
    if (config->name != name) {
      return InvalidArgument(source_name + ": name: '" + config->name + "' does not match the directory name '" + name +
                             "'");
    }
    Result<std::shared_ptr<const Backend>> backend = options.backends->Find(*config);
    if (!backend.ok()) return backend.status().WithContext(source_name);
    WEFT_RETURN_IF_ERROR((*backend)->Validate(*config).WithContext(source_name));
    ApplyDefaultInstanceGroups(**backend, *config);
    WEFT_RETURN_IF_ERROR(ParseRolloutPolicy(*config).status().WithContext(source_name));
    WEFT_ASSIGN_OR_RETURN(ResilienceConfig resilience, ParseResilienceConfig(*config));
    std::vector<std::pair<std::string, const char*>> stand_ins;  // (model, the parameter that names it)
    for (const std::string& fallback : resilience.fallback_models)
      stand_ins.emplace_back(fallback, "weft.fallback_models");
    if (!resilience.degrade_to.empty()) stand_ins.emplace_back(resilience.degrade_to, "weft.degrade_to");
    for (const auto& [other_name, parameter] : stand_ins) {
      Result<ModelConfig> other = FallbackConfig(other_name);
      if (!other.ok()) return other.status().WithContext(source_name + ": " + parameter);
      WEFT_RETURN_IF_ERROR(CheckFallbackCompatible(*config, *other).WithContext(source_name + ": " + parameter));
    }
    return config;
  }

  // A fallback's config, to check a model's against: the one it serves with, or else its repository's.
  Result<ModelConfig> FallbackConfig(const std::string& name) {
    auto known = models.find(name);
    if (known != models.end() && known->second.config) return *known->second.config;
    ModelDirScan scan = ScanModelDir(options.root, name);
    if (!scan.exists) return NotFound("fallback '" + name + "' is not in the repository");
    if (!scan.config_error.ok()) return scan.config_error;
    if (!scan.config) return NotFound("fallback '" + name + "' has no config.pbtxt");
    Result<ModelConfig> config = options.parse_config(*scan.config, name + "/config.pbtxt", name);
    if (!config.ok()) return WithoutRoot(config.status(), root);
    if (config->name.empty()) config->name = name;
    return config;
  }

  // Rescans the model's directory and replaces its wish. `serve`: whether it should serve at all (explicit mode's
  // loaded set; the other modes: whether its directory exists).
  void Refresh(const std::string& name, bool serve, bool at_start) {
    Model& model = models[name];
    model.scan = ScanModelDir(options.root, name);
    if (!serve) model.scan.exists = false;
    model.scanned_config_source = 0;
    model.scanned_config_changed = 0;
    model.scanned_config = Unavailable("no config");
    if (model.scan.exists) {
      model.scanned_config =
          ReadConfig(name, model.scan, model, &model.scanned_config_source, &model.scanned_config_changed);
    }
    // A config whose text is what the model already has is not being written, however recent its file's change.
    if (model.scanned_config_source == model.config_source) model.scanned_config_changed = 0;
    Rewish(name, model, at_start);
  }

  // Makes the model's wish from its last scan, the version policy and its rollout's pins; starts a rollout when the
  // config's policy asks for one and a new version is wanted.
  void Rewish(const std::string& name, Model& model, bool at_start) {
    const Result<ModelConfig>& config = model.scanned_config;
    auto make = [&] {
      WishInput input{.scan = &model.scan,
                      .config = &config,
                      .config_source = model.scanned_config_source,
                      .config_change_ns = model.scanned_config_changed,
                      .now_ns = RealtimeNanos()};
      if (model.rollout && model.rollout->running()) {
        input.also = {model.rollout->primary(), model.rollout->candidate()};
      }
      if (model.default_pin) input.also.push_back(*model.default_pin);
      if (model.rolled_back && !model.rolled_back->unload) input.also.push_back(model.rolled_back->version);
      if (model.rolled_back && model.rolled_back->unload) {
        input.excluded = std::make_pair(model.rolled_back->version, model.rolled_back->source);
      }
      return WishFromScan(input, {.settle = SettleTime(at_start), .require_checksums = options.require_checksums});
    };
    if (!model.scan.exists && model.rollout && model.rollout->running()) {
      model.rollout->RollBack("model_removed", "the model was removed or unloaded", SteadyClock::now());
    }
    Wish next = make();
    if (!next.wish.settling && config.ok()) {
      Result<std::optional<RolloutSpec>> policy = ParseRolloutPolicy(*config);
      model.policy = policy.ok() ? *policy : std::nullopt;
      if (DropStalePin(name, model)) next = make();
      if (!at_start && MaybeStartAutomaticRollout(name, model, next.wish)) next = make();
    }
    if (!next.wish.settling) model.config_source = model.scanned_config_source;
    if (config.ok() && !next.wish.settling) model.config = std::make_shared<const ModelConfig>(*config);
    // Logged and counted once per problem, not once per rescan.
    if (!next.wish.problem.ok() && next.wish.problem.message() != model.wish.wish.problem.message()) {
      WEFT_LOG(Warning) << "model '" << name << "': " << next.wish.problem.message();
      if (!config.ok()) metrics.For(name).config_failures->Increment();
    }
    model.wish = std::move(next);
  }

  // ---- Rollouts ----

  // The version that answers requests naming none now: the pin (or the rollout's primary) when it serves, else the
  // highest serving one; nullopt when nothing serves.
  static std::optional<int64_t> ServingDefault(const Model& model) {
    std::optional<int64_t> highest;
    std::optional<int64_t> wanted =
        model.rollout && model.rollout->running() ? model.rollout->primary() : model.default_pin;
    for (const Copy& c : model.copies) {
      if (c.copy.phase != Phase::kServing) continue;
      if (wanted && c.copy.version == *wanted) return wanted;
      highest = std::max(highest.value_or(c.copy.version), c.copy.version);
    }
    return highest;
  }

  static int64_t NewestPresent(const Model& model) {
    return model.scan.versions.empty() ? 0 : model.scan.versions.back().version;
  }

  // Drops a pin whose version is gone from the directory or, for a model without a rollout policy, once a version
  // newer than any the directory held when it was set appears (it takes over, as it would without the pin).
  bool DropStalePin(const std::string& name, Model& model) {
    if (!model.default_pin || (model.rollout && model.rollout->running())) return false;
    const bool present = std::any_of(model.scan.versions.begin(), model.scan.versions.end(),
                                     [&](const VersionDirScan& v) { return v.version == *model.default_pin; });
    const bool newer = !model.policy && NewestPresent(model) > model.pin_horizon;
    if (present && !newer) return false;
    WEFT_LOG(Info) << "model '" << name << "': version " << *model.default_pin << " no longer answers by default ("
                   << (present ? "a newer version appeared" : "its directory is gone") << ")";
    model.default_pin.reset();
    return true;
  }

  // With a rollout policy and nothing rolling out: the newest wanted version above the one that serves by default,
  // not serving yet and not rolled back from these files, becomes the candidate of a new rollout.
  bool MaybeStartAutomaticRollout(const std::string& name, Model& model, const ModelWish& wish) {
    if (!model.policy || (model.rollout && model.rollout->running())) return false;
    const std::optional<int64_t> primary = ServingDefault(model);
    if (!primary) return false;  // nothing serves yet: the first version simply loads
    for (auto it = wish.versions.rbegin(); it != wish.versions.rend() && it->version > *primary; ++it) {
      if (it->readiness == WantedVersion::Readiness::kRefused) continue;
      if (model.rolled_back && model.rolled_back->version == it->version && model.rolled_back->source == it->source) {
        continue;
      }
      const bool serving = std::any_of(model.copies.begin(), model.copies.end(), [&](const Copy& c) {
        return c.copy.version == it->version && c.copy.phase == Phase::kServing;
      });
      if (serving) continue;
      RolloutSpec spec = *model.policy;
      spec.candidate = it->version;
      model.rollout = std::make_unique<ModelRollout>(name, std::move(spec), *primary, /*automatic=*/true, registry,
                                                     SteadyClock::now());
      return true;
    }
    return false;
  }

  // A running rollout whose candidate failed to load ends; one whose versions both serve begins.
  void CheckRollout(const std::string& name, Model& model) {
    if (!model.rollout || !model.rollout->running() || model.rollout->started()) return;
    const int64_t candidate = model.rollout->candidate();
    const Copy* failed = nullptr;
    bool pending = false;
    for (const Copy& c : model.copies) {
      if (c.copy.version != candidate) continue;
      if (c.copy.phase == Phase::kFailed) {
        failed = &c;
      } else if (c.copy.phase != Phase::kDraining) {
        pending = true;
      }
    }
    const bool wanted = std::any_of(model.wish.wish.versions.begin(), model.wish.wish.versions.end(),
                                    [&](const WantedVersion& w) { return w.version == candidate; });
    if (pending || (wanted && !failed) || model.wish.wish.settling) return;
    model.rollout->RollBack("candidate_failed",
                            "version " + std::to_string(candidate) + " did not load: " +
                                (failed ? failed->copy.reason.message()
                                        : (model.wish.wish.problem.ok() ? std::string("it is not wanted")
                                                                        : model.wish.wish.problem.message())),
                            SteadyClock::now());
    FinishRollout(name, model);
  }

  // A rollout has ended: the candidate answers by default from now on (promoted), or the primary keeps doing so and
  // the candidate stays loaded and unused, or is unloaded (rolled back).
  void FinishRollout(const std::string& name, Model& model) {
    const ModelRollout& rollout = *model.rollout;
    model.pin_horizon = NewestPresent(model);
    if (rollout.outcome() == ModelRollout::Outcome::kPromoted) {
      model.default_pin = rollout.candidate();
      model.rolled_back.reset();
    } else {
      model.default_pin = rollout.primary();
      uint64_t source = 0;
      for (const Copy& c : model.copies) {
        if (c.copy.version == rollout.candidate()) source = c.copy.source;
      }
      for (const WantedVersion& w : model.wish.wish.versions) {
        if (w.version == rollout.candidate()) source = w.source;
      }
      model.rolled_back = Model::Rejected{rollout.candidate(), source, rollout.spec().unload_on_rollback};
    }
    Rewish(name, model, /*at_start=*/false);
    Advance(name);
  }

  void TickRollouts() {
    const SteadyClock::time_point now = SteadyClock::now();
    if (now < next_rollout_tick) return;
    next_rollout_tick = now + ModelRollout::kTickInterval;
    std::vector<std::string> names;
    for (const auto& [name, model] : models) {
      if (model.rollout && model.rollout->running() && model.rollout->started()) names.push_back(name);
    }
    for (const std::string& name : names) {
      Model& model = models[name];
      if (!model.rollout->Tick(now)) continue;
      if (model.rollout->running()) {
        Publish(name, model);  // the next stage's route
      } else {
        FinishRollout(name, model);
      }
    }
  }

  bool RolloutsTicking() const {
    return std::any_of(models.begin(), models.end(), [](const auto& entry) {
      return entry.second.rollout && entry.second.rollout->running() && entry.second.rollout->started();
    });
  }

  void OnApiRollout(ApiRollout& call) {
    auto it = models.find(call.model);
    const SteadyClock::time_point now = SteadyClock::now();
    if (it == models.end()) return call.done(NotFound("unknown model '" + call.model + "'"));
    Model& model = it->second;
    switch (call.kind) {
      case ApiRollout::Kind::kGet:
        if (!model.rollout) return call.done(NotFound("model '" + call.model + "' has had no rollout"));
        return call.done(model.rollout->Report(now));
      case ApiRollout::Kind::kAbort:
        if (!model.rollout || !model.rollout->running()) {
          return call.done(NotFound("no rollout of model '" + call.model + "' is under way"));
        }
        model.rollout->RollBack("abort", "aborted by the API (DELETE)", now);
        // Answered once the primary's route is published: a client that hears back sends no more to the candidate.
        FinishRollout(call.model, model);
        if (auto again = models.find(call.model); again != models.end() && again->second.rollout) {
          return call.done(again->second.rollout->Report(SteadyClock::now()));
        }
        return call.done(Unavailable("model '" + call.model + "' is gone"));
      case ApiRollout::Kind::kStart: break;
    }
    if (shutting_down) return call.done(Unavailable("the server is shutting down"));
    if (model.rollout && model.rollout->running()) {
      return call.done(Aborted("a rollout of version " + std::to_string(model.rollout->candidate()) + " of model '" +
                               call.model + "' is under way: wait for it or DELETE it first"));
    }
    const std::optional<int64_t> primary = ServingDefault(model);
    if (!primary)
      return call.done(Unavailable("model '" + call.model + "' does not serve: nothing to roll out against"));
    const int64_t candidate = call.spec.candidate;
    if (candidate == *primary) {
      return call.done(InvalidArgument("version " + std::to_string(candidate) + " of model '" + call.model +
                                       "' already answers requests that name no version"));
    }
    const bool present =
        model.scan.exists && std::any_of(model.scan.versions.begin(), model.scan.versions.end(),
                                         [&](const VersionDirScan& v) { return v.version == candidate; });
    if (!present) {
      return call.done(NotFound("model '" + call.model + "' has no version directory " + std::to_string(candidate)));
    }
    if (model.rolled_back && model.rolled_back->version == candidate) model.rolled_back.reset();  // asked again
    // Asked again: a failed copy of the candidate gets another try.
    std::erase_if(model.copies,
                  [&](const Copy& c) { return c.copy.version == candidate && c.copy.phase == Phase::kFailed; });
    model.rollout =
        std::make_unique<ModelRollout>(call.model, std::move(call.spec), *primary, /*automatic=*/false, registry, now);
    Rewish(call.model, model, /*at_start=*/false);
    Advance(call.model);
    auto again = models.find(call.model);
    if (again == models.end() || !again->second.rollout)
      return call.done(Unavailable("model '" + call.model + "' is gone"));
    call.done(again->second.rollout->Report(SteadyClock::now()));
  }

  // ---- Steps ----

  std::vector<VersionCopy> View(const Model& model) const {
    std::vector<VersionCopy> view;
    view.reserve(model.copies.size());
    for (const Copy& c : model.copies) view.push_back(c.copy);
    return view;
  }

  // Applies the plan until it asks for nothing more, publishes the model's route and answers waiters once settled.
  void Advance(const std::string& name) {
    auto it = models.find(name);
    if (it == models.end()) return;
    Model& model = it->second;
    for (int round = 0; round < 4; ++round) {
      std::vector<VersionCopy> view = View(model);
      ModelSteps steps = PlanModel(model.wish.wish, view);
      const bool acted = !steps.load.empty() || !steps.refuse.empty() || steps.swap || !steps.retire.empty();
      Apply(name, model, steps);
      if (!acted) break;
    }
    Publish(name, model);
    CheckRollout(name, model);
    it = models.find(name);
    if (it == models.end()) return;
    std::vector<VersionCopy> view = View(model);
    ModelSteps steps = PlanModel(model.wish.wish, view);
    if (steps.settled) {
      if (!model.waiters.empty()) {
        Status outcome = WishOutcome(model.wish.wish, view);
        for (Done& done : model.waiters) done(outcome);
        model.waiters.clear();
      }
      if (initial_models.erase(name) > 0) MaybeFinishInitial();
    }
    if (!model.wish.wish.serve && model.copies.empty() && model.waiters.empty()) {
      engine->RemoveModel(name);
      RemoveStateSeries(name, model, {});
      models.erase(it);
    }
  }

  void Apply(const std::string& name, Model& model, const ModelSteps& steps) {
    if (steps.swap) {
      std::vector<int64_t> before, after;
      for (const Copy& c : model.copies) {
        if (c.copy.phase == Phase::kServing) before.push_back(c.copy.version);
      }
      for (size_t i : steps.serve) {
        model.copies[i].copy.phase = Phase::kServing;
        after.push_back(model.copies[i].copy.version);
      }
      for (size_t i : steps.retire) {
        if (model.copies[i].copy.phase == Phase::kServing) model.copies[i].copy.phase = Phase::kDraining;
      }
      // The new route first: from here on requests go to the new copies; the retired ones finish what they took.
      Publish(name, model);
      metrics.For(name).swaps->Increment();
      WEFT_LOG(Info) << "model '" << name << "': serving versions " << JoinVersions(after)
                     << " (before: " << JoinVersions(before) << ")";
    }
    // From the highest index down, so that erasing keeps the lower indices valid.
    std::vector<size_t> retire = steps.retire;
    std::sort(retire.rbegin(), retire.rend());
    for (size_t i : retire) {
      Copy& c = model.copies[i];
      switch (c.copy.phase) {
        case Phase::kDraining:
          WEFT_LOG(Info) << "model '" << name << "' version " << c.copy.version
                         << ": out of service; unloading once its requests are answered";
          c.handle.reset();  // the engine tears it down after the last request it took
          break;
        case Phase::kReady:
          WEFT_LOG(Info) << "model '" << name << "' version " << c.copy.version
                         << ": loaded but no longer wanted; unloading";
          c.copy.phase = Phase::kDraining;
          c.handle.reset();
          break;
        case Phase::kFailed: model.copies.erase(model.copies.begin() + static_cast<std::ptrdiff_t>(i)); break;
        case Phase::kServing:
        case Phase::kLoading: break;  // not retired by the plan
      }
    }
    for (const WantedVersion& w : steps.refuse) {
      WEFT_LOG(Warning) << "model '" << name << "' version " << w.version << ": not loaded: " << w.why.message();
      metrics.For(name).FailureCounter("refused")->Increment();
      model.copies.push_back({next_copy_id++, {w.version, w.source, Phase::kFailed, w.why}, nullptr});
    }
    for (const WantedVersion& w : steps.load) {
      const uint64_t id = next_copy_id++;
      model.copies.push_back({id, {w.version, w.source, Phase::kLoading, Status::Ok()}, nullptr});
      WEFT_LOG(Info) << "model '" << name << "' version " << w.version << ": loading";
      loader->Enqueue({.model = name,
                       .version = w.version,
                       .copy_id = id,
                       .config = model.config,
                       .model_dir = options.root / name});
    }
  }

  void Publish(const std::string& name, Model& model) {
    std::vector<VersionCopy> view = View(model);
    auto route = std::make_shared<ModelRoute>();
    route->config = model.config;
    for (const Copy& c : model.copies) {
      if (c.copy.phase == Phase::kServing) route->serving[c.copy.version] = c.handle;
    }
    route->versions = ReportVersions(model.wish.wish, view);
    route->unavailable = UnavailableReason(model.wish.wish, view);
    route->failed = ModelFailed(model.wish.wish, view);
    if (model.rollout && model.rollout->running()) {
      route->default_version = model.rollout->primary();
      if (route->serving.contains(model.rollout->primary()) && route->serving.contains(model.rollout->candidate())) {
        model.rollout->Begin(SteadyClock::now());
      }
      route->rollout = model.rollout->Route();
    } else if (model.default_pin) {
      route->default_version = *model.default_pin;
    }
    if (!route->serving.empty()) {
      route->state = VersionState::kReady;
    } else if (!model.wish.wish.serve) {
      route->state = VersionState::kUnloading;
    } else {
      route->state = route->failed ? VersionState::kUnavailable : VersionState::kLoading;
    }
    UpdateStateSeries(name, model, route->versions);
    engine->PublishModel(name, std::move(route));
  }

  // ---- Metrics: one series per (model, version, state), 1 for the version's state ----

  void UpdateStateSeries(const std::string& name, Model& model, const std::vector<VersionReport>& reports) {
    std::vector<int64_t> now;
    for (const VersionReport& r : reports) {
      now.push_back(r.version);
      for (VersionState s :
           {VersionState::kLoading, VersionState::kReady, VersionState::kUnloading, VersionState::kUnavailable}) {
        metrics.StateGauge(name, r.version, s)->Set(r.state == s ? 1 : 0);
      }
    }
    RemoveStateSeries(name, model, now);
    model.reported_versions = std::move(now);
  }

  void RemoveStateSeries(const std::string& name, Model& model, const std::vector<int64_t>& keep) {
    for (int64_t v : model.reported_versions) {
      if (std::find(keep.begin(), keep.end(), v) == keep.end()) metrics.RemoveStateSeries(name, v);
    }
  }

  // ---- Events ----

  void OnLoaded(LoadOutcome outcome) {
    auto it = models.find(outcome.model);
    if (it == models.end()) return;  // a copy outlives its model only while loading: the model's record stays
    Model& model = it->second;
    auto copy =
        std::find_if(model.copies.begin(), model.copies.end(), [&](const Copy& c) { return c.id == outcome.copy_id; });
    if (copy == model.copies.end()) return;
    ModelLifecycleMetrics& m = metrics.For(outcome.model);
    const std::string what = "model '" + outcome.model + "' version " + std::to_string(outcome.version);
    Result<VersionHandle> handle = Unavailable("not loaded");
    if (!outcome.loaded.ok()) {
      handle = outcome.loaded.status();
    } else {
      // Here, on the controller's thread: the version's scheduler threads must not inherit the loaders' priority.
      handle = engine->StartVersion(*outcome.loaded, [inbox = inbox, model = outcome.model, id = outcome.copy_id] {
        inbox->Post(Unloaded{model, id});
      });
      if (!handle.ok()) {
        outcome.failed_stage = "start";
        handle = handle.status().WithContext(what);
      }
    }
    if (handle.ok()) {
      copy->copy.phase = Phase::kReady;
      copy->handle = *std::move(handle);
      m.loads->Increment();
      m.load_seconds->Observe(outcome.checksum_seconds + outcome.load_seconds);
      m.warmup_seconds->Observe(outcome.warmup_seconds);
      WEFT_LOG(Info) << what << ": loaded in " << Millis(outcome.checksum_seconds + outcome.load_seconds)
                     << (outcome.verified ? " (SHA256SUMS verified in " + Millis(outcome.checksum_seconds) + ")" : "")
                     << ", warmed up in " << Millis(outcome.warmup_seconds);
    } else {
      copy->copy.phase = Phase::kFailed;
      copy->copy.reason = handle.status();
      m.FailureCounter(outcome.failed_stage)->Increment();
      WEFT_LOG(Warning) << what << ": failed to load (" << outcome.failed_stage << "): " << handle.status().message();
    }
    Advance(outcome.model);
  }

  void OnUnloaded(const Unloaded& event) {
    auto it = models.find(event.model);
    if (it == models.end()) return;
    Model& model = it->second;
    auto copy =
        std::find_if(model.copies.begin(), model.copies.end(), [&](const Copy& c) { return c.id == event.copy_id; });
    if (copy == model.copies.end()) return;
    WEFT_LOG(Info) << "model '" << event.model << "' version " << copy->copy.version << ": unloaded";
    metrics.For(event.model).unloads->Increment();
    model.copies.erase(copy);
    Advance(event.model);
  }

  void OnApiLoad(ApiLoad& load) {
    if (shutting_down) return load.done(Unavailable("the server is shutting down"));
    std::error_code ec;
    if (!fs::is_directory(options.root / load.model, ec)) {
      return load.done(NotFound("model '" + load.model + "' is not in the model repository"));
    }
    Model& model = models[load.model];
    // A load parses its config again (Triton's rule): the override when given, config.pbtxt otherwise.
    if (load.config_json) {
      model.override_json = std::move(load.config_json);
    } else {
      model.override_json.reset();
    }
    // Asked again: a version that failed gets another try.
    std::erase_if(model.copies, [](const Copy& c) { return c.copy.phase == Phase::kFailed; });
    Refresh(load.model, /*serve=*/true, /*at_start=*/false);
    model.waiters.push_back(std::move(load.done));
    Advance(load.model);
  }

  void OnApiUnload(ApiUnload& unload) {
    auto it = models.find(unload.model);
    std::error_code ec;
    if (it == models.end()) {
      if (!fs::is_directory(options.root / unload.model, ec)) {
        return unload.done(NotFound("model '" + unload.model + "' is neither loaded nor in the model repository"));
      }
      return unload.done(Status::Ok());  // in the repository, not loaded: nothing to do
    }
    WEFT_LOG(Info) << "model '" << unload.model << "': unload requested";
    if (it->second.rollout && it->second.rollout->running()) {
      it->second.rollout->RollBack("model_removed", "the model was unloaded", SteadyClock::now());
    }
    for (Done& done : it->second.waiters)
      done(Unavailable("model '" + unload.model + "' was unloaded while it loaded"));
    it->second.waiters.clear();
    it->second.wish = Wish{};
    it->second.wish.wish.serve = false;
    Advance(unload.model);
    unload.done(Status::Ok());
  }

  void OnInitialLoad(InitialLoad& initial_load) {
    initial = std::move(initial_load.done);
    // Watched before the first scan: a change made while models load is then seen (and rescanned) afterwards.
    StartWatching();
    std::vector<std::string> names;
    if (options.mode == ModelControlMode::kExplicit) {
      for (const std::string& m : options.startup_models) {
        if (m == "*") continue;
        if (Status s = CheckModelName(m); !s.ok()) return FinishInitial(s.WithContext("--load-model"));
        std::error_code ec;
        if (!fs::is_directory(options.root / m, ec)) {
          return FinishInitial(NotFound("--load-model " + m + ": no such model in the model repository"));
        }
        names.push_back(m);
      }
    }
    const bool all =
        options.mode != ModelControlMode::kExplicit ||
        std::find(options.startup_models.begin(), options.startup_models.end(), "*") != options.startup_models.end();
    if (all) {
      Result<std::vector<std::string>> listed = ListModelDirs(options.root);
      if (!listed.ok()) return FinishInitial(WithoutRoot(listed.status(), ""));
      names.insert(names.end(), listed->begin(), listed->end());
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    initial_models.insert(names.begin(), names.end());
    for (const std::string& name : names) Refresh(name, /*serve=*/true, /*at_start=*/true);
    for (const std::string& name : names) Advance(name);
    MaybeFinishInitial();
  }

  void MaybeFinishInitial() {
    if (initial && initial_models.empty()) FinishInitial(Status::Ok());
  }
  void FinishInitial(Status status) {
    if (!initial) return;
    initial->set_value(std::move(status));
    initial.reset();
    initial_models.clear();
  }

  // ---- Watching and polling ----

  void StartWatching() {
    if (options.mode == ModelControlMode::kPoll) {
      polling = true;
    } else if (options.mode == ModelControlMode::kWatch) {
      Result<std::unique_ptr<RepositoryWatcher>> w = RepositoryWatcher::Create({.root = options.root});
      Status synced = w.ok() ? (*w)->Sync() : w.status();
      if (synced.ok()) {
        watcher = std::move(w).value();
        WEFT_LOG(Info) << "watching the model repository (" << watcher->watch_count() << " directories)";
      } else {
        polling = true;
        WEFT_LOG(Warning) << "cannot watch the model repository (" << synced.message() << "); polling it every "
                          << options.poll_interval.count() << " ms instead";
      }
    }
    if (polling) next_poll = SteadyClock::now() + options.poll_interval;
  }

  // Every model in the repository or known: rescanned, then advanced.
  void RescanAll() {
    Result<std::vector<std::string>> listed = ListModelDirs(options.root);
    if (!listed.ok()) {
      WEFT_LOG(Warning) << "cannot rescan the model repository: " << listed.status().message();
      return;
    }
    std::set<std::string> names(listed->begin(), listed->end());
    for (const auto& [name, model] : models) names.insert(name);
    for (const std::string& name : names) Rescan(name);
    if (watcher) {
      if (Status s = watcher->Sync(); !s.ok()) {
        WEFT_LOG(Warning) << "cannot watch the whole model repository (" << s.message() << "); polling it every "
                          << options.poll_interval.count() << " ms instead";
        watcher.reset();
        polling = true;
        next_poll = SteadyClock::now() + options.poll_interval;
      }
    }
  }

  void Rescan(const std::string& name) {
    WEFT_LOG(Debug) << "rescanning model '" << name << "'";
    std::error_code ec;
    // A path that cannot be looked at (an error other than "not found") is scanned: ScanModelDir reports the error,
    // and what the model serves stays.
    const fs::file_status status = fs::status(options.root / name, ec);
    const bool exists = fs::is_directory(status) || status.type() == fs::file_type::none;
    if (!exists && !models.contains(name)) return;
    Refresh(name, exists, /*at_start=*/false);
    Advance(name);
  }

  // The poll timeout: the next poll, the next settle check or the next refresh of dirty models; -1 = none.
  int TimeoutMillis() const {
    const SteadyClock::time_point now = SteadyClock::now();
    std::optional<SteadyClock::time_point> next;
    auto consider = [&](SteadyClock::time_point t) { next = next ? std::min(*next, t) : t; };
    if (polling) consider(next_poll);
    if (!dirty.empty()) consider(refresh_at);
    if (RolloutsTicking()) consider(next_rollout_tick);
    const int64_t real_now = RealtimeNanos();
    for (const auto& [name, model] : models) {
      if (model.wish.recheck_at_ns == 0) continue;
      consider(now + std::chrono::nanoseconds(std::max<int64_t>(0, model.wish.recheck_at_ns - real_now)));
    }
    if (!next) return -1;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
    return static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000));
  }

  void RunTimers() {
    const SteadyClock::time_point now = SteadyClock::now();
    if (polling && now >= next_poll) {
      next_poll = now + options.poll_interval;
      RescanAll();
    }
    if (!dirty.empty() && now >= refresh_at) {
      std::set<std::string> names = std::exchange(dirty, {});
      for (const std::string& name : names) Rescan(name);
      if (watcher) (void)watcher->Sync();
    }
    const int64_t real_now = RealtimeNanos();
    std::vector<std::string> due;
    for (const auto& [name, model] : models) {
      if (model.wish.recheck_at_ns != 0 && real_now >= model.wish.recheck_at_ns) due.push_back(name);
    }
    for (const std::string& name : due) Rescan(name);
    TickRollouts();
  }

  // ---- The controller's loop ----

  void Run(std::stop_token stop) {
    bool watching_started = false;
    for (;;) {
      pollfd fds[2] = {{inbox->fd(), POLLIN, 0}, {watcher ? watcher->fd() : -1, POLLIN, 0}};
      const int timeout = watching_started && !shutting_down ? TimeoutMillis() : -1;
      int ready = poll(fds, watcher ? 2 : 1, timeout);
      if (ready < 0 && errno != EINTR) {
        WEFT_LOG(Error) << "the live repository's poll failed: " << std::strerror(errno);
      }
      for (ControlEvent& event : inbox->Take()) {
        if (std::holds_alternative<Shutdown>(event)) {
          shutting_down = true;
          AnswerWaiters(Unavailable("the server is shutting down"));
          continue;
        }
        if (stop.stop_requested()) continue;
        std::visit(
            [&](auto& e) {
              using T = std::decay_t<decltype(e)>;
              if constexpr (std::is_same_v<T, ApiLoad>) OnApiLoad(e);
              if constexpr (std::is_same_v<T, ApiUnload>) OnApiUnload(e);
              if constexpr (std::is_same_v<T, Loaded>) OnLoaded(std::move(e.outcome));
              if constexpr (std::is_same_v<T, Unloaded>) OnUnloaded(e);
              if constexpr (std::is_same_v<T, InitialLoad>) OnInitialLoad(e);
              if constexpr (std::is_same_v<T, ApiRollout>) OnApiRollout(e);
            },
            event);
      }
      if (stop.stop_requested()) return;
      if (!watching_started && !initial) {
        // The initial load is done (or failed): from now on changes to the files are applied.
        watching_started = true;
        if (polling) next_poll = SteadyClock::now() + options.poll_interval;
      }
      if (shutting_down) continue;
      if (watcher && ready > 0 && (fds[1].revents & POLLIN)) {
        RepositoryWatcher::Changes changes = watcher->Read();
        WEFT_LOG(Debug) << "repository changes: " << changes.models.size() << " model(s)"
                        << (changes.everything ? ", everything" : "");
        if (changes.everything) {
          RescanAll();
        } else if (!changes.models.empty()) {
          // A file being written sends a stream of events: rescan at most every 50 ms.
          if (dirty.empty()) refresh_at = SteadyClock::now() + std::chrono::milliseconds(50);
          dirty.insert(changes.models.begin(), changes.models.end());
        }
      }
      if (watching_started) RunTimers();
    }
  }

  void AnswerWaiters(const Status& status) {
    for (auto& [name, model] : models) {
      for (Done& done : model.waiters) done(status);
      model.waiters.clear();
    }
  }
};

LiveRepository::LiveRepository(Engine* engine, MetricsRegistry* metrics, LiveRepositoryOptions options)
    : impl_(std::make_unique<Impl>(engine, metrics, std::move(options))) {}

LiveRepository::~LiveRepository() {
  if (!impl_->controller.joinable()) return;
  impl_->controller.request_stop();
  impl_->inbox->Post(Shutdown{});
  impl_->controller.join();
  // Loads under way finish; their outcomes are dropped with the inbox closed (the loaded versions are freed).
  for (ControlEvent& event : impl_->inbox->Close()) {
    if (auto* load = std::get_if<ApiLoad>(&event)) load->done(Unavailable("the server is shutting down"));
    if (auto* unload = std::get_if<ApiUnload>(&event)) unload->done(Unavailable("the server is shutting down"));
    if (auto* initial = std::get_if<InitialLoad>(&event)) initial->done.set_value(Unavailable("stopped"));
    if (auto* rollout = std::get_if<ApiRollout>(&event)) rollout->done(Unavailable("the server is shutting down"));
  }
  impl_->loader.reset();
  impl_->AnswerWaiters(Unavailable("the server is shutting down"));
  impl_->FinishInitial(Unavailable("stopped"));
}

Status LiveRepository::Start() {
  if (!impl_->inbox->ok()) return Unavailable("cannot create an eventfd for the live repository");
  const LiveRepositoryOptions& o = impl_->options;
  if (o.mode != ModelControlMode::kExplicit && !o.startup_models.empty()) {
    return InvalidArgument("--load-model needs --model-control-mode explicit");
  }
  Result<std::vector<std::string>> listed = ListModelDirs(o.root);
  if (!listed.ok()) return listed.status();
  impl_->loader = std::make_unique<VersionLoader>(
      VersionLoader::Options{.threads = o.load_threads,
                             .require_checksums = o.require_checksums,
                             .repository_root = impl_->root,
                             .backends = o.backends},
      [inbox = impl_->inbox](LoadOutcome outcome) { inbox->Post(Loaded{std::move(outcome)}); });
  InitialLoad initial;
  std::future<Status> done = initial.done.get_future();
  impl_->controller = std::jthread([impl = impl_.get()](std::stop_token stop) {
    SetCurrentThreadName("repository");
    impl->Run(stop);
  });
  impl_->inbox->Post(std::move(initial));
  WEFT_LOG(Info) << "model control mode " << ModelControlModeName(o.mode) << ": loading "
                 << (o.mode == ModelControlMode::kExplicit
                         ? (o.startup_models.empty() ? std::string("no model until the API asks")
                                                     : std::to_string(o.startup_models.size()) + " model(s)")
                         : "every model")
                 << " from " << impl_->root;
  return done.get();
}

void LiveRepository::BeginShutdown() { impl_->inbox->Post(Shutdown{}); }

ModelControlMode LiveRepository::mode() const { return impl_->options.mode; }

namespace {

// Whether the API may `what` (load or unload) `model` in `mode`: explicit mode only, as in Triton, and a name that
// names a directory of the repository.
Status CheckApiCall(ModelControlMode mode, const std::string& what, const std::string& model) {
  if (mode != ModelControlMode::kExplicit) {
    return Unavailable(what + " a model on request needs --model-control-mode explicit (this server runs in mode " +
                       std::string(ModelControlModeName(mode)) + ")");
  }
  return CheckModelName(model);
}

}  // namespace

void LiveRepository::Load(const std::string& model, std::optional<std::string> config_json, Done done) {
  if (Status s = CheckApiCall(impl_->options.mode, "loading", model); !s.ok()) return done(s);
  impl_->inbox->Post(ApiLoad{model, std::move(config_json), std::move(done)});
}

void LiveRepository::Unload(const std::string& model, Done done) {
  if (Status s = CheckApiCall(impl_->options.mode, "unloading", model); !s.ok()) return done(s);
  impl_->inbox->Post(ApiUnload{model, std::move(done)});
}

void LiveRepository::StartRollout(const std::string& model, RolloutSpec spec, RolloutDone done) {
  if (Status s = ValidateRolloutSpec(spec); !s.ok()) return done(s);
  impl_->inbox->Post(ApiRollout{ApiRollout::Kind::kStart, model, std::move(spec), std::move(done)});
}

void LiveRepository::GetRollout(const std::string& model, RolloutDone done) {
  impl_->inbox->Post(ApiRollout{ApiRollout::Kind::kGet, model, {}, std::move(done)});
}

void LiveRepository::AbortRollout(const std::string& model, RolloutDone done) {
  impl_->inbox->Post(ApiRollout{ApiRollout::Kind::kAbort, model, {}, std::move(done)});
}

std::vector<LiveRepository::IndexEntry> LiveRepository::Index(bool ready_only) const {
  std::shared_ptr<const RoutingTable> table = impl_->engine->Table();
  std::set<std::string> names;
  for (const auto& [name, route] : table->models) names.insert(name);
  if (Result<std::vector<std::string>> listed = ListModelDirs(impl_->options.root); listed.ok()) {
    names.insert(listed->begin(), listed->end());
  }
  std::vector<IndexEntry> out;
  for (const std::string& name : names) {
    auto it = table->models.find(name);
    if (it == table->models.end()) {
      if (!ready_only) out.push_back({name, 0, "UNAVAILABLE", "not loaded"});
      continue;
    }
    const ModelRoute& route = *it->second;
    if (route.versions.empty()) {
      if (ready_only && route.state != VersionState::kReady) continue;
      out.push_back({name, 0, std::string(VersionStateName(route.state)), route.unavailable.message()});
      continue;
    }
    for (const VersionReport& report : route.versions) {
      if (ready_only && report.state != VersionState::kReady) continue;
      out.push_back({name, report.version, std::string(VersionStateName(report.state)), report.reason});
    }
  }
  return out;
}

}  // namespace weft
