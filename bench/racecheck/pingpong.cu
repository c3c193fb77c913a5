// Does compute-sanitizer's racecheck accept a shared-memory exchange after two
// warpgroups took turns on named barriers? A reduction of the barrier pattern of
// tile's head-dim-128 attention kernels (examples/flash_attention.rs): 384 threads,
// the last 128 (the producer) leave at once, the two consumer warpgroups take
// turns `iters` times on barriers 2 and 3 (bar.sync to wait, bar.arrive to pass),
// then each thread writes its own 8 floats of a shared tile, all 256 meet at
// bar.sync 1, 256, and each reads 4 floats another warpgroup wrote. By the PTX
// memory model the exchange is ordered by barrier 1 in every mode below.
//   nvcc -arch=sm_90a -fmad=false -o pingpong pingpong.cu
//   compute-sanitizer --tool racecheck ./pingpong MODE   (MODE 0..5)
// MODE 0: no turns. 1: warpgroup 0 opens its own first turn (bar.arrive on its
// own barrier). 2: warpgroup 1 opens it (arrives on warpgroup 0's barrier).
// 3: as 2, and the producer warps stay (no early exit). 4: as 2, then both warpgroups
// meet once on barrier 2 and once on barrier 3 (bar.sync) before the exchange. 5: as 2,
// the producer warps stay, and the exchange meets at __syncthreads() (all 384).
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ void arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void sync(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }

__global__ void __launch_bounds__(384, 1) turns(int mode, int iters, float* out) {
  __shared__ __align__(16) float tile[256 * 8];
  const int t = threadIdx.x;
  const bool stay = mode == 3 || mode == 5;
  if (t >= 256 && !stay) return;
  if (t >= 256) {
    out[blockIdx.x * 384 + t] = 0.0f;
    if (mode == 5) {
      __syncthreads();
      __syncthreads();
    }
    return;
  }
  const int wg = t / 128;
  float acc = (float)t;
  if (mode != 0) {
    __syncwarp();
    if (mode == 1 && wg == 0) arrive(2);
    if (mode >= 2 && wg == 1) arrive(2);
    for (int i = 0; i < iters; ++i) {
      __syncwarp();
      sync(2 + wg);  // my turn
      acc = acc * 1.0001f + (float)i;
      __syncwarp();
      arrive(3 - wg);  // pass it
    }
    __syncwarp();
    if (wg == 0) sync(2);  // the turn warpgroup 1 passed last
    if (mode == 4) {
      sync(2);
      sync(3);
    }
  }
  if (mode == 5) __syncthreads(); else sync(1);
  for (int j = 0; j < 8; ++j) tile[t * 8 + j] = acc + (float)j;
  if (mode == 5) __syncthreads(); else sync(1);
  const float4 v = *reinterpret_cast<const float4*>(&tile[((t + 128) % 256) * 8 + 4 * (t % 2)]);
  out[blockIdx.x * 384 + t] = v.x + v.y + v.z + v.w;
}

int main(int argc, char** argv) {
  const int mode = argc > 1 ? atoi(argv[1]) : 1;
  const int iters = argc > 2 ? atoi(argv[2]) : 5;
  const int blocks = 4;
  float* d;
  cudaMalloc(&d, blocks * 384 * sizeof(float));
  turns<<<blocks, 384>>>(mode, iters, d);
  float h[blocks * 384];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  const cudaError_t e = cudaGetLastError();
  // Thread t reads warpgroup-mate-of-the-other-side u = (t + 128) % 256, whose acc
  // after `iters` turns is the same recurrence from u.
  int bad = 0;
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < 256; ++t) {
      const int u = (t + 128) % 256;
      float acc = (float)u;
      if (mode != 0)
        for (int i = 0; i < iters; ++i) acc = acc * 1.0001f + (float)i;
      const int j0 = 4 * (t % 2);
      float want = 0.0f;
      for (int j = j0; j < j0 + 4; ++j) want += acc + (float)j;
      if (h[b * 384 + t] != want) ++bad;
    }
  printf("mode %d iters %d: %s, %d mismatches\n", mode, iters, cudaGetErrorString(e), bad);
  cudaFree(d);
  return bad != 0 || e != cudaSuccess;
}
