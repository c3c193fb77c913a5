// Host side shared by the stand-alone drivers of generated warp-specialized kernels
// (bench/cluster2d, bench/kloop): error checks and f16 tensor maps as the runtime
// (tile-runtime/src/tma.rs) encodes them.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_fp16.h>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      exit(2);                                                                        \
    }                                                                                 \
  } while (0)

typedef CUresult (*EncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static EncodeTiled encode() {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
  return (EncodeTiled)f;
}

// A rows x cols row-major f16 matrix, `pitch` elements from row to row, read in boxes of
// box_cols x box_rows with the 128-byte swizzle and L2 promotion `promo` bytes (0, 64,
// 128 or 256). As the runtime does, a geometry the engine cannot take gets a zero map,
// and the kernel (which checks the same conditions) copies element-wise instead.
static CUtensorMap map2d(void* p, unsigned long long rows, unsigned long long cols, unsigned long long pitch,
                         unsigned box_cols, unsigned box_rows, int promo) {
  CUtensorMapL2promotion pr = promo == 0     ? CU_TENSOR_MAP_L2_PROMOTION_NONE
                              : promo == 64  ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
                              : promo == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                                             : CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  CUtensorMap m;
  cuuint64_t dims[2] = {cols, rows};
  cuuint64_t strides[1] = {pitch * 2};
  cuuint32_t box[2] = {box_cols, box_rows};
  cuuint32_t es[2] = {1, 1};
  CUresult r = encode()(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, p, dims, strides, box, es,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, pr,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) memset(&m, 0, sizeof m);
  return m;
}

// One launch of a generated NN GEMM kernel `kern` (f16, C = A B) as the runtime makes
// it: the tensor maps its `// tile:tma` lines ask for (`specs`: {param (0: A, 1: B), box
// columns, rows}), blocks of `threads` over bm x bn output tiles, and clusters of cx x cy
// where both divide the grid's extents. A and B are read at row pitches pa and pb
// elements through the maps. Holds the launch's parameters, so it stays where it is made.
struct GemmLaunch {
  std::vector<CUtensorMap> maps;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[1];
  const __half *a, *b;
  __half* c;
  int M, K, N;
  std::vector<void*> args;
  const void* kern;

  template <class Kernel>
  GemmLaunch(Kernel k, const int (*specs)[3], int nmaps, const __half* a_, const __half* b_, __half* c_, int M_,
             int N_, int K_, int pa, int pb, int bm, int bn, int threads, int cx, int cy, int smem, int promo)
      : maps(nmaps), a(a_), b(b_), c(c_), M(M_), K(K_), N(N_), kern((const void*)k) {
    for (int i = 0; i < nmaps; ++i)
      maps[i] = specs[i][0] == 0 ? map2d((void*)a, M, K, pa, specs[i][1], specs[i][2], promo)
                                 : map2d((void*)b, K, N, pb, specs[i][1], specs[i][2], promo);
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cfg.gridDim = dim3((N + bn - 1) / bn, (M + bm - 1) / bm, 1);
    cfg.blockDim = dim3(threads, 1, 1);
    cfg.dynamicSmemBytes = smem;
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = cx;
    at[0].val.clusterDim.y = cy;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = (cx * cy > 1 && cfg.gridDim.x % cx == 0 && cfg.gridDim.y % cy == 0) ? 1 : 0;
    args = {&a, &b, &c, &M, &K, &N};
    for (auto& m : maps) args.push_back(&m);
  }
  GemmLaunch(const GemmLaunch&) = delete;
  GemmLaunch& operator=(const GemmLaunch&) = delete;

  void launch() { CK(cudaLaunchKernelExC(&cfg, kern, args.data())); }
};

// The largest |C - A B| over every row of the columns 0, step, 2 step, ... against the f64
// product (A and B at row pitches pa and pb, C at N); a NaN in C sticks.
static double max_abs_err_sampled(const std::vector<__half>& ha, int pa, const std::vector<__half>& hb, int pb,
                                  const std::vector<__half>& hc, int M, int N, int K, int step) {
  double worst = 0;
  for (int j = 0; j < N; j += step)
    for (int i = 0; i < M; ++i) {
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += (double)__half2float(ha[(size_t)i * pa + k]) * __half2float(hb[(size_t)k * pb + j]);
      double d = std::fabs(acc - (double)__half2float(hc[(size_t)i * N + j]));
      if (!(d <= worst)) worst = d;
    }
  return worst;
}
