// lstm_cudnn: the cuDNN baseline's executable. The shared harness (common/harness/stage_main.h)
// runs cuDNN's LSTM with one algorithm, or with each in turn (--algo all, the default) on the same
// data, and names the fastest. An algorithm that cuDNN refuses for the sizes given is reported
// as unsupported (with cuDNN's reason) and the others go on.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cudnn_lstm.h"
#include "harness/stage_main.h"

int main(int argc, char** argv) {
  namespace cudnn = lstm::baseline_cudnn;
  std::string algo = "all";
  const lstm::ExtraOptions extra = [&algo](CLI::App& app) {
    std::vector<std::string> names;
    for (cudnn::Algo each : cudnn::all_algos())
      names.push_back(cudnn::algo_name(each));
    names.push_back("all");
    app.add_option("--algo", algo,
                   "cuDNN algorithm: standard, persist_static, persist_dynamic, or all (each in "
                   "turn)")
        ->check(CLI::IsMember(names))
        ->capture_default_str();
  };
  const auto select = [&algo] {
    std::vector<lstm::Implementation> implementations;
    for (cudnn::Algo each : cudnn::all_algos()) {
      if (algo == "all" || algo == cudnn::algo_name(each)) {
        const lstm::StageInfo info = cudnn::stage_info(each);
        implementations.push_back({info.name, info.series, info.make()});
      }
    }
    return implementations;
  };
  return lstm::harness_main(argc, argv, "lstm_cudnn",
                            "cuDNN's LSTM forward pass (C API, FP32 FMA math, no TF32), every "
                            "algorithm or one, checked against a CPU reference, then timed. Needs "
                            "an NVIDIA GPU.\nExample: lstm_cudnn --algo all --hidden 512 --batch "
                            "4 --layers 1",
                            extra, select, lstm::Unsupported::kSkip);
}
