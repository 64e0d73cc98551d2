#include "core/timing_stats.h"

#include <algorithm>
#include <stdexcept>

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

}  // namespace lstm
