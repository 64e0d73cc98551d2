#include "harness/phase_trace.cuh"

#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "harness/cuda_utils.h"

namespace lstm {

void PhaseTraceRecorder::add_flag(CLI::App& app) {
  if (kTraceCompiled) {
    app.add_flag("--trace", asked_,
                 "time the phases of block 0's steps (clock64) and print them at exit");
  }
}

void PhaseTraceRecorder::prepare(int seq_len) {
  seq_len_ = seq_len;
  if (asked_ && buffer_ == nullptr) {
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buffer_), kTraceSlots * sizeof(long long)));
  }
}

PhaseTraceRecorder::~PhaseTraceRecorder() {
  if (buffer_ == nullptr) return;
  long long cycles[kTraceSlots] = {};
  if (cudaDeviceSynchronize() == cudaSuccess &&
      cudaMemcpy(cycles, buffer_, sizeof(cycles), cudaMemcpyDeviceToHost) == cudaSuccess) {
    static const char* const kNames[kTraceSlots] = {"wait for h_{t-1}", "product", "reduction",
                                                    "cell update", "whole step"};
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    std::cerr << stage_ << " trace (block 0, last launch, per step; cycles at up to " << khz / 1000
              << " MHz):";
    for (int i = 0; i < kTraceSlots; ++i) {
      const double per_step = static_cast<double>(cycles[i]) / seq_len_;
      std::cerr << "  " << kNames[i] << " " << static_cast<long long>(per_step) << " ("
                << per_step / khz * 1000 << " us)";
    }
    std::cerr << "\n";
  }
  cudaFree(buffer_);
}

}  // namespace lstm
