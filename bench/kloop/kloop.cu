// Stand-alone driver for one generated warp-specialized GEMM kernel (f16, NN,
// `tile inspect --emit source`), to see where its k loop spends time at a given
// shape, beside cuBLAS in the same process.
//
// Built twice by build.sh from the same source: plain (timing) and with trace
// hooks inserted after the pipeline's waits (KL_TRACE). The traced build records
// clock64() per block at: the block's start, each k step's stage acquired by the
// producer (P), each consumer warpgroup's full-barrier wait returning (W) and its
// wgmma wait<1> returning (M), and prints per-step medians over the blocks.
//   kloop M N K          time (median of KL_REPS launches, L2 flushed before each)
//   KL_CUBLAS=libcublas.so.N also times cublasGemmEx on the same buffers
//   KL_PROMO=0|128|256   the tensor maps' L2 promotion (default 256, as the runtime)
//   KL_PA=P, KL_PB=P     row pitches of A and B in elements (default K and N): the
//                        kernel's bulk-copy path reads A and B only through the maps,
//                        so this times the same shape at another pitch
//   KL_STEP=S            check every S-th column of C (default 37)
//   KL_NOFLUSH=1         no L2 flush between launches
//   KL_FLUSH_ZERO=1      the flush writes zeros (as the runtime's do_bench does)
//   KL_QUEUED=1          also time with every run queued before the first is read
//                        (one event pair per run, one synchronization at the end, as
//                        the runtime's do_bench does); the default reads each run
//                        before queuing the next
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifdef KL_TRACE
// Slots per block: 0 start clock, 1 start globaltimer, 2 end globaltimer;
// P at 4 + i, then per warpgroup w: W at 4 + 64 (1 + 2w) + i, M at 4 + 64 (2 + 2w) + i.
#define KL_SLOTS 512
#define KL_STEPS 64
__device__ unsigned long long* g_kl;
__device__ __forceinline__ unsigned long long* kl_blk() {
  return g_kl + (size_t)(blockIdx.y * gridDim.x + blockIdx.x) * KL_SLOTS;
}
__device__ __forceinline__ unsigned long long kl_gt() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
#define KL_START() do { if (threadIdx.x == 0) { kl_blk()[0] = clock64(); kl_blk()[1] = kl_gt(); } } while (0)
#define KL_P(i) do { if ((i) < KL_STEPS) kl_blk()[4 + (i)] = clock64(); } while (0)
#define KL_W(i) do { if ((threadIdx.x & 127) == 0 && (i) < KL_STEPS) kl_blk()[4 + 64 * (1 + 2 * (threadIdx.x >> 7)) + (i)] = clock64(); } while (0)
#define KL_M(i) do { if ((threadIdx.x & 127) == 0 && (i) < KL_STEPS) kl_blk()[4 + 64 * (2 + 2 * (threadIdx.x >> 7)) + (i)] = clock64(); } while (0)
#define KL_END() do { if (threadIdx.x == 0) kl_blk()[2] = kl_gt(); } while (0)
// The prologue's points (prologue.py --stamps): slots 500-503.
#define KL_S(slot) do { kl_blk()[slot] = clock64(); } while (0)
#endif

#include KL_KFILE
#include "../common/tma_host.cuh"

// The maps' L2 promotion: KL_PROMO, else 256 bytes (the runtime's choice at 256-byte pitches).
static int promo() {
  const char* pe = getenv("KL_PROMO");
  return pe ? atoi(pe) : 256;
}

static double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// cublasGemmEx through dlopen (no cuBLAS headers needed): row-major C = A B as
// column-major C^T = B^T A^T.
typedef int (*CublasCreate)(void**);
typedef int (*CublasGemmEx)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int,
                            int, const void*, void*, int, int, int, int);

int main(int argc, char** argv) {
  if (argc < 4) { printf("usage: kloop M N K\n"); return 1; }
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  int reps = getenv("KL_REPS") ? atoi(getenv("KL_REPS")) : 50;
  const int pa = getenv("KL_PA") ? atoi(getenv("KL_PA")) : K, pb = getenv("KL_PB") ? atoi(getenv("KL_PB")) : N;
  const bool flush_l2 = !getenv("KL_NOFLUSH"), flush_zero = getenv("KL_FLUSH_ZERO");
  std::vector<__half> ha((size_t)M * pa), hb((size_t)K * pb), hc((size_t)M * N);
  unsigned s = 12345u + K;
  auto rnd = [&]() { s = s * 1664525u + 1013904223u; return ((s >> 9) & 0xffff) / 32768.0f - 1.0f; };
  for (auto& x : ha) x = __float2half(rnd());
  for (auto& x : hb) x = __float2half(rnd());
  __half *a, *b, *c, *c2;
  void* flush;
  const size_t flush_bytes = 256u << 20;
  CK(cudaMalloc(&a, ha.size() * 2));
  CK(cudaMalloc(&b, hb.size() * 2));
  CK(cudaMalloc(&c, hc.size() * 2));
  CK(cudaMalloc(&c2, hc.size() * 2));
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(c, 0xff, hc.size() * 2));  // NaN poison
  const int specs[][3] = KL_MAPS;
  GemmLaunch gl(KL_KNAME, specs, sizeof(specs) / sizeof(specs[0]), a, b, c, M, N, K, pa, pb, KL_BM, KL_BN,
                KL_THREADS, KL_CX, KL_CY, KL_SMEM, promo());
  const cudaLaunchConfig_t& cfg = gl.cfg;
  auto launch = [&]() { gl.launch(); };
#ifdef KL_TRACE
  // The hooks write unconditionally: the buffer exists before the first launch, and
  // the last (traced) launch below writes it again from zero.
  const int blocks = cfg.gridDim.x * cfg.gridDim.y;
  unsigned long long* dtr;
  CK(cudaMalloc(&dtr, (size_t)blocks * KL_SLOTS * 8));
  CK(cudaMemcpyToSymbol(g_kl, &dtr, sizeof dtr));
#endif

  // Check every row of a sample of columns against the f64 product.
  launch();
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(hc.data(), c, hc.size() * 2, cudaMemcpyDeviceToHost));
  const int step = getenv("KL_STEP") ? atoi(getenv("KL_STEP")) : 37;  // columns between checked ones
  double worst = max_abs_err_sampled(ha, pa, hb, pb, hc, M, N, K, step);
  bool ok = worst < 0.05 * std::sqrt((double)K);

  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto time_it = [&](auto&& f) {
    std::vector<double> t;
    for (int r = 0; r < reps + 10; ++r) {
      if (flush_l2) CK(cudaMemsetAsync(flush, flush_zero ? 0 : (r & 0xff) | 1, flush_bytes));
      CK(cudaEventRecord(e0));
      f();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 10) t.push_back(ms * 1e3);
    }
    return median(t);
  };
  double us = time_it(launch);
  if (getenv("KL_QUEUED")) {
    std::vector<cudaEvent_t> ev(2 * (reps + 10));
    for (auto& e : ev) CK(cudaEventCreate(&e));
    for (int r = 0; r < reps + 10; ++r) {
      if (flush_l2) CK(cudaMemsetAsync(flush, flush_zero ? 0 : (r & 0xff) | 1, flush_bytes));
      CK(cudaEventRecord(ev[2 * r]));
      launch();
      CK(cudaEventRecord(ev[2 * r + 1]));
    }
    CK(cudaDeviceSynchronize());
    std::vector<double> t;
    for (int r = 10; r < reps + 10; ++r) {
      float ms;
      CK(cudaEventElapsedTime(&ms, ev[2 * r], ev[2 * r + 1]));
      t.push_back(ms * 1e3);
    }
    printf("  queued: %.2f us (read one by one: %.2f)\n", median(t), us);
  }
  {  // What the flush itself takes (the time the host has to queue the timed launch).
    std::vector<double> t;
    for (int r = 0; r < 20; ++r) {
      CK(cudaEventRecord(e0));
      CK(cudaMemsetAsync(flush, flush_zero ? 0 : (r & 0xff) | 1, flush_bytes));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms * 1e3);
    }
    printf("  flush (%s, %zu MiB): %.1f us\n", flush_zero ? "zeros" : "non-zero", flush_bytes >> 20, median(t));
  }
  double tf = 2.0 * M * N * K / (us * 1e-6) / 1e12;
  printf("%s M=%d N=%d K=%d pitches=%d,%d%s grid=%dx%d cluster=%dx%d%s: %.2f us %.1f TFLOP/s, max_abs_err=%.2e %s\n", KL_TAG, M, N, K,
         pa, pb, flush_l2 ? "" : " noflush", cfg.gridDim.x, cfg.gridDim.y, KL_CX, KL_CY, cfg.numAttrs ? "" : "(off)", us, tf, worst, ok ? "ok" : "WRONG");

  const char* cl = getenv("KL_CUBLAS");
  void* h = cl ? dlopen(cl, RTLD_NOW) : nullptr;
  if (h) {
    auto create = (CublasCreate)dlsym(h, "cublasCreate_v2");
    auto gemm = (CublasGemmEx)dlsym(h, "cublasGemmEx");
    void* handle = nullptr;
    if (create && gemm && create(&handle) == 0) {
      float alpha = 1.0f, beta = 0.0f;
      auto cub = [&]() {
        int st = gemm(handle, 0, 0, N, M, K, &alpha, b, 2, pb, a, 2, pa, &beta, c2, 2, N, 68, -1);
        if (st != 0) { printf("cublasGemmEx: status %d\n", st); exit(2); }
      };
      cub();
      double cu = time_it(cub);
      printf("  cuBLAS: %.2f us %.1f TFLOP/s; tile/cuBLAS %.3f\n", cu, 2.0 * M * N * K / (cu * 1e-6) / 1e12, cu / us);
    }
  } else if (cl) {
    printf("  cuBLAS: dlopen(%s) failed: %s\n", cl, dlerror());
  }

#ifdef KL_TRACE
  const int steps = std::min((K + 63) / 64, KL_STEPS);
  CK(cudaMemset(dtr, 0, (size_t)blocks * KL_SLOTS * 8));
  if (flush_l2) CK(cudaMemsetAsync(flush, 7, flush_bytes));
  launch();
  CK(cudaDeviceSynchronize());
  std::vector<unsigned long long> tr((size_t)blocks * KL_SLOTS);
  CK(cudaMemcpy(tr.data(), dtr, tr.size() * 8, cudaMemcpyDeviceToHost));
  unsigned long long g0 = ~0ull, g1 = 0;
  std::vector<double> starts, ends;
  for (int bl = 0; bl < blocks; ++bl) g0 = std::min(g0, tr[(size_t)bl * KL_SLOTS + 1]);
  for (int bl = 0; bl < blocks; ++bl) {
    starts.push_back((tr[(size_t)bl * KL_SLOTS + 1] - g0) * 1e-3);
    ends.push_back((tr[(size_t)bl * KL_SLOTS + 2] - g0) * 1e-3);
    g1 = std::max(g1, tr[(size_t)bl * KL_SLOTS + 2]);
  }
  printf("  trace: %d blocks, start spread %.2f us (median %.2f), end median %.2f us, last %.2f us (globaltimer)\n",
         blocks, *std::max_element(starts.begin(), starts.end()), median(starts), median(ends), (g1 - g0) * 1e-3);
  {  // The prologue's points, where the kernel has them (prologue.py --stamps).
    const char* names[4] = {"block barrier passed", "producer after setmaxnreg", "consumers after setmaxnreg",
                            "early copies issued"};
    for (int k = 0; k < 4; ++k) {
      std::vector<double> v;
      for (int bl = 0; bl < blocks; ++bl) {
        unsigned long long x = tr[(size_t)bl * KL_SLOTS + 500 + k], t0 = tr[(size_t)bl * KL_SLOTS];
        if (x) v.push_back((double)(long long)(x - t0));
      }
      if (!v.empty()) printf("  prologue: %-28s %6.0f cycles after the block's start (median of %zu)\n", names[k], median(v), v.size());
    }
  }
  const int wgs = (KL_THREADS - 128) / 128;
  // Per step, medians over blocks of cycles since the block's start.
  printf("  step |      P |");
  for (int w = 0; w < wgs; ++w) printf("   W%d |   M%d |", w, w);
  printf(" dW0 | W0-P | M0-W0\n");
  double prevw = 0;
  for (int i = 0; i < steps; ++i) {
    auto col = [&](int slot) {
      std::vector<double> v;
      for (int bl = 0; bl < blocks; ++bl) {
        unsigned long long x = tr[(size_t)bl * KL_SLOTS + slot], t0 = tr[(size_t)bl * KL_SLOTS];
        if (x) v.push_back((double)(long long)(x - t0));
      }
      return median(v);
    };
    auto dcol = [&](int s1, int s0) {  // median over blocks of slot s1 - slot s0
      std::vector<double> v;
      for (int bl = 0; bl < blocks; ++bl) {
        unsigned long long x = tr[(size_t)bl * KL_SLOTS + s1], y = tr[(size_t)bl * KL_SLOTS + s0];
        if (x && y) v.push_back((double)(long long)(x - y));
      }
      return median(v);
    };
    double p = col(4 + i);
    printf("  %4d | %6.0f |", i, p);
    for (int w = 0; w < wgs; ++w) printf(" %6.0f | %6.0f |", col(4 + 64 * (1 + 2 * w) + i), col(4 + 64 * (2 + 2 * w) + i));
    double w0 = col(4 + 64 + i);
    printf(" %5.0f | %5.0f | %5.0f\n", i ? w0 - prevw : 0.0, dcol(4 + 64 + i, 4 + i), dcol(4 + 128 + i, 4 + 64 + i));
    prevw = w0;
  }
#endif
  return ok ? 0 : 1;
}
