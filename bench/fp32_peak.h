/*! \file fp32_peak.h
 *  \brief The measured FP32 FMA rate of the GPU: the ceiling the plots compare stages with.
 */
#pragma once

namespace lstm::bench {

/// Runs a kernel of independent FMAs on every SM; returns its fastest time in ms over several
/// runs and sets `flops` to the floating-point operations it performs (2 per FMA).
double measure_fp32_fma_ms(int sm_count, double* flops);

}  // namespace lstm::bench
