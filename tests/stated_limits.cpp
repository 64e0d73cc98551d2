// The largest H a stage's README states ("**Limits** ... H ≤ N at any batch") against the stage's
// own planner on the H100 (132 SMs, 227 KiB of shared memory a block) at B = 1, 4, 64 and 256.
// The build lists the stages whose README has such a line, with N as read there, in
// generated/stated_limits/stated_limits_stages.inc (tests/stated_limits.cmake). No GPU needed.
#include <cstdio>
#include <initializer_list>

#define LSTM_STATED_LIMIT(id, name, stated) \
  namespace lstm::stage_##id {              \
    int largest_on_h100(int batch);         \
  }
#include "stated_limits_stages.inc"  // each stage's largest_on_h100 (tests/stated_limits_stage.cpp)
#undef LSTM_STATED_LIMIT

namespace {

struct StatedLimit {
  const char* stage;
  int stated;                   // N of the README's "H ≤ N at any batch"
  int (*largest_on_h100)(int);  // the planner's largest H at a batch
};

#define LSTM_STATED_LIMIT(id, name, stated) {name, stated, &lstm::stage_##id::largest_on_h100},
const StatedLimit kStages[] = {
#include "stated_limits_stages.inc"
};
#undef LSTM_STATED_LIMIT

}  // namespace

int main() {
  int wrong = 0;
  for (const StatedLimit& s : kStages) {
    if (s.stated == 0) {
      std::printf("%s: its README's **Limits** line states no \"H ≤ N at any batch\"\n", s.stage);
      ++wrong;
      continue;
    }
    for (int batch : {1, 4, 64, 256}) {
      const int largest = s.largest_on_h100(batch);
      if (largest != s.stated) {
        std::printf(
            "%s: its README states H <= %d at any batch; its planner's largest H at B = %d "
            "on the H100 is %d\n",
            s.stage, s.stated, batch, largest);
        ++wrong;
      }
    }
  }
  std::printf("%zu stages' stated largest H checked at B = 1, 4, 64 and 256: %d wrong\n",
              sizeof kStages / sizeof kStages[0], wrong);
  return wrong == 0 ? 0 : 1;
}
