// lstm_cudnn: the cuDNN baseline's executable. The shared harness (common/harness/stage_main.h)
// runs cuDNN's LSTM with one algorithm, or with each in turn (--algo all, the default) on the same
// data, and names the fastest. An algorithm that cuDNN refuses for the sizes given is reported
// as unsupported (with cuDNN's reason) and the others go on. With --training it runs cuDNN's
// training pass (forward keeping a reserve space, then the data and weight gradients) instead of
// the forward pass: the stages cudnn_<algo>_training, checked on every gradient. With --precision
// fp16 or bf16 it runs cuDNN in that precision (tensor-op math, FP32 accumulation; the stages
// cudnn_<algo>_fp16, cudnn_<algo>_bf16_training, ...) on data the harness has rounded to it.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cudnn_lstm.h"
#include "harness/stage_main.h"

int main(int argc, char** argv) {
  namespace cudnn = lstm::baseline_cudnn;
  std::string algo = "all";
  std::string precision = "fp32";
  bool training = false;
  const lstm::ExtraOptions extra = [&algo, &precision, &training](CLI::App& app) {
    std::vector<std::string> names;
    for (cudnn::Algo each : cudnn::all_algos())
      names.push_back(cudnn::algo_name(each));
    names.push_back("all");
    app.add_option("--algo", algo,
                   "cuDNN algorithm: standard, persist_static, persist_dynamic, or all (each in "
                   "turn)")
        ->check(CLI::IsMember(names))
        ->capture_default_str();
    std::vector<std::string> precisions;
    for (lstm::Precision each : cudnn::all_precisions())
      precisions.push_back(lstm::precision_name(each));
    app.add_option("--precision", precision,
                   "fp32 (FP32 data, FMA math, no TF32), or fp16 or bf16 (data in that "
                   "precision, tensor-op math with FP32 accumulation; every input is rounded to "
                   "it on the host first, and the reference reads the rounded values; the stages "
                   "cudnn_<algo>_fp16, cudnn_<algo>_bf16[_training])")
        ->check(CLI::IsMember(precisions))
        ->capture_default_str();
    app.add_flag("--training", training,
                 "run cuDNN's training pass (forward with a reserve space, then "
                 "cudnnRNNBackwardData_v8 and cudnnRNNBackwardWeights_v8; the stages "
                 "cudnn_<algo>_training) instead of the forward pass; every gradient is checked "
                 "and dy, dhy, dcy come from --load or the seed");
  };
  const auto select = [&algo, &precision, &training] {
    const lstm::Precision chosen = lstm::precision_from_name(precision);
    std::vector<lstm::Implementation> implementations;
    for (cudnn::Algo each : cudnn::all_algos()) {
      if (algo == "all" || algo == cudnn::algo_name(each)) {
        const lstm::StageInfo info =
            training ? cudnn::training_stage_info(each, chosen) : cudnn::stage_info(each, chosen);
        implementations.push_back({info.name, info.series, info.make()});
      }
    }
    return implementations;
  };
  return lstm::harness_main(argc, argv, "lstm_cudnn",
                            "cuDNN's LSTM forward pass, or with --training its training pass "
                            "(C API; FP32 FMA math, no TF32, or with --precision fp16|bf16 "
                            "tensor-op math with FP32 accumulation), every algorithm or one, "
                            "checked against a CPU reference, then timed. Needs an NVIDIA GPU.\n"
                            "Example: lstm_cudnn --algo all --hidden 512 --batch 4 --layers 1 "
                            "[--precision fp16] [--training]",
                            extra, select, lstm::Unsupported::kSkip);
}
