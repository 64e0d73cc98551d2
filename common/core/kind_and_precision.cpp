#include "core/kind_and_precision.h"

#include <stdexcept>

namespace lstm {

const char* kind_name(StageKind kind) {
  return kind == StageKind::kTraining ? "training" : "forward";
}

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
    default:
      return "fp32";
  }
}

Tolerance default_tolerance(Precision precision) {
  if (precision != Precision::kFp32) {
    throw std::invalid_argument(std::string("a ") + precision_name(precision) +
                                " implementation must state its own error bound");
  }
  return Tolerance{};
}

}  // namespace lstm
