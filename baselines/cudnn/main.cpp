// lstm_cudnn: the cuDNN baseline's executable. The shared harness (common/stage_main.h) runs
// cuDNN's LSTM with one algorithm, or with each in turn (--algo all, the default) on the same
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
    std::vector<lstm::StageInfo> stages;
    for (cudnn::Algo each : cudnn::all_algos()) {
      if (algo == "all" || algo == cudnn::algo_name(each))
        stages.push_back(cudnn::stage_info(each));
    }
    return stages;
  };
  return lstm::harness_main(argc, argv, "lstm_cudnn", extra, select, lstm::Unsupported::kSkip);
}
