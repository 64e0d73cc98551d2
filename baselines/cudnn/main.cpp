// lstm_cudnn: the cuDNN baseline's executable. The shared harness (common/harness/stage_main.h)
// runs cuDNN's LSTM with one algorithm, or with each in turn (--algo all, the default) on the same
// data, and names the fastest. An algorithm that cuDNN refuses for the sizes given is reported
// as unsupported (with cuDNN's reason) and the others go on. With --training it runs cuDNN's
// training pass (forward keeping a reserve space, then the data and weight gradients) instead of
// the forward pass: the stages cudnn_<algo>_training, checked on every gradient.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cudnn_lstm.h"
#include "harness/stage_main.h"

int main(int argc, char** argv) {
  namespace cudnn = lstm::baseline_cudnn;
  std::string algo = "all";
  bool training = false;
  const lstm::ExtraOptions extra = [&algo, &training](CLI::App& app) {
    std::vector<std::string> names;
    for (cudnn::Algo each : cudnn::all_algos())
      names.push_back(cudnn::algo_name(each));
    names.push_back("all");
    app.add_option("--algo", algo,
                   "cuDNN algorithm: standard, persist_static, persist_dynamic, or all (each in "
                   "turn)")
        ->check(CLI::IsMember(names))
        ->capture_default_str();
    app.add_flag("--training", training,
                 "run cuDNN's training pass (forward with a reserve space, then "
                 "cudnnRNNBackwardData_v8 and cudnnRNNBackwardWeights_v8; the stages "
                 "cudnn_<algo>_training) instead of the forward pass; every gradient is checked "
                 "and dy, dhy, dcy come from --load or the seed");
  };
  const auto select = [&algo, &training] {
    std::vector<lstm::Implementation> implementations;
    for (cudnn::Algo each : cudnn::all_algos()) {
      if (algo == "all" || algo == cudnn::algo_name(each)) {
        const lstm::StageInfo info =
            training ? cudnn::training_stage_info(each) : cudnn::stage_info(each);
        implementations.push_back({info.name, info.series, info.make()});
      }
    }
    return implementations;
  };
  return lstm::harness_main(argc, argv, "lstm_cudnn",
                            "cuDNN's LSTM forward pass, or with --training its training pass "
                            "(C API, FP32 FMA math, no TF32), every algorithm or one, checked "
                            "against a CPU reference, then timed. Needs an NVIDIA GPU.\nExample: "
                            "lstm_cudnn --algo all --hidden 512 --batch 4 --layers 1 [--training]",
                            extra, select, lstm::Unsupported::kSkip);
}
