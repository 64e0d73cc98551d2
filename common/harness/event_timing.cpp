#include "harness/event_timing.h"

#include "harness/cuda_utils.h"

namespace lstm {

TimingStats time_on_stream(const std::function<void(cudaStream_t)>& work, cudaStream_t stream,
                           int warmup, int iters) {
  for (int i = 0; i < warmup; ++i)
    work(stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));

  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> runs_ms;
  for (int i = 0; i < iters; ++i) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    work(stream);
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    runs_ms.push_back(ms);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  CUDA_CHECK(cudaDeviceSynchronize());
  return summarize_runs(std::move(runs_ms));
}

}  // namespace lstm
