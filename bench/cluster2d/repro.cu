// Stand-alone driver for one generated warp-specialized GEMM kernel launched in
// 2-D clusters, to find where the pipeline stalls without rebuilding the crate.
// The kernel's source (`tile inspect --emit source`) is included as RP_KFILE; its
// tiling comes in as macros (build.sh). A launch that has not finished after
// RP_TIMEOUT_MS (or REPRO_TIMEOUT_MS from the environment) is reported as a
// hang and the process exits (the context cannot be recovered). Otherwise C is
// checked against a host reference on every row of a sample of columns.
//   repro K [K ...]   (M = REPRO_M or RP_MROWS, N = REPRO_N or RP_NCOLS)
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>
#include <vector>
#include RP_KFILE
#include "../common/tma_host.cuh"

static int timeout_ms() {
  const char* t = getenv("REPRO_TIMEOUT_MS");
  return t ? atoi(t) : RP_TIMEOUT_MS;
}

static int run(int M, int N, int K) {
  std::vector<__half> ha((size_t)M * K), hb((size_t)K * N), hc((size_t)M * N);
  unsigned s = 12345u + K;
  auto rnd = [&]() { s = s * 1664525u + 1013904223u; return ((s >> 9) & 0xffff) / 32768.0f - 1.0f; };
  for (auto& x : ha) x = __float2half(rnd());
  for (auto& x : hb) x = __float2half(rnd());
  __half *a, *b, *c;
  CK(cudaMalloc(&a, ha.size() * 2));
  CK(cudaMalloc(&b, hb.size() * 2));
  CK(cudaMalloc(&c, hc.size() * 2));
  CK(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(c, 0xff, hc.size() * 2));  // NaN poison
  // The kernel's tensor maps, from its `// tile:tma` lines: {param (0: A, 1: B), box columns, rows}.
  const int specs[][3] = RP_MAPS;
  GemmLaunch gl(RP_KNAME, specs, sizeof(specs) / sizeof(specs[0]), a, b, c, M, N, K, K, N, RP_BM, RP_BN,
                RP_THREADS, RP_CX, RP_CY, RP_SMEM, 256);
  gl.launch();
  auto t_start = std::chrono::steady_clock::now();
  for (;;) {
    cudaError_t e = cudaStreamQuery(0);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) {
      printf("M=%d N=%d K=%d: launch failed: %s\n", M, N, K, cudaGetErrorString(e));
      exit(2);
    }
    if (std::chrono::steady_clock::now() - t_start > std::chrono::milliseconds(timeout_ms())) {
      printf("M=%d N=%d K=%d: HANG (not finished after %d ms)\n", M, N, K, timeout_ms());
      fflush(stdout);
      _exit(3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  CK(cudaMemcpy(hc.data(), c, hc.size() * 2, cudaMemcpyDeviceToHost));
  double worst = max_abs_err_sampled(ha, K, hb, N, hc, M, N, K, 7);
  printf("M=%d N=%d K=%d: finished, max_abs_err=%.3e %s\n", M, N, K, worst, worst < 0.05 * std::sqrt((double)K) ? "ok" : "WRONG");
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaFree(c));
  return 0;
}

int main(int argc, char** argv) {
  int M = getenv("REPRO_M") ? atoi(getenv("REPRO_M")) : RP_MROWS, N = getenv("REPRO_N") ? atoi(getenv("REPRO_N")) : RP_NCOLS;
  for (int i = 1; i < argc; ++i) run(M, N, atoi(argv[i]));
  return 0;
}
