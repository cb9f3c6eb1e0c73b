#include "engine/request_validation.h"

#include <set>

#include "model/classification.h"

namespace weft {
namespace {

bool ShapeMatches(const Shape& expected, const Shape& actual) {
  if (expected.size() != actual.size()) return false;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] != -1 && expected[i] != actual[i]) return false;
  }
  return true;
}

// Replaces at most one -1 in `target` so that its element count equals `count`.
Result<Shape> ResolveShape(Shape target, int64_t count, const std::string& tensor) {
  int64_t known = 1;
  int unknown = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] < 0) {
      if (unknown >= 0) return InvalidArgument("tensor '" + tensor + "': reshape has more than one -1");
      unknown = static_cast<int>(i);
    } else {
      known *= target[i];
    }
  }
  if (unknown >= 0) {
    if (known == 0 || count % known != 0) {
      return InvalidArgument("tensor '" + tensor + "': cannot reshape " + std::to_string(count) + " elements to " +
                             ShapeToString(target));
    }
    target[unknown] = count / known;
  } else if (known != count) {
    return InvalidArgument("tensor '" + tensor + "': cannot reshape " + std::to_string(count) + " elements to " +
                           ShapeToString(target));
  }
  return target;
}

}  // namespace

Result<std::vector<Tensor>> PrepareInputs(const ModelConfig& config, const InferenceRequest& request) {
  std::set<std::string> seen;
  for (const auto& in : request.inputs) {
    if (!config.FindInput(in.name())) {
      return InvalidArgument("unexpected input '" + in.name() + "': model '" + config.name + "' has no such input");
    }
    if (!seen.insert(in.name()).second) return InvalidArgument("input '" + in.name() + "' is given twice");
  }
  for (const auto& name : request.requested_outputs) {
    if (!config.FindOutput(name)) {
      return InvalidArgument("unknown output '" + name + "' requested: model '" + config.name + "' has no such output");
    }
  }
  for (const auto& [name, count] : request.class_counts) {
    const TensorConfig* spec = config.FindOutput(name);
    if (!spec) {
      return InvalidArgument("unknown output '" + name + "' requested: model '" + config.name + "' has no such output");
    }
    if (!IsClassifiable(spec->data_type)) {
      return InvalidArgument("output '" + name + "': classification needs an integer or FP32/FP64 output, not " +
                             std::string(DataTypeName(spec->data_type)));
    }
    if (count == 0) return InvalidArgument("output '" + name + "': classification needs a class count above 0");
  }
  std::vector<Tensor> prepared;
  prepared.reserve(config.inputs.size());
  int64_t batch = -1;
  for (const auto& spec : config.inputs) {
    const Tensor* in = nullptr;
    for (const auto& t : request.inputs) {
      if (t.name() == spec.name) in = &t;
    }
    if (!in) return InvalidArgument("missing input '" + spec.name + "'");
    if (in->type() != spec.data_type) {
      return InvalidArgument("input '" + spec.name + "': datatype " + std::string(DataTypeName(in->type())) +
                             " does not match the model's " + std::string(DataTypeName(spec.data_type)));
    }
    Shape expected = FullShape(config, spec);
    if (!ShapeMatches(expected, in->shape())) {
      return InvalidArgument("input '" + spec.name + "': shape " + ShapeToString(in->shape()) +
                             " does not match the model's " + ShapeToString(expected));
    }
    if (config.max_batch_size > 0) {
      int64_t b = in->shape()[0];
      if (b < 1 || b > config.max_batch_size) {
        return InvalidArgument("input '" + spec.name + "': batch size " + std::to_string(b) + " is outside [1, " +
                               std::to_string(config.max_batch_size) + "]");
      }
      if (batch >= 0 && b != batch) {
        return InvalidArgument("input '" + spec.name + "': batch size " + std::to_string(b) +
                               " differs from the other inputs' " + std::to_string(batch));
      }
      batch = b;
    }
    WEFT_RETURN_IF_ERROR(
        ValidateTensorBytes(in->type(), in->shape(), in->bytes()).WithContext("input '" + spec.name + "'"));
    if (spec.reshape) {
      Shape target;
      if (config.max_batch_size > 0) target.push_back(in->shape()[0]);
      target.insert(target.end(), spec.reshape->begin(), spec.reshape->end());
      int64_t count = in->element_count();
      Shape resolved;
      if (config.max_batch_size > 0) {
        // Resolve the per-item shape so that a -1 in reshape never swallows the batch dimension.
        Shape item(spec.reshape->begin(), spec.reshape->end());
        WEFT_ASSIGN_OR_RETURN(item, ResolveShape(item, count / in->shape()[0], spec.name));
        resolved = {in->shape()[0]};
        resolved.insert(resolved.end(), item.begin(), item.end());
      } else {
        WEFT_ASSIGN_OR_RETURN(resolved, ResolveShape(target, count, spec.name));
      }
      prepared.push_back(in->Reshaped(std::move(resolved)));
    } else {
      prepared.push_back(*in);
    }
  }
  return prepared;
}

Result<std::vector<Tensor>> FinishOutputs(const ModelConfig& config, const OutputLabels& labels,
                                          const InferenceRequest& request, std::vector<Tensor> outputs,
                                          int64_t batch_size) {
  std::vector<std::string> wanted = request.requested_outputs;
  if (wanted.empty()) {
    for (const auto& o : config.outputs) wanted.push_back(o.name);
  }
  std::vector<Tensor> result;
  result.reserve(wanted.size());
  for (const auto& name : wanted) {
    const TensorConfig* spec = config.FindOutput(name);
    Tensor* out = nullptr;
    for (auto& t : outputs) {
      if (t.name() == name) out = &t;
    }
    if (!spec || !out) return Internal("backend returned no output '" + name + "'");
    if (out->type() != spec->data_type) {
      return Internal("output '" + name + "': backend returned " + std::string(DataTypeName(out->type())) +
                      ", the config says " + std::string(DataTypeName(spec->data_type)));
    }
    if (spec->reshape) {
      // The framework's shape differs from the API's: rebuild the API shape from the config's dims.
      Shape api;
      if (config.max_batch_size > 0) api.push_back(batch_size);
      api.insert(api.end(), spec->dims.begin(), spec->dims.end());
      int64_t count = out->element_count();
      if (config.max_batch_size > 0) {
        Shape item(spec->dims.begin(), spec->dims.end());
        auto resolved = ResolveShape(item, batch_size > 0 ? count / batch_size : 0, name);
        if (!resolved.ok()) return Internal(resolved.status().message());
        api = {batch_size};
        api.insert(api.end(), resolved->begin(), resolved->end());
      } else {
        auto resolved = ResolveShape(api, count, name);
        if (!resolved.ok()) return Internal(resolved.status().message());
        api = *resolved;
      }
      result.push_back(out->Reshaped(std::move(api)));
    } else {
      result.push_back(*out);
    }
    if (auto classify = request.class_counts.find(name); classify != request.class_counts.end()) {
      static const std::vector<std::string> kNoLabels;
      auto output_labels = labels.find(name);
      WEFT_ASSIGN_OR_RETURN(result.back(), Classify(result.back(), classify->second, config.max_batch_size > 0,
                                                    output_labels != labels.end() ? output_labels->second : kNoLabels));
    }
  }
  return result;
}

}  // namespace weft
