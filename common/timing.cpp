#include "timing.h"

#include <algorithm>
#include <stdexcept>

#include "cuda_utils.h"

namespace lstm {

TimingStats summarize_runs(std::vector<double> runs_ms) {
  if (runs_ms.empty()) throw std::invalid_argument("summarize_runs: no runs");
  TimingStats stats;
  stats.runs_ms = runs_ms;
  std::sort(runs_ms.begin(), runs_ms.end());
  const std::size_t n = runs_ms.size();
  stats.median_ms = n % 2 ? runs_ms[n / 2] : 0.5 * (runs_ms[n / 2 - 1] + runs_ms[n / 2]);
  stats.min_ms = runs_ms.front();
  stats.max_ms = runs_ms.back();
  return stats;
}

TimingStats time_forward(const std::function<void(cudaStream_t)>& forward, cudaStream_t stream,
                         int warmup, int iters) {
  for (int i = 0; i < warmup; ++i)
    forward(stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));

  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> runs_ms;
  for (int i = 0; i < iters; ++i) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    forward(stream);
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
