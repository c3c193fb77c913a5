// How many clusters of n blocks the GPU can hold at once, for a block shaped like the
// warp-specialized 128 x 64 GEMM tile (384 threads, one block per SM by its shared memory).
// A grid that needs more clusters than this runs a second wave. No project code is used.
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a clusters.cu -o clusters && ./clusters
#include <cuda_runtime.h>
#include <cstdio>

__global__ void __launch_bounds__(384, 1) body(int* out) {
  extern __shared__ int smem[];
  smem[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (out) out[blockIdx.x] = smem[(threadIdx.x + 1) % blockDim.x];
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  std::printf("SMs: %d\n", sms);
  for (int smem_kib : {100, 120}) {
    const int smem = smem_kib * 1024;
    cudaFuncSetAttribute(body, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    cudaFuncSetAttribute(body, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    for (int n : {1, 2, 4, 8, 16}) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(128, 1, 1);
      cfg.blockDim = dim3(384, 1, 1);
      cfg.dynamicSmemBytes = smem;
      cudaLaunchAttribute attr;
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = n;
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      int clusters = -1;
      cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, body, &cfg);
      if (e != cudaSuccess) {
        std::printf("shared %3d KiB, clusters of %2d: %s\n", smem_kib, n, cudaGetErrorString(e));
        cudaGetLastError();
        continue;
      }
      std::printf("shared %3d KiB, clusters of %2d: %3d at once = %3d blocks (of %d SMs)\n", smem_kib, n,
                  clusters, clusters * n, sms);
    }
  }
  return 0;
}
