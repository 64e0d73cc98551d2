// Issue 23: are there faster FP32 algorithms than cuBLAS's default choice for the FP32 training
// pass's GEMMs? For each shape (training 13's four at H = 1024 and 512, training 04's five at
// H = 2048, B = 64; T = 100, I = H): cublasSgemm's time, then every candidate that
// cublasLtMatmulAlgoGetHeuristic offers (up to 32, FP32 compute, 32 MiB of workspace), each timed
// (median of 20 after 3 warm-ups), with its largest error against an FP64 product at 256 sampled
// entries. argv[1], if given, picks the shapes whose name contains it (e.g. H2048). Build:
//   nvcc -O2 -std=c++17 -arch=sm_90 fp32_gemm_candidates.cu -lcublasLt -lcublas -o candidates
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <utility>
#include <vector>
#define CHECK(x)                                         \
  do {                                                   \
    if (int e = static_cast<int>(x)) {                   \
      std::printf("error %d at line %d\n", e, __LINE__); \
      std::exit(1);                                      \
    }                                                    \
  } while (0)

struct Shape {
  const char* name;
  bool ta, tb;
  int m, n, k;
};

float median_ms(const std::function<void()>& work) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> runs;
  for (int i = 0; i < 23; ++i) {
    CHECK(cudaEventRecord(a));
    work();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 3) runs.push_back(ms);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

int main(int argc, char** argv) {  // argv[1]: only the shapes whose name contains it
  cublasHandle_t blas;
  cublasLtHandle_t lt;
  CHECK(cublasCreate(&blas));
  CHECK(cublasLtCreate(&lt));
  const size_t workspace_bytes = 32u << 20;
  void* workspace;
  CHECK(cudaMalloc(&workspace, workspace_bytes));
  const Shape shapes[] = {
      {"input product H1024 B4 (T,N 4096x400x1024)", true, false, 4096, 400, 1024},
      {"dx            H1024 B4 (N,N 1024x400x4096)", false, false, 1024, 400, 4096},
      {"dW            H1024 B4 (N,T 1024x4096x400)", false, true, 1024, 4096, 400},
      {"input product H1024 B8 (T,N 4096x800x1024)", true, false, 4096, 800, 1024},
      {"dx            H1024 B8 (N,N 1024x800x4096)", false, false, 1024, 800, 4096},
      {"dW            H1024 B8 (N,T 1024x4096x800)", false, true, 1024, 4096, 800},
      {"input product H512 B1 (T,N 2048x100x512)", true, false, 2048, 100, 512},
      {"dx            H512 B1 (N,N 512x100x2048)", false, false, 512, 100, 2048},
      {"dW            H512 B1 (N,T 512x2048x100)", false, true, 512, 2048, 100},
      {"forward step  H2048 B64 (T,N 8192x64x2048)", true, false, 8192, 64, 2048},
      {"backward step H2048 B64 (N,N 2048x64x8192)", false, false, 2048, 64, 8192},
      {"input product H2048 B64 (T,N 8192x6400x2048)", true, false, 8192, 6400, 2048},
      {"dx            H2048 B64 (N,N 2048x6400x8192)", false, false, 2048, 6400, 8192},
      {"dW            H2048 B64 (N,T 2048x8192x6400)", false, true, 2048, 8192, 6400}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  for (const Shape& s : shapes) {
    if (argc > 1 && !std::strstr(s.name, argv[1])) continue;
    const int a_rows = s.ta ? s.k : s.m, a_cols = s.ta ? s.m : s.k;
    const int b_rows = s.tb ? s.n : s.k, b_cols = s.tb ? s.k : s.n;
    std::vector<float> A(size_t(a_rows) * a_cols), B(size_t(b_rows) * b_cols), C(size_t(s.m) * s.n);
    for (float& v : A)
      v = uniform(rng);
    for (float& v : B)
      v = uniform(rng);
    // The FP64 product at 256 sampled entries (i, j): op(A)(i,p) * op(B)(p,j), column-major.
    std::vector<std::pair<int, int>> at;
    std::vector<double> ref;
    for (int q = 0; q < 256; ++q) {
      const int i = static_cast<int>((q * 7919ll) % s.m),
                j = static_cast<int>((q * 104729ll) % s.n);
      double sum = 0.0;
      for (int p = 0; p < s.k; ++p)
        sum += double(s.ta ? A[size_t(i) * a_rows + p] : A[size_t(p) * a_rows + i]) *
               (s.tb ? B[size_t(p) * b_rows + j] : B[size_t(j) * b_rows + p]);
      at.push_back({i, j});
      ref.push_back(sum);
    }
    float *dA, *dB, *dC;
    CHECK(cudaMalloc(&dA, A.size() * 4));
    CHECK(cudaMalloc(&dB, B.size() * 4));
    CHECK(cudaMalloc(&dC, C.size() * 4));
    CHECK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
    auto error = [&] {
      CHECK(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost));
      double worst = 0;
      for (size_t q = 0; q < at.size(); ++q)
        worst = std::max(worst, std::abs(C[size_t(at[q].second) * s.m + at[q].first] - ref[q]));
      return worst;
    };
    const float one = 1.f, zero = 0.f;
    const cublasOperation_t ta = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                            tb = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    auto sgemm = [&] {
      CHECK(cublasSgemm(blas, ta, tb, s.m, s.n, s.k, &one, dA, a_rows, dB, b_rows, &zero, dC, s.m));
    };
    const double flop = 2.0 * s.m * s.n * s.k;
    float ms = median_ms(sgemm);
    std::printf("%s\n  cublasSgemm      %8.4f ms %6.1f TFLOP/s  max err %.3e\n", s.name, ms,
                flop / ms / 1e9, error());
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, a_rows, a_cols, a_rows));
    CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, b_rows, b_cols, b_rows));
    CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, s.m, s.n, s.m));
    cublasLtMatmulPreference_t pref;
    CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &workspace_bytes, sizeof(workspace_bytes)));
    cublasLtMatmulHeuristicResult_t found[32];
    int count = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 32, found, &count));
    float best = 1e9;
    for (int i = 0; i < count; ++i) {
      auto run = [&] {
        CHECK(cublasLtMatmul(lt, desc, &one, dA, la, dB, lb, &zero, dC, lc, dC, lc, &found[i].algo,
                             workspace, workspace_bytes, 0));
      };
      float t = median_ms(run);
      best = std::min(best, t);
      std::printf("  lt candidate %2d  %8.4f ms %6.1f TFLOP/s  max err %.3e  workspace %zu\n", i, t,
                  flop / t / 1e9, error(), found[i].workspaceSize);
    }
    std::printf("  best of %d candidates %.4f ms: %.2fx cublasSgemm's time\n", count, best,
                best / ms);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
  }
  return 0;
}
