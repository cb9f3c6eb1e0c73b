#include "backends/onnx/onnx_backend.h"

#include <climits>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>
#include <system_error>

#include "backends/common/model_checks.h"
#include "backends/onnx/opencv_errors.h"

namespace weft {
namespace {

constexpr char kDefaultModelFilename[] = "model.onnx";

// e.msg repeats OpenCV's version, source file and function around the description in e.err.
std::string Message(const cv::Exception& e) { return e.err.empty() ? e.msg : e.err; }

class OnnxInstance : public ModelInstance {
 public:
  OnnxInstance(ModelConfig config, cv::dnn::Net net) : config_(std::move(config)), net_(std::move(net)) {
    for (const TensorConfig& output : config_.outputs) output_names_.push_back(output.name);
  }

  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    try {
      return Run(inputs);
    } catch (const std::exception& e) {
      // The outputs' copies allocate too: a std::bad_alloc or OpenCV's StsNoMem is out of memory.
      return OpenCvExecutionError(e, config_.name, OpenCvStage::kOther);
    }
  }

 private:
  Result<std::vector<Tensor>> Run(std::span<const Tensor> inputs) {
    WEFT_RETURN_IF_ERROR(CheckInputs(config_, inputs));
    try {
      for (size_t i = 0; i < inputs.size(); ++i) {
        WEFT_ASSIGN_OR_RETURN(cv::Mat mat, WrapInput(inputs[i]));
        net_.setInput(mat, config_.inputs[i].name);
      }
    } catch (const cv::Exception& e) {
      return OpenCvExecutionError(e, config_.name, OpenCvStage::kSetInputs);
    }
    std::vector<cv::Mat> results;
    try {
      net_.forward(results, output_names_);
    } catch (const cv::Exception& e) {
      // The inputs matched the config, so what the model rejects is what the config leaves open (a -1 dim); unless
      // the Net could not allocate its blobs, which is the server's (and the scheduler retries smaller batches).
      return OpenCvExecutionError(e, config_.name, OpenCvStage::kForward);
    }
    return ToOutputs(results, BatchSize(config_, inputs));
  }

  // A cv::Mat over the tensor's bytes, no copy. OpenCV wants a mutable pointer; setInput only reads it.
  static Result<cv::Mat> WrapInput(const Tensor& tensor) {
    std::vector<int> sizes;
    for (int64_t d : tensor.shape()) {
      if (d > INT_MAX) return InvalidArgument("input '" + tensor.name() + "': a dimension exceeds OpenCV's limit");
      sizes.push_back(static_cast<int>(d));
    }
    if (sizes.empty()) sizes.push_back(1);
    return cv::Mat(static_cast<int>(sizes.size()), sizes.data(), CV_32F, const_cast<std::byte*>(tensor.data()));
  }

  Result<std::vector<Tensor>> ToOutputs(const std::vector<cv::Mat>& results, int64_t batch_size) const {
    if (results.size() != config_.outputs.size()) {
      return Internal("model '" + config_.name + "' returned " + std::to_string(results.size()) +
                      " tensors, the config declares " + std::to_string(config_.outputs.size()) + " outputs");
    }
    std::vector<Tensor> outputs;
    outputs.reserve(results.size());
    for (size_t i = 0; i < results.size(); ++i) {
      const TensorConfig& want = config_.outputs[i];
      const cv::Mat& result = results[i];
      if (result.depth() != CV_32F || result.channels() != 1) {
        return Internal("output '" + want.name + "': OpenCV produced a matrix of type " +
                        cv::typeToString(result.type()) + ", expected 32FC1");
      }
      Shape shape(result.size.p, result.size.p + result.dims);
      WEFT_RETURN_IF_ERROR(CheckOutput(config_, want, DataType::kFp32, shape, batch_size));
      // The Net overwrites its output buffers on the next forward(), so the bytes must be copied out.
      cv::Mat continuous = result.isContinuous() ? result : result.clone();
      std::byte* data = nullptr;
      outputs.push_back(Tensor::Allocate(want.name, DataType::kFp32, std::move(shape), &data));
      std::memcpy(data, continuous.data, outputs.back().byte_size());
    }
    return outputs;
  }

  const ModelConfig config_;
  cv::dnn::Net net_;
  std::vector<std::string> output_names_;
};

// Config tensor names that the Net does not have fail here, at load, rather than on every request.
Status CheckNames(cv::dnn::Net& net, const ModelConfig& config) {
  for (const TensorConfig& input : config.inputs) {
    // OpenCV has no list of input names; setInput throws for an unknown one. The empty blob is replaced by the
    // first request's input.
    try {
      net.setInput(cv::Mat(), input.name);
    } catch (const cv::Exception&) {
      return InvalidArgument("model '" + config.name + "': the ONNX model has no input '" + input.name + "'");
    }
  }
  for (const TensorConfig& output : config.outputs) {
    if (net.getLayerId(output.name) < 0) {
      std::string outputs;
      for (const auto& name : net.getUnconnectedOutLayersNames()) outputs += (outputs.empty() ? "" : ", ") + name;
      return InvalidArgument("model '" + config.name + "': the ONNX model has no output '" + output.name +
                             "' (its outputs: " + outputs + ")");
    }
  }
  return Status::Ok();
}

class OnnxBackend : public Backend {
 public:
  Status Validate(const ModelConfig& config) const override {
    for (const auto* tensors : {&config.inputs, &config.outputs}) {
      for (const TensorConfig& t : *tensors) {
        if (t.data_type != DataType::kFp32) {
          return InvalidArgument("tensor '" + t.name + "': the onnxruntime backend runs on OpenCV DNN, which " +
                                 "computes in FP32 only; got " + std::string(DataTypeName(t.data_type)));
        }
      }
    }
    return Status::Ok();
  }

  Result<std::unique_ptr<ModelInstance>> CreateInstance(const ModelConfig& config,
                                                        const std::filesystem::path& version_dir,
                                                        int index) const override {
    WEFT_RETURN_IF_ERROR(Validate(config));
    std::filesystem::path file =
        version_dir / (config.default_model_filename.empty() ? kDefaultModelFilename : config.default_model_filename);
    std::error_code error;
    if (!std::filesystem::is_regular_file(file, error)) {
      return NotFound("model '" + config.name + "': no model file " + file.string());
    }
    try {
      cv::dnn::Net net = cv::dnn::readNetFromONNX(file.string());
      if (net.empty())
        return Internal("model '" + config.name + "': OpenCV read an empty network from " + file.string());
      net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
      net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
      WEFT_RETURN_IF_ERROR(CheckNames(net, config));
      return std::unique_ptr<ModelInstance>(std::make_unique<OnnxInstance>(config, std::move(net)));
    } catch (const cv::Exception& e) {
      return Internal("model '" + config.name + "': cannot load ONNX file " + file.string() + ": " + Message(e));
    } catch (const std::exception& e) {
      return Internal("model '" + config.name + "': cannot load ONNX file " + file.string() + ": " + e.what());
    }
  }

  std::string DefaultModelFilename() const override { return kDefaultModelFilename; }
};

}  // namespace

std::shared_ptr<const Backend> MakeOnnxBackend() { return std::make_shared<OnnxBackend>(); }

}  // namespace weft
