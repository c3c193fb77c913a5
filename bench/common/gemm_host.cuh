// Host side shared by the GEMM harnesses (bench/tl_gemm, bench/wgmma): error checks,
// random inputs, the cuBLAS baseline, the error measure and the timer. Each harness
// includes it after its kernels and defines its own `from_f<T>` (device conversion from
// float) before that.
//
// Conventions: inputs uniform in [-1, 1) from a hash of the index (no host round trip);
// outputs poisoned with NaN (all-ones bytes) before a checked run; timings are the median
// of `reps` cudaEvent-timed runs after `warm` warm-up runs.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #x); exit(1); } } while (0)
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { \
  fprintf(stderr, "cuBLAS error %d at %s:%d: %s\n", (int)s_, __FILE__, __LINE__, #x); exit(1); } } while (0)

// Failed checks so far; a harness exits non-zero when it is not 0.
static int g_fail = 0;

template <typename T> __global__ void fill_random(T* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 2654435761u ^ (seed * 0x9E3779B9u + (unsigned)(i >> 32));
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    p[i] = from_f<T>((float)(x >> 8) * (2.0f / 16777216.0f) - 1.0f);  // uniform in [-1, 1)
  }
}
template <typename T> __global__ void to_float(const T* p, float* q, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    q[i] = (float)p[i];
}

template <typename T> struct DT;
template <> struct DT<half> { static constexpr cudaDataType_t v = CUDA_R_16F; static const char* name() { return "fp16"; } };
template <> struct DT<__nv_bfloat16> { static constexpr cudaDataType_t v = CUDA_R_16BF; static const char* name() { return "bf16"; } };

// Row-major C[M][N] = A * B (A stored [K][M] when ta, B stored [N][K] when tb) through
// column-major cuBLAS: C^T = B^T A^T. 16-bit inputs, f32 compute, output of type ctype.
template <typename T>
static void cublas_gemm(cublasHandle_t h, bool ta, bool tb, int M, int N, int K, const T* A, const T* B, void* C,
                        cudaDataType_t ctype) {
  const float alpha = 1.f, beta = 0.f;
  CB(cublasGemmEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, DT<T>::v,
                  tb ? K : N, A, DT<T>::v, ta ? M : K, &beta, C, ctype, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Relative Frobenius error of `run(A, B, C)` (a kernel writing the 16-bit C, poisoned
// first) against cuBLAS with f32 output, on random inputs of M x N x K; INFINITY when the
// output holds NaN or infinities.
template <typename T, typename Run>
static double rel_fro_err(cublasHandle_t h, bool ta, bool tb, int M, int N, int K, unsigned seed, Run run) {
  T *A, *B, *C; float *Cf, *R;
  CK(cudaMalloc(&A, sizeof(T) * (size_t)M * K)); CK(cudaMalloc(&B, sizeof(T) * (size_t)K * N));
  CK(cudaMalloc(&C, sizeof(T) * (size_t)M * N)); CK(cudaMalloc(&Cf, sizeof(float) * (size_t)M * N));
  CK(cudaMalloc(&R, sizeof(float) * (size_t)M * N));
  fill_random<T><<<1024, 256>>>(A, (size_t)M * K, seed);
  fill_random<T><<<1024, 256>>>(B, (size_t)K * N, seed + 7777);
  CK(cudaGetLastError());
  CK(cudaMemset(C, 0xFF, sizeof(T) * (size_t)M * N));  // poison: NaN in both fp16 and bf16
  run(A, B, C);
  CK(cudaGetLastError());
  cublas_gemm<T>(h, ta, tb, M, N, K, A, B, R, CUDA_R_32F);
  to_float<T><<<1024, 256>>>(C, Cf, (size_t)M * N);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> c((size_t)M * N), r((size_t)M * N);
  CK(cudaMemcpy(c.data(), Cf, sizeof(float) * c.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.data(), R, sizeof(float) * r.size(), cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const double d = (double)c[i] - r[i];
    num += d * d; den += (double)r[i] * r[i];
  }
  CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(Cf)); CK(cudaFree(R));
  const double err = std::sqrt(num / den);
  return std::isfinite(err) ? err : INFINITY;
}

template <typename F> static float median_ms(F f, int warm = 5, int reps = 20) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < warm; ++i) f();
  CK(cudaGetLastError());
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return 0.5f * (t[reps / 2 - 1] + t[reps / 2]);
}

// Median times in ms of `run(A, B, C)`, then of cuBLAS in the same layout (16-bit in and
// out, f32 compute), on the same random M x N x K inputs.
template <typename T, typename Run>
static std::pair<float, float> time_vs_cublas(cublasHandle_t h, bool ta, bool tb, int M, int N, int K, Run run) {
  T *A, *B, *C, *C2;
  CK(cudaMalloc(&A, sizeof(T) * (size_t)M * K)); CK(cudaMalloc(&B, sizeof(T) * (size_t)K * N));
  CK(cudaMalloc(&C, sizeof(T) * (size_t)M * N)); CK(cudaMalloc(&C2, sizeof(T) * (size_t)M * N));
  fill_random<T><<<1024, 256>>>(A, (size_t)M * K, 11);
  fill_random<T><<<1024, 256>>>(B, (size_t)K * N, 12);
  CK(cudaGetLastError());
  const float tt = median_ms([&] { run(A, B, C); });
  const float tc = median_ms([&] { cublas_gemm<T>(h, ta, tb, M, N, K, A, B, C2, DT<T>::v); });
  CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(C2));
  return {tt, tc};
}
