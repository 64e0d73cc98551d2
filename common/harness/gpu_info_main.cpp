// lstm_gpu_info: says whether a CUDA GPU is usable here. Exit 0 and prints the GPU's name, SM
// count and the results folder name (e.g. "h100-sxm"); exit 1 with the reason if there is none.
#include <iostream>

#include "harness/cuda_utils.h"
#include "harness/device_environment.h"

int main(int argc, char** argv) {
  const bool folder_only = argc > 1 && std::string(argv[1]) == "--folder";
  std::string why;
  if (!lstm::cuda_device_available(&why)) {
    std::cerr << "no usable CUDA GPU: " << why << "\n";
    return 1;
  }
  try {
    const lstm::Environment env = lstm::collect_environment(0);
    if (folder_only) {
      std::cout << lstm::gpu_folder_name(env.gpu_name) << "\n";
    } else {
      std::cout << env.gpu_name << ", " << env.sm_count << " SMs, compute capability "
                << env.compute_capability << ", driver " << env.driver << ", CUDA runtime "
                << env.cuda_runtime << ", cuBLAS " << env.cublas << ", cuDNN " << env.cudnn
                << "\nresults folder: results/" << lstm::gpu_folder_name(env.gpu_name) << "\n";
    }
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "lstm_gpu_info: " << error.what() << "\n";
    return 1;
  }
}
