// lstm_configs: the standard configurations (common/standard_configs.json, compiled in), one a
// line, for scripts: scripts/bench.sh loops over them, the tests compare them with the bench's
// list. No GPU needed.
//
//   build/bin/lstm_configs            group hidden input_size batch seq_len layers flop
//                                     reference_steps training_reference (a line per
//                                     configuration: flop of the forward pass; the steps a
//                                     forward check compares; 1 if a training check compares
//                                     the gradients, i.e. the training reference fits the
//                                     budget, else 0)
//   build/bin/lstm_configs --names    canonical/H:512/I:512/B:64/T:100/L:4 (benchmark-name parts)
#include <iostream>
#include <string>

#include "core/standard_configs.h"
#include "lstm_reference.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (argc > 2 || (!mode.empty() && mode != "--names")) {
    std::cerr << "usage: lstm_configs [--names]\n";
    return 2;
  }
  for (const lstm::StandardConfig& config : lstm::standard_configs()) {
    if (mode == "--names") {
      std::cout << lstm::config_name(config) << "\n";
      continue;
    }
    const lstm::ProblemSize& s = config.size;
    std::cout << config.group << " " << s.hidden << " " << s.input_size << " " << s.batch << " "
              << s.seq_len << " " << s.layers << " " << s.flop_count() << " "
              << lstm::reference_steps(s) << " " << (lstm::training_reference_fits(s) ? 1 : 0)
              << "\n";
  }
  return 0;
}
