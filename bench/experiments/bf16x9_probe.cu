// Issue 23 (session 76): does cuBLAS run FP32 GEMMs by BF16x9 emulation on sm_90, how fast, and how
// close to FP64? The shapes of the FP32 training pass's GEMMs at H = 1024, B = 4, T = 100:
// dW (4H x H) = dz (4H x TB) . h^T (TB x H): M = 1024 (H, column-major rows), N = 4096, K = 400;
// and the input product (4H x TB) = W_ih (4H x I) . x: M = 4096, N = 400, K = 1024.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#define CK(x)                                                    \
  do {                                                           \
    auto e = (x);                                                \
    if (e != 0) {                                                \
      printf("error %d at %s:%d\n", (int)e, __FILE__, __LINE__); \
      return 1;                                                  \
    }                                                            \
  } while (0)
int probe(cublasHandle_t h, int m, int n, int k) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> A(size_t(m) * k), B(size_t(k) * n), C(size_t(m) * n);
  for (auto& v : A)
    v = u(rng);
  for (auto& v : B)
    v = u(rng);
  float *dA, *dB, *dC;
  CK(cudaMalloc(&dA, A.size() * 4));
  CK(cudaMalloc(&dB, B.size() * 4));
  CK(cudaMalloc(&dC, C.size() * 4));
  CK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
  const float one = 1.f, zero = 0.f;
  struct Mode {
    const char* name;
    cublasComputeType_t type;
    cublasEmulationStrategy_t strategy;
  };
  const Mode modes[] = {
      {"fp32", CUBLAS_COMPUTE_32F, CUBLAS_EMULATION_STRATEGY_DEFAULT},
      {"bf16x9 performant", CUBLAS_COMPUTE_32F_EMULATED_16BFX9,
       CUBLAS_EMULATION_STRATEGY_PERFORMANT},
      {"bf16x9 eager", CUBLAS_COMPUTE_32F_EMULATED_16BFX9, CUBLAS_EMULATION_STRATEGY_EAGER},
      {"tf32 (not FP32)", CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_EMULATION_STRATEGY_DEFAULT}};
  for (const Mode& mode : modes) {
    CK(cublasSetEmulationStrategy(h, mode.strategy));
    auto run = [&] {
      return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, CUDA_R_32F, m, dB,
                          CUDA_R_32F, k, &zero, dC, CUDA_R_32F, m, mode.type, CUBLAS_GEMM_DEFAULT);
    };
    cublasStatus_t st = run();
    if (st != CUBLAS_STATUS_SUCCESS) {
      printf("m=%d n=%d k=%d %-18s status %d\n", m, n, k, mode.name, (int)st);
      continue;
    }
    std::vector<float> ms;
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 23; ++i) {
      cudaEventRecord(a);
      run();
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float t;
      cudaEventElapsedTime(&t, a, b);
      if (i >= 3) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    CK(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost));
    double err = 0, ref_norm = 0;  // 512 sampled entries against FP64
    for (int s = 0; s < 512; ++s) {
      const int i = (s * 7919) % m, j = (s * 104729) % n;
      double r = 0;
      for (int q = 0; q < k; ++q)
        r += double(A[size_t(q) * m + i]) * B[size_t(j) * k + q];
      err = std::max(err, std::fabs(r - C[size_t(j) * m + i]));
      ref_norm = std::max(ref_norm, std::fabs(r));
    }
    printf(
        "m=%d n=%d k=%d %-18s median %.4f ms (min %.4f)  %.1f TFLOP/s  max err %.3e (of max |ref| "
        "%.2f)\n",
        m, n, k, mode.name, ms[ms.size() / 2], ms[0], 2.0 * m * n * k / ms[ms.size() / 2] / 1e9,
        err, ref_norm);
  }
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  return 0;
}
int main() {
  cublasHandle_t h;
  CK(cublasCreate(&h));
  int version;
  cublasGetVersion(h, &version);
  printf("cuBLAS %d\n", version);
  probe(h, 1024, 4096, 400);
  probe(h, 4096, 400, 1024);
  probe(h, 512, 2048, 6400);  // the canonical config's dW (H = 512, B = 64, T = 100)
  cublasDestroy(h);
}
