// Host side shared by the stand-alone drivers of generated warp-specialized kernels
// (bench/cluster2d, bench/kloop): error checks and f16 tensor maps as the runtime
// (tile-runtime/src/tma.rs) encodes them.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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
