#include "repository/pbtxt/config_pbtxt.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "base/json_string.h"
#include "base/log.h"
#include "base/small_file.h"
#include "model_config.pb.h"
#include "repository/pbtxt/config_json.h"

namespace weft {
namespace {

namespace pb = google::protobuf;

// A config's warnings (one per unknown field) kept and logged, at most: a 16 MiB config of `a {}` has millions.
constexpr size_t kMaxConfigWarnings = 20;

std::string MoreUnknownFields(const std::string& source, size_t more) {
  return source + ": " + std::to_string(more) + " more unknown fields.";
}

// Keeps the parser's messages with 1-based positions; protobuf counts lines and columns from 0.
class PositionedMessages : public pb::io::ErrorCollector {
 public:
  explicit PositionedMessages(const std::string& source) : source_(source) {}

  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (first_error_.empty()) first_error_ = Format(line, column, message);
  }
  void AddWarning(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (warnings_.size() < kMaxConfigWarnings) {
      warnings_.push_back(Format(line, column, message));
    } else {
      ++more_warnings_;
    }
  }

  const std::string& first_error() const { return first_error_; }
  // The first kMaxConfigWarnings, then one line that counts the rest.
  std::vector<std::string> TakeWarnings() {
    if (more_warnings_ > 0) warnings_.push_back(MoreUnknownFields(source_, more_warnings_));
    return std::move(warnings_);
  }

 private:
  std::string Format(int line, int column, const std::string& message) const {
    return source_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  const std::string& source_;
  std::string first_error_;
  std::vector<std::string> warnings_;
  size_t more_warnings_ = 0;
};

struct ParsedProto {
  inference::ModelConfig proto;
  std::vector<std::string> warnings;  // one per skipped unknown field
};

// How deeply a config may nest messages and lists. The schema needs 9 levels (optimization.cuda.graph_spec[]
// .graph_lower_bound.input{}.dim[]); newer Triton fields add a few. The bound is there because protobuf's parsers
// recurse once per level: the text parser skips an unknown field's value by recursion, with no limit on `[` (a
// 300 KB config of `x: [[[...` overflowed the stack and took the server down), and the JSON to
// google.protobuf.Value conversion (below) takes time quadratic in the depth (4,000 levels: 0.3 s; the 8 million
// of a 16 MiB config: hours).
constexpr int kMaxConfigDepth = 32;

enum class ConfigSyntax { kJson, kText };

// Whether `text` nests messages and lists deeper than kMaxConfigDepth. Brackets inside strings do not count
// (protobuf takes strings in single quotes too, in both forms), nor in the text form's `#` comments, where `<` and
// `>` delimit messages as `{` and `}` do. What is not a config is left to the parser to refuse.
bool NestsTooDeeply(std::string_view text, ConfigSyntax syntax) {
  const bool text_format = syntax == ConfigSyntax::kText;
  int depth = 0;
  char quote = 0;  // the quote of the string being skipped, or 0
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == '\\') {
        ++i;  // an escaped character, whatever it is
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (text_format && c == '#') {
      const size_t end = text.find('\n', i);
      if (end == std::string_view::npos) break;
      i = end;
    } else if (c == '{' || c == '[' || (text_format && c == '<')) {
      if (++depth > kMaxConfigDepth) return true;
    } else if (c == '}' || c == ']' || (text_format && c == '>')) {
      --depth;
    }
  }
  return false;
}

Status RefuseDeepNesting(const std::string& source, ConfigSyntax syntax) {
  return InvalidArgument(source + (syntax == ConfigSyntax::kJson ? ": objects and arrays" : ": messages and lists") +
                         " nest deeper than " + std::to_string(kMaxConfigDepth) + " levels");
}

Result<ParsedProto> ParseProto(std::string_view text, const std::string& source) {
  if (text.size() > INT_MAX) return InvalidArgument(source + ": too large for a config file");
  if (NestsTooDeeply(text, ConfigSyntax::kText)) return RefuseDeepNesting(source, ConfigSyntax::kText);
  ParsedProto parsed;
  PositionedMessages messages(source);
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&messages);
  // Newer Triton versions add fields; a repository written for them should still load here.
  parser.AllowUnknownField(true);
  pb::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  if (!parser.Parse(&input, &parsed.proto)) {
    return InvalidArgument(messages.first_error().empty() ? source + ": cannot be parsed" : messages.first_error());
  }
  parsed.warnings = messages.TakeWarnings();
  return parsed;
}

// `text` cut to `max` bytes, marked when cut: a value from the input echoed in a message or a log line.
std::string Bounded(std::string_view text, size_t max) {
  return text.size() <= max ? std::string(text) : std::string(text.substr(0, max)) + "...";
}

// What a JSON config says beyond the schema: fields it lacks, and enum names it lacks. protobuf's JSON parser drops
// both silently when told to ignore unknown fields; the text form warns about the first and fails on the second,
// and so does the JSON form.
struct JsonFindings {
  std::vector<std::string> unknown_fields;  // paths, "input[0].future_flag": the first kMaxConfigWarnings
  size_t more_unknown_fields = 0;
  std::string bad_enum;  // the first unknown enum name, with its path; empty when none
};

std::string JoinPath(const std::string& path, std::string_view name) {
  return path.empty() ? std::string(name) : path + "." + std::string(name);
}

template <typename Map>
std::vector<std::string> SortedKeys(const Map& map) {
  std::vector<std::string> keys;
  keys.reserve(map.size());
  for (const auto& [key, value] : map) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

void WalkJsonObject(const pb::Descriptor* type, const pb::Struct& object, const std::string& path, JsonFindings* out);

// One value of `field` (an element, for a repeated field). Recursion follows the schema, which has no cycles, so
// its depth is bounded whatever the nesting of the JSON.
void WalkJsonValue(const pb::FieldDescriptor* field, const pb::Value& value, const std::string& path,
                   JsonFindings* out) {
  if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && value.has_struct_value()) {
    WalkJsonObject(field->message_type(), value.struct_value(), path, out);
  } else if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_ENUM && value.has_string_value() &&
             field->enum_type()->FindValueByName(value.string_value()) == nullptr && out->bad_enum.empty()) {
    out->bad_enum = path + ": unknown value \"" + Bounded(value.string_value(), 64) + "\"";
  }
}

void WalkJsonObject(const pb::Descriptor* type, const pb::Struct& object, const std::string& path, JsonFindings* out) {
  for (const std::string& key : SortedKeys(object.fields())) {
    // protobuf's JSON parser takes the proto name and the lowerCamelCase JSON name.
    const pb::FieldDescriptor* field = type->FindFieldByName(key);
    if (field == nullptr) field = type->FindFieldByCamelcaseName(key);
    if (field == nullptr) {
      if (out->unknown_fields.size() < kMaxConfigWarnings) {
        out->unknown_fields.push_back(JoinPath(path, Bounded(key, 64)));
      } else {
        ++out->more_unknown_fields;
      }
      continue;
    }
    const pb::Value& value = object.fields().at(key);
    const std::string where = JoinPath(path, field->name());
    if (field->is_map() && value.has_struct_value()) {
      const pb::FieldDescriptor* value_field = field->message_type()->map_value();
      const auto& entries = value.struct_value().fields();
      for (const std::string& entry : SortedKeys(entries)) {
        WalkJsonValue(value_field, entries.at(entry), where + "[" + Bounded(entry, 64) + "]", out);
      }
    } else if (field->is_repeated() && value.has_list_value()) {
      const pb::ListValue& list = value.list_value();
      for (int i = 0; i < list.values_size(); ++i) {
        WalkJsonValue(field, list.values(i), where + "[" + std::to_string(i) + "]", out);
      }
    } else {
      WalkJsonValue(field, value, where, out);
    }
  }
}

// protobuf's JSON errors end with the input's line and a caret under the position: keep the first line only, so
// that a config on one long line is not echoed back.
std::string JsonError(const pb::util::Status& status) {
  std::string_view message(status.message().data(), status.message().size());
  message = message.substr(0, message.find('\n'));
  if (message.starts_with(": ")) message.remove_prefix(2);  // an error at the root has an empty path
  return message.empty() ? "cannot be parsed" : Bounded(message, 512);
}

Result<ParsedProto> ParseJsonProto(std::string_view json, const std::string& source) {
  if (NestsTooDeeply(json, ConfigSyntax::kJson)) return RefuseDeepNesting(source, ConfigSyntax::kJson);
  const pb::StringPiece input(json.data(), json.size());
  ParsedProto parsed;
  // Strict first: a config without unknown fields or enum names (almost every one) is parsed once.
  if (pb::util::JsonStringToMessage(input, &parsed.proto).ok()) return parsed;
  parsed.proto.Clear();
  pb::util::JsonParseOptions options;
  // Newer Triton versions add fields, and their config endpoint renders them.
  options.ignore_unknown_fields = true;
  pb::util::Status status = pb::util::JsonStringToMessage(input, &parsed.proto, options);
  if (!status.ok()) return InvalidArgument(source + ": " + JsonError(status));
  // The same text as a plain JSON tree, to find what the parser ignored. This costs the most (a Value per JSON
  // value: 4.5 s for 16 MiB of small objects, 19 s for 16 MiB of arrays nested 30 deep, against 1.3 s for the
  // typed parse), so only a config that has something unknown pays it.
  pb::Value tree;
  status = pb::util::JsonStringToMessage(input, &tree);
  if (!status.ok()) return InvalidArgument(source + ": " + JsonError(status));
  JsonFindings findings;
  if (tree.has_struct_value()) WalkJsonObject(parsed.proto.GetDescriptor(), tree.struct_value(), "", &findings);
  if (!findings.bad_enum.empty()) return InvalidArgument(source + ": " + findings.bad_enum);
  for (const std::string& field : findings.unknown_fields) {
    parsed.warnings.push_back(source + ": no field named " + field + " in the schema.");
  }
  if (findings.more_unknown_fields > 0) {
    parsed.warnings.push_back(MoreUnknownFields(source, findings.more_unknown_fields));
  }
  return parsed;
}

// The path of the first string in `message` (a field, an element or a map key) that is not UTF-8, or nullopt.
// proto3 strings are UTF-8 by definition, but the text parser keeps any bytes an escape spells: the config
// endpoint would render them as U+FFFD, and two such map keys would collide into one.
std::optional<std::string> FirstNonUtf8String(const pb::Message& message, const std::string& path) {
  const pb::Reflection* reflection = message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    const std::string where = JoinPath(path, field->name());
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING && field->type() == pb::FieldDescriptor::TYPE_STRING) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
          if (!IsValidUtf8(reflection->GetRepeatedString(message, field, i))) {
            return where + "[" + std::to_string(i) + "]";
          }
        }
      } else if (!IsValidUtf8(reflection->GetString(message, field))) {
        return where;
      }
    } else if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
          std::optional<std::string> found = FirstNonUtf8String(reflection->GetRepeatedMessage(message, field, i),
                                                                where + "[" + std::to_string(i) + "]");
          if (found) return found;
        }
      } else {
        std::optional<std::string> found = FirstNonUtf8String(reflection->GetMessage(message, field), where);
        if (found) return found;
      }
    }
  }
  return std::nullopt;
}

// Fills the defaults that Triton also reports as set, so that the JSON shows the config that is served.
void Normalize(inference::ModelConfig* proto) {
  if (proto->version_policy().policy_choice_case() == inference::ModelVersionPolicy::POLICY_CHOICE_NOT_SET) {
    proto->mutable_version_policy()->mutable_latest()->set_num_versions(1);
  }
  for (auto& group : *proto->mutable_instance_group()) {
    if (group.count() == 0) group.set_count(1);  // proto3 cannot tell "unset" from 0; Triton reads both as 1
  }
}

// `field` ends in ": " or is empty.
Result<DataType> ConvertDataType(inference::DataType type, const std::string& field) {
  if (type == inference::TYPE_INVALID) return DataType::kInvalid;  // reported by ValidateModelConfig
  auto converted = DataTypeFromConfigName(inference::DataType_Name(type));
  if (!converted) return InvalidArgument(field + "data_type: unknown value " + std::to_string(static_cast<int>(type)));
  return *converted;
}

template <typename ProtoTensor>
Result<TensorConfig> ConvertTensor(const ProtoTensor& p, const std::string& field) {
  TensorConfig t;
  t.name = p.name();
  WEFT_ASSIGN_OR_RETURN(t.data_type, ConvertDataType(p.data_type(), field + " '" + p.name() + "': "));
  t.dims.assign(p.dims().begin(), p.dims().end());
  // `reshape: { shape: [] }` is meaningful (a scalar), so presence matters, not emptiness.
  if (p.has_reshape()) t.reshape = Shape(p.reshape().shape().begin(), p.reshape().shape().end());
  if constexpr (requires { p.label_filename(); }) t.label_filename = p.label_filename();
  return t;
}

Result<uint32_t> ToUint32(uint64_t value, const std::string& field) {
  if (value > UINT32_MAX) return InvalidArgument(field + ": " + std::to_string(value) + " is too large");
  return static_cast<uint32_t>(value);
}

Result<QueuePolicyConfig> ConvertQueuePolicy(const inference::ModelQueuePolicy& p, const std::string& field) {
  QueuePolicyConfig q;
  switch (p.timeout_action()) {
    case inference::ModelQueuePolicy::REJECT: q.timeout_action = QueuePolicyConfig::TimeoutAction::kReject; break;
    case inference::ModelQueuePolicy::DELAY: q.timeout_action = QueuePolicyConfig::TimeoutAction::kDelay; break;
    default:
      return InvalidArgument(field + ".timeout_action: unknown value " +
                             std::to_string(static_cast<int>(p.timeout_action())));
  }
  q.default_timeout_us = p.default_timeout_microseconds();
  q.allow_timeout_override = p.allow_timeout_override();
  q.max_queue_size = p.max_queue_size();
  return q;
}

Result<DynamicBatchingConfig> ConvertDynamicBatching(const inference::ModelDynamicBatching& p) {
  DynamicBatchingConfig db;
  db.preferred_batch_size.assign(p.preferred_batch_size().begin(), p.preferred_batch_size().end());
  db.max_queue_delay_us = p.max_queue_delay_microseconds();
  db.preserve_ordering = p.preserve_ordering();
  WEFT_ASSIGN_OR_RETURN(db.priority_levels, ToUint32(p.priority_levels(), "dynamic_batching.priority_levels"));
  WEFT_ASSIGN_OR_RETURN(db.default_priority_level,
                        ToUint32(p.default_priority_level(), "dynamic_batching.default_priority_level"));
  WEFT_ASSIGN_OR_RETURN(db.default_queue_policy,
                        ConvertQueuePolicy(p.default_queue_policy(), "dynamic_batching.default_queue_policy"));
  for (const auto& [level, policy] : p.priority_queue_policy()) {
    std::string field = "dynamic_batching.priority_queue_policy[" + std::to_string(level) + "]";
    if (level < 1 || level > db.priority_levels) {
      return InvalidArgument(
          field + ": priority level is outside [1, priority_levels = " + std::to_string(db.priority_levels) + "]");
    }
    WEFT_ASSIGN_OR_RETURN(db.priority_queue_policy[level], ConvertQueuePolicy(policy, field));
  }
  return db;
}

Result<VersionPolicyConfig> ConvertVersionPolicy(const inference::ModelVersionPolicy& p) {
  VersionPolicyConfig v;
  switch (p.policy_choice_case()) {
    case inference::ModelVersionPolicy::kAll: v.kind = VersionPolicyConfig::Kind::kAll; break;
    case inference::ModelVersionPolicy::kSpecific:
      v.kind = VersionPolicyConfig::Kind::kSpecific;
      v.versions.assign(p.specific().versions().begin(), p.specific().versions().end());
      break;
    case inference::ModelVersionPolicy::kLatest:
      if (p.latest().num_versions() > INT_MAX) {
        return InvalidArgument("version_policy.latest.num_versions: " + std::to_string(p.latest().num_versions()) +
                               " is too large");
      }
      v.kind = VersionPolicyConfig::Kind::kLatest;
      v.num_versions = static_cast<int>(p.latest().num_versions());
      break;
    case inference::ModelVersionPolicy::POLICY_CHOICE_NOT_SET: break;  // Normalize() sets latest
  }
  return v;
}

Result<InstanceGroupConfig> ConvertInstanceGroup(const inference::ModelInstanceGroup& p) {
  InstanceGroupConfig g;
  g.name = p.name();
  g.count = p.count();
  g.gpus.assign(p.gpus().begin(), p.gpus().end());
  switch (p.kind()) {
    case inference::ModelInstanceGroup::KIND_AUTO: g.kind = InstanceKind::kAuto; break;
    case inference::ModelInstanceGroup::KIND_GPU: g.kind = InstanceKind::kGpu; break;
    case inference::ModelInstanceGroup::KIND_CPU: g.kind = InstanceKind::kCpu; break;
    case inference::ModelInstanceGroup::KIND_MODEL: g.kind = InstanceKind::kModel; break;
    default:
      return InvalidArgument("instance_group '" + p.name() + "': kind: unknown value " +
                             std::to_string(static_cast<int>(p.kind())));
  }
  if ((g.kind == InstanceKind::kCpu || g.kind == InstanceKind::kModel) && !g.gpus.empty()) {
    return InvalidArgument("instance_group '" + p.name() + "': gpus: must be empty for kind " +
                           inference::ModelInstanceGroup::Kind_Name(p.kind()));
  }
  return g;
}

Result<WarmupConfig> ConvertWarmup(const inference::ModelWarmup& p, size_t index) {
  const std::string field = "model_warmup[" + std::to_string(index) + "] '" + p.name() + "': ";
  WarmupConfig w;
  w.name = p.name();
  w.batch_size = p.batch_size();
  w.count = p.count();
  for (const auto& [name, in] : p.inputs()) {
    const std::string where = field + "input '" + name + "': ";
    WarmupInputConfig input;
    WEFT_ASSIGN_OR_RETURN(input.data_type, ConvertDataType(in.data_type(), where));
    input.dims.assign(in.dims().begin(), in.dims().end());
    // Triton reads only which member is set: `zero_data: false` still means zeros.
    switch (in.input_data_type_case()) {
      case inference::ModelWarmup::Input::kZeroData: input.source = WarmupInputConfig::Source::kZero; break;
      case inference::ModelWarmup::Input::kRandomData: input.source = WarmupInputConfig::Source::kRandom; break;
      case inference::ModelWarmup::Input::kInputDataFile:
        input.source = WarmupInputConfig::Source::kFile;
        input.file = in.input_data_file();
        break;
      case inference::ModelWarmup::Input::INPUT_DATA_TYPE_NOT_SET:
        return InvalidArgument(where + "one of zero_data, random_data or input_data_file must be set");
    }
    w.inputs.emplace(name, std::move(input));
  }
  return w;
}

// Features whose semantics weft does not implement. Serving such a model as if they were absent would give
// clients different results than Triton does, so the model fails to load instead.
Status RejectUnsupported(const inference::ModelConfig& p) {
  if (p.has_sequence_batching()) return InvalidArgument("sequence_batching: not supported by weft");
  if (p.has_ensemble_scheduling()) return InvalidArgument("ensemble_scheduling: not supported by weft");
  if (p.batch_input_size() > 0) return InvalidArgument("batch_input: not supported by weft");
  if (p.batch_output_size() > 0) return InvalidArgument("batch_output: not supported by weft");
  if (p.model_transaction_policy().decoupled()) {
    return InvalidArgument("model_transaction_policy.decoupled: not supported by weft (one response per request)");
  }
  return Status::Ok();
}

Result<ModelConfig> Convert(const inference::ModelConfig& p) {
  WEFT_RETURN_IF_ERROR(RejectUnsupported(p));
  ModelConfig c;
  c.name = p.name();
  c.platform = p.platform();
  c.backend = p.backend();
  c.max_batch_size = p.max_batch_size();
  for (const auto& in : p.input()) {
    WEFT_ASSIGN_OR_RETURN(TensorConfig t, ConvertTensor(in, "input"));
    c.inputs.push_back(std::move(t));
  }
  for (const auto& out : p.output()) {
    WEFT_ASSIGN_OR_RETURN(TensorConfig t, ConvertTensor(out, "output"));
    c.outputs.push_back(std::move(t));
  }
  for (const auto& group : p.instance_group()) {
    WEFT_ASSIGN_OR_RETURN(InstanceGroupConfig g, ConvertInstanceGroup(group));
    c.instance_groups.push_back(std::move(g));
  }
  WEFT_ASSIGN_OR_RETURN(c.version_policy, ConvertVersionPolicy(p.version_policy()));
  c.default_model_filename = p.default_model_filename();
  for (const auto& [key, value] : p.parameters()) c.parameters[key] = value.string_value();
  if (p.has_dynamic_batching()) {
    WEFT_ASSIGN_OR_RETURN(c.dynamic_batching, ConvertDynamicBatching(p.dynamic_batching()));
  }
  switch (p.optimization().priority()) {
    case inference::ModelOptimizationPolicy::PRIORITY_MAX: c.priority = ModelPriority::kMax; break;
    case inference::ModelOptimizationPolicy::PRIORITY_MIN: c.priority = ModelPriority::kMin; break;
    default: c.priority = ModelPriority::kDefault; break;
  }
  for (int i = 0; i < p.model_warmup_size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(WarmupConfig w, ConvertWarmup(p.model_warmup(i), static_cast<size_t>(i)));
    c.warmup.push_back(std::move(w));
  }

  // ValidateModelConfig requires a name; an unnamed config gets one from its directory later.
  const bool unnamed = c.name.empty();
  if (unnamed) c.name = "unnamed";
  Status valid = ValidateModelConfig(c);
  if (unnamed) c.name.clear();
  WEFT_RETURN_IF_ERROR(valid);

  c.json = pbtxt_internal::ConfigMessageToJson(p);
  return c;
}

// Whether the warnings of `source` with this text are yet to be logged. A polled repository parses every config
// again at each poll: a config with a field of a newer Triton would log it every few seconds. Remembered per source
// (a model's config file, or the load API's parameters.config), the last text only.
bool WarnsFirstTime(const std::string& source, std::string_view text) {
  static std::mutex mu;
  static std::unordered_map<std::string, size_t> logged;  // source -> hash of the text whose warnings were logged
  constexpr size_t kMaxSources = 4096;
  const size_t hash = std::hash<std::string_view>{}(text);
  std::lock_guard lock(mu);
  if (logged.size() >= kMaxSources && !logged.contains(source)) logged.clear();
  auto [it, inserted] = logged.try_emplace(source, hash);
  if (inserted) return true;
  if (it->second == hash) return false;
  it->second = hash;
  return true;
}

// What the text and JSON forms share once parsed: the default name, Triton's defaults, conversion, validation.
Result<ModelConfig> Finish(ParsedProto parsed, std::string_view text, const std::string& source,
                           const std::string& default_name) {
  if (std::optional<std::string> where = FirstNonUtf8String(parsed.proto, "")) {
    return InvalidArgument(source + ": " + *where + " is not UTF-8");
  }
  if (parsed.proto.name().empty()) parsed.proto.set_name(default_name);
  Normalize(&parsed.proto);
  Result<ModelConfig> config = Convert(parsed.proto);
  if (!config.ok()) return config.status().WithContext(source);
  // Only a config that loads gets its warnings: for a rejected one the error is what matters.
  if (!parsed.warnings.empty() && WarnsFirstTime(source, text)) {
    for (const auto& w : parsed.warnings) WEFT_LOG(Warning) << w << " Ignored.";
  }
  return config;
}

}  // namespace

Result<ModelConfig> ParseModelConfigText(std::string_view text, const std::string& source_name) {
  WEFT_ASSIGN_OR_RETURN(ParsedProto parsed, ParseProto(text, source_name));
  return Finish(std::move(parsed), text, source_name, "");
}

Result<ModelConfig> ParseModelConfigJson(std::string_view json, const std::string& source_name,
                                         const std::string& default_name) {
  if (json.size() > kMaxConfigFileBytes) {
    return InvalidArgument(source_name + ": larger than " + std::to_string(kMaxConfigFileBytes >> 20) +
                           " MiB, the limit for a config");
  }
  WEFT_ASSIGN_OR_RETURN(ParsedProto parsed, ParseJsonProto(json, source_name));
  return Finish(std::move(parsed), json, source_name, default_name);
}

Result<ModelConfig> ParseModelConfigFile(const std::filesystem::path& file) {
  const std::string source = file.string();
  // A config is a few KiB; reading a huge or endless file (a FIFO, /dev/zero under a symlink) would hold the loader.
  Result<std::string> read = ReadSmallFile(file, kMaxConfigFileBytes);
  if (!read.ok()) {
    switch (read.status().code()) {
      case StatusCode::kNotFound: return NotFound(source + ": not found");
      case StatusCode::kInvalidArgument:
        return InvalidArgument(
            source + ": " +
            (read.status().message().starts_with("larger than")
                 ? "larger than " + std::to_string(kMaxConfigFileBytes >> 20) + " MiB, the limit for a config file"
                 : read.status().message()));
      default: return Internal(source + ": " + read.status().message());
    }
  }
  const std::string& text = *read;
  WEFT_ASSIGN_OR_RETURN(ParsedProto parsed, ParseProto(text, source));
  return Finish(std::move(parsed), text, source, file.parent_path().filename().string());
}

Status FillServedConfig(const ModelConfig& config, inference::ModelConfig* out) {
  Result<ParsedProto> parsed = ParseJsonProto(config.json, "the configuration of model '" + config.name + "'");
  if (!parsed.ok()) return Internal(parsed.status().message());
  *out = std::move(parsed->proto);
  out->set_name(config.name);
  if (out->instance_group_size() > 0) return Status::Ok();
  std::vector<InstanceGroupConfig> groups = config.instance_groups;
  if (groups.empty()) groups.push_back({.name = config.name, .count = 1, .kind = InstanceKind::kAuto, .gpus = {}});
  for (const InstanceGroupConfig& group : groups) {
    inference::ModelInstanceGroup* g = out->add_instance_group();
    g->set_name(group.name.empty() ? config.name : group.name);
    g->set_count(group.count);
    switch (group.kind) {
      case InstanceKind::kAuto: g->set_kind(inference::ModelInstanceGroup::KIND_AUTO); break;
      case InstanceKind::kGpu: g->set_kind(inference::ModelInstanceGroup::KIND_GPU); break;
      case InstanceKind::kCpu: g->set_kind(inference::ModelInstanceGroup::KIND_CPU); break;
      case InstanceKind::kModel: g->set_kind(inference::ModelInstanceGroup::KIND_MODEL); break;
    }
    for (int gpu : group.gpus) g->add_gpus(gpu);
  }
  return Status::Ok();
}

Result<std::string> ServedConfigJson(const ModelConfig& config) {
  inference::ModelConfig served;
  WEFT_RETURN_IF_ERROR(FillServedConfig(config, &served));
  return pbtxt_internal::ConfigMessageToJson(served);
}

}  // namespace weft
