// GPU test and benchmark of tile-core/src/codegen/tl/tma.cuh with tl/wgmma.cuh (sm_90a):
// a warp-specialized GEMM written the way the code generator is meant to emit it.
//
//   - one producer warpgroup (the last one): setmaxnreg.dec, one elected thread issues
//     the TMA loads of every stage (tl::tma::load_tile, 128-byte swizzle) on full/empty
//     mbarrier pairs (tl::tma::Pipe);
//   - WGS consumer warpgroups: setmaxnreg.inc, tl::wg::MmaAsync with one wgmma group in
//     flight, releasing a stage once the wgmma that read it completed;
//   - persistent CTAs (grid <= SMs x blocks/SM) walking a grouped rasterization of the
//     output tiles, the producer running ahead into the next tile while the consumers store;
//   - epilogue: direct 4-byte stores from the accumulators (EPI 0), or staged through a
//     shared tile in the TMA layout and written by TMA stores (EPI 1);
//   - ragged M, N, K from the TMA out-of-bounds zero fill (loads) and clipping (stores);
//     shapes whose strides are not 16-byte multiples (K or N not a multiple of 8) fall back
//     to the cp.async kernel of harness.cu.
// Checked element by element against cuBLAS (f32 output) and timed against cuBLAS in the
// same process over the shapes of issue 10. Build: run.sh; run: run_prebuilt.sh.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define TL_TMA_WAIT_LIMIT (1ll << 26)  // a lost phase traps (seconds) instead of hanging
#define WGH_KERNELS_ONLY
#include "harness.cu"
#include "../../tile-core/src/codegen/tl/tma.cuh"

__device__ __forceinline__ void bar_sync_named(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <typename T> __device__ __forceinline__ unsigned pack2(float x, float y);
template <> __device__ __forceinline__ unsigned pack2<half>(float x, float y) {
  __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<unsigned*>(&h);
}
template <> __device__ __forceinline__ unsigned pack2<__nv_bfloat16>(float x, float y) {
  __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<unsigned*>(&h);
}

// Tile t of the grouped rasterization: GROUP tile rows at a time, rows fastest.
__device__ __forceinline__ void tile_of(int t, int nbm, int nbn, int group, int& tm, int& tn) {
  const int per = group * nbn, first = (t / per) * group, gm = min(nbm - first, group), r = t % per;
  tm = first + r % gm;
  tn = r / gm;
}

template <int WGS, int MINB> struct Regs {
  // The producer keeps 40 registers; the consumers share the rest of the block's part of
  // the register file (64K registers per SM), capped at 240.
  static constexpr int DEC = 40;
  static constexpr int RAW = (65536 / MINB - 128 * DEC) / (128 * WGS);
  static constexpr int INC = (RAW > 240 ? 240 : RAW) & ~7;
};

template <typename T, int BM, int BN, int BK, int WGS, int S, bool TA, bool TB, int EPI>
struct WsLayout {
  static constexpr int A_TILE = BM * BK, B_TILE = BK * BN;
  static constexpr int C_BYTES = EPI == 1 ? BM * BN * 2 : 0;
  static constexpr int PIPE_OFF = 2 * S * (A_TILE + B_TILE) + C_BYTES;
  static constexpr int SMEM = PIPE_OFF + (int)sizeof(tl::tma::Pipe<S>) + 1024;
};

template <typename T, int BM, int BN, int BK, int WGS, int S, bool TA, bool TB, int MINB, int EPI>
__global__ void __launch_bounds__(128 * (WGS + 1), MINB)
ws_gemm(const __grid_constant__ tl::tma::Desc da, const __grid_constant__ tl::tma::Desc db,
        const __grid_constant__ tl::tma::Desc dc, T* __restrict__ c, int M, int N, int K, int group) {
  using Pipe = tl::tma::Pipe<S>;
  using Mma = tl::wg::MmaAsync<T, BM, BN, BK, WGS, TA, TB>;
  using L = WsLayout<T, BM, BN, BK, WGS, S, TA, TB, EPI>;
  constexpr int REGS = tl::wg::acc_regs<BM, BN, WGS>(), MW = BM / WGS;
  constexpr unsigned STAGE_BYTES = tl::tma::tile_bytes<BM, BK>() + tl::tma::tile_bytes<BK, BN>();
  unsigned char* sm = smem1024();
  T* a_s = reinterpret_cast<T*>(sm);
  T* b_s = a_s + S * L::A_TILE;
  T* c_s = b_s + S * L::B_TILE;  // EPI 1 only
  Pipe* pipe = reinterpret_cast<Pipe*>(sm + L::PIPE_OFF);
  const int nbm = (M + BM - 1) / BM, nbn = (N + BN - 1) / BN, tiles = nbm * nbn, nk = (K + BK - 1) / BK;
  if (threadIdx.x == 0) pipe->init(4 * WGS);
  if (threadIdx.x == 128 * WGS) {
    tl::tma::prefetch(&da);
    tl::tma::prefetch(&db);
    if (EPI == 1) tl::tma::prefetch(&dc);
  }
  __syncthreads();
  if (threadIdx.x >= 128 * WGS) {
    // ---- producer warpgroup ----
    tl::tma::setmaxnreg_dec<Regs<WGS, MINB>::DEC>();
    if (threadIdx.x == 128 * WGS) {
      typename Pipe::State st;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        tile_of(t, nbm, nbn, group, tm, tn);
        const int bm0 = tm * BM, bn0 = tn * BN;
        for (int kt = 0; kt < nk; ++kt) {
          pipe->producer_acquire(st, STAGE_BYTES);
          tl::tma::Barrier* fb = pipe->full_bar(st);
          T* as = a_s + st.stage * L::A_TILE;
          T* bs = b_s + st.stage * L::B_TILE;
          if (TA) tl::tma::load_tile<BK, BM>(as, &da, fb, kt * BK, bm0);
          else tl::tma::load_tile<BM, BK>(as, &da, fb, bm0, kt * BK);
          if (TB) tl::tma::load_tile<BN, BK>(bs, &db, fb, bn0, kt * BK);
          else tl::tma::load_tile<BK, BN>(bs, &db, fb, kt * BK, bn0);
          st.advance();
        }
      }
    }
  } else {
    // ---- consumer warpgroups ----
    tl::tma::setmaxnreg_inc<Regs<WGS, MINB>::INC>();
    const int g = threadIdx.x >> 7;
    const bool issuer = (threadIdx.x & 127) == 0;
    typename Pipe::State st;
    float acc[REGS];
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      tile_of(t, nbm, nbn, group, tm, tn);
      const int bm0 = tm * BM, bn0 = tn * BN;
#pragma unroll
      for (int s = 0; s < REGS; ++s) acc[s] = 0.f;
      typename Pipe::State prev = st;
      for (int kt = 0; kt < nk; ++kt) {
        pipe->consumer_wait(st);
        Mma::issue(a_s + st.stage * L::A_TILE, b_s + st.stage * L::B_TILE, acc);
        Mma::template wait<1>(acc);
        if (kt > 0) pipe->consumer_release(prev);
        prev = st;
        st.advance();
      }
      Mma::template wait<0>(acc);
      if (nk > 0) pipe->consumer_release(prev);
      if (EPI == 0) {
        if ((N & 1) == 0) {
#pragma unroll
          for (int s = 0; s < REGS; s += 2) {
            int i, j;
            tl::wg::acc_coord<BM, BN, WGS>(s, i, j);
            if (bm0 + i < M && bn0 + j < N)
              *reinterpret_cast<unsigned*>(&c[(long long)(bm0 + i) * N + bn0 + j]) = pack2<T>(acc[s], acc[s + 1]);
          }
        } else {
#pragma unroll
          for (int s = 0; s < REGS; ++s) {
            int i, j;
            tl::wg::acc_coord<BM, BN, WGS>(s, i, j);
            if (bm0 + i < M && bn0 + j < N) c[(long long)(bm0 + i) * N + bn0 + j] = from_f<T>(acc[s]);
          }
        }
      } else {
        // The previous tile's stores must have read this warpgroup's rows of c_s.
        if (issuer) tl::tma::store_wait_read<0>();
        bar_sync_named(1 + g, 128);
#pragma unroll
        for (int s = 0; s < REGS; s += 2) {
          int i, j;
          tl::wg::acc_coord<BM, BN, WGS>(s, i, j);
          *reinterpret_cast<unsigned*>(&c_s[tl::wg::smem_offset<BM, BN>(i, j)]) = pack2<T>(acc[s], acc[s + 1]);
        }
        tl::tma::fence_proxy_async();
        bar_sync_named(1 + g, 128);
        if (issuer) {
#pragma unroll
          for (int p = 0; p < BN / 64; ++p) tl::tma::store_2d(&dc, c_s + p * BM * 64 + g * MW * 64, bn0 + 64 * p, bm0 + g * MW);
          tl::tma::store_commit();
        }
      }
    }
    if (EPI == 1 && issuer) tl::tma::store_wait_read<0>();
  }
}

#define WS_INST(T, BM, BN, WGS, S, TA, TB, MINB, EPI)                                                          \
  template __global__ void ws_gemm<T, BM, BN, 64, WGS, S, TA, TB, MINB, EPI>(                                 \
      const __grid_constant__ tl::tma::Desc, const __grid_constant__ tl::tma::Desc,                          \
      const __grid_constant__ tl::tma::Desc, T*, int, int, int, int);

#ifdef WS_KERNELS_ONLY
WS_INST(half, 128, 256, 2, 4, false, false, 1, 0)
WS_INST(half, 128, 256, 2, 3, false, false, 1, 1)
WS_INST(half, 128, 128, 1, 4, false, false, 2, 0)
#else
// ----------------------------------------------------------------------------
// Host side.
// ----------------------------------------------------------------------------
#include "../common/gemm_host.cuh"
#include <cudaTypedefs.h>
#include <cstring>
#include <string>

static PFN_cuTensorMapEncodeTiled_v12000 g_encode = nullptr;

// A row-major rows x cols matrix of 2-byte elements as a 2-D tensor map with a {64, box_rows}
// box and the 128-byte swizzle: the layout of tl::wg::smem_offset panels.
template <typename T>
static bool encode(tl::tma::Desc* d, const T* p, long long rows, long long cols, int box_rows) {
  static_assert(sizeof(tl::tma::Desc) == sizeof(CUtensorMap), "Desc is a CUtensorMap");
  if (cols % 8 != 0 || (reinterpret_cast<uintptr_t>(p) & 15) != 0) return false;
  const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
  const cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
  const cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
  const cuuint32_t estr[2] = {1, 1};
  const CUresult r = g_encode(reinterpret_cast<CUtensorMap*>(d),
                              DT<T>::v == CUDA_R_16F ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                              2, const_cast<T*>(p), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) { fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", (int)r); exit(1); }
  return true;
}

static int g_sms = 132;

// The fallback when TMA is illegal (a stride not a multiple of 16 bytes): the cp.async
// kernel of harness.cu, 128x128x64, 3 stages, the default schedule.
template <typename T, bool TA, bool TB> static void fallback(const T* A, const T* B, T* C, int M, int N, int K) {
  constexpr int S = 3, SMEM = S * (128 + 128) * 64 * 2 + 1024;
  auto k = wg_gemm<T, 128, 128, 64, 1, S, 2, false, TA, TB, 2>;
  static bool init = false;
  if (!init) { CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM)); init = true; }
  k<<<dim3((N + 127) / 128, (M + 127) / 128), 128, SMEM>>>(A, B, C, M, N, K);
}

// grid: 0 = persistent (SMs x blocks/SM), -1 = one CTA per tile, > 0 = that many CTAs.
template <typename T, int BM, int BN, int WGS, int S, bool TA, bool TB, int MINB, int EPI>
struct Ws {
  using L = WsLayout<T, BM, BN, 64, WGS, S, TA, TB, EPI>;
  static constexpr int SMEM = L::SMEM;
  static inline int grid = 0, group = 8;
  static inline bool last_fallback = false;
  static auto kern() { return ws_gemm<T, BM, BN, 64, WGS, S, TA, TB, MINB, EPI>; }
  static void run(const T* A, const T* B, T* C, int M, int N, int K) {
    static bool init = false;
    if (!init) { CK(cudaFuncSetAttribute(kern(), cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM)); init = true; }
    // The tensor maps are encoded once per (pointers, shape), as the launcher caches them.
    static tl::tma::Desc da, db, dc;
    static const void* key[3] = {nullptr, nullptr, nullptr};
    static int kmnk[3] = {0, 0, 0};
    if (key[0] != A || key[1] != B || key[2] != C || kmnk[0] != M || kmnk[1] != N || kmnk[2] != K) {
      bool ok = TA ? encode(&da, A, K, M, 64) : encode(&da, A, M, K, BM);
      ok = ok && (TB ? encode(&db, B, N, K, BN) : encode(&db, B, K, N, 64));
      const bool okc = EPI == 0 || encode(&dc, C, M, N, BM / WGS);
      last_fallback = !(ok && okc);
      key[0] = A; key[1] = B; key[2] = C; kmnk[0] = M; kmnk[1] = N; kmnk[2] = K;
    }
    if (last_fallback) { fallback<T, TA, TB>(A, B, C, M, N, K); return; }
    if (EPI == 0) dc = da;
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    const int g = grid == 0 ? std::min(tiles, g_sms * MINB) : grid < 0 ? tiles : std::min(grid, tiles);
    kern()<<<g, 128 * (WGS + 1), SMEM>>>(da, db, dc, C, M, N, K, group);
  }
  static std::string name() {
    char b[128];
    snprintf(b, sizeof b, "ws %dx%dx64 wg%d+1 s%d %s g%d%s", BM, BN, WGS, S, EPI ? "tma-st" : "direct", group,
             grid == 0 ? " pers" : grid < 0 ? " 1/tile" : " fixed");
    return b;
  }
};

template <typename T, typename W>
static void check(cublasHandle_t h, const char* lay, bool ta, bool tb, int M, int N, int K, unsigned seed) {
  T *A, *B, *C; float *Cf, *R;
  const size_t MN = (size_t)M * N;
  CK(cudaMalloc(&A, sizeof(T) * (size_t)M * K)); CK(cudaMalloc(&B, sizeof(T) * (size_t)K * N));
  CK(cudaMalloc(&C, sizeof(T) * MN)); CK(cudaMalloc(&Cf, sizeof(float) * MN)); CK(cudaMalloc(&R, sizeof(float) * MN));
  fill_random<T><<<1024, 256>>>(A, (size_t)M * K, seed);
  fill_random<T><<<1024, 256>>>(B, (size_t)K * N, seed + 7777);
  CK(cudaMemset(C, 0xFF, sizeof(T) * MN));
  W::run(A, B, C, M, N, K);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  cublas_gemm<T>(h, ta, tb, M, N, K, A, B, R, CUDA_R_32F);
  to_float<T><<<1024, 256>>>(C, Cf, MN);
  CK(cudaDeviceSynchronize());
  std::vector<float> c(MN), r(MN);
  CK(cudaMemcpy(c.data(), Cf, sizeof(float) * MN, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.data(), R, sizeof(float) * MN, cudaMemcpyDeviceToHost));
  CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(Cf)); CK(cudaFree(R));
  const double rel = DT<T>::v == CUDA_R_16F ? 0x1p-10 : 0x1p-7;
  size_t bad = 0, first_bad = (size_t)-1;
  double num = 0, den = 0;
  for (size_t x = 0; x < MN; ++x) {
    const double d = (double)c[x] - r[x];
    if (!(std::fabs(d) <= std::fabs(r[x]) * rel + 2e-3)) { if (!bad) first_bad = x; bad++; }
    num += d * d; den += (double)r[x] * r[x];
  }
  const double fro = std::sqrt(num / den);
  const bool ok = bad == 0 && fro < 1e-2;
  if (!ok) g_fail++;
  printf("check %-4s %s %-34s grid %4d %5dx%5dx%5d%s  rel_fro_err %.3e  %zu/%zu out of tolerance", DT<T>::name(), lay,
         W::name().c_str(), W::grid, M, N, K, W::last_fallback ? " (fallback)" : "", fro, bad, MN);
  if (bad) printf(" (first at (%zu, %zu): %g vs %g)", first_bad / N, first_bad % N, c[first_bad], r[first_bad]);
  printf("  %s\n", ok ? "ok" : "FAIL");
}

struct Row { std::string dtype, kernel; int m, n, k; bool fb; double tf, cublas_tf; };
static std::vector<Row> g_rows;
template <typename T, typename W> static void bench(cublasHandle_t h, int M, int N, int K) {
  const double flop = 2.0 * M * N * K;
  const auto [tt, tc] = time_vs_cublas<T>(h, false, false, M, N, K,
                                          [&](const T* A, const T* B, T* C) { W::run(A, B, C, M, N, K); });
  g_rows.push_back({DT<T>::name(), W::name(), M, N, K, W::last_fallback, flop / (tt * 1e-3) / 1e12,
                    flop / (tc * 1e-3) / 1e12});
  printf("bench %s %-34s %5dx%5dx%5d%s  %.4f ms  cublas %.4f ms  %.1f%%\n", DT<T>::name(), W::name().c_str(), M, N, K,
         W::last_fallback ? " (fallback)" : "", tt, tc, 100.0 * tc / tt);
}
static void print_table() {
  printf("\n%-5s %-34s %17s %9s %9s %7s\n", "dtype", "kernel (NN)", "M x N x K", "TFLOP/s", "cuBLAS", "ratio");
  for (auto& r : g_rows) {
    char shape[40];
    snprintf(shape, sizeof shape, "%dx%dx%d", r.m, r.n, r.k);
    printf("%-5s %-34s %17s %9.1f %9.1f %6.1f%%%s\n", r.dtype.c_str(), r.kernel.c_str(), shape, r.tf, r.cublas_tf,
           100.0 * r.tf / r.cublas_tf, r.fb ? "  (cp.async fallback)" : "");
  }
  printf("\n");
}

// Configurations.
template <typename T, bool TA = false, bool TB = false> using W1 = Ws<T, 128, 256, 2, 4, TA, TB, 1, 0>;  // 192 KB
template <typename T, bool TA = false, bool TB = false> using W2 = Ws<T, 128, 256, 2, 3, TA, TB, 1, 1>;  // 144+64 KB
template <typename T, bool TA = false, bool TB = false> using W3 = Ws<T, 128, 128, 1, 3, TA, TB, 2, 0>;  // 2 x 96 KB
template <typename T, bool TA = false, bool TB = false> using W4 = Ws<T, 128, 128, 2, 6, TA, TB, 1, 0>;  // 192 KB, 64x128 per consumer

template <typename T, typename W> static void check_shapes(cublasHandle_t h, unsigned seed) {
  check<T, W>(h, "NN", false, false, 1000, 1000, 1000, seed);      // ragged M, N, K: OOB fill and clipping
  check<T, W>(h, "NN", false, false, 4097, 4088, 4104, seed + 1);  // ragged M
  check<T, W>(h, "NN", false, false, 77, 40, 24, seed + 2);        // smaller than one tile, K < 64
  check<T, W>(h, "NN", false, false, 1000, 1030, 999, seed + 3);   // strides not 16-byte multiples: fallback
  check<T, W>(h, "NN", false, false, 2048, 2048, 8, seed + 4);     // one k tile
  const int g = W::grid;
  W::grid = 3;  // few CTAs: many tiles each, the pipeline phases wrap across tiles
  check<T, W>(h, "NN", false, false, 1000, 1000, 1000, seed + 5);
  W::grid = -1;  // one CTA per tile
  check<T, W>(h, "NN", false, false, 1000, 1032, 1048, seed + 6);
  W::grid = g;
}
template <typename T, template <typename, bool, bool> class W> static void check_layouts(cublasHandle_t h, unsigned seed) {
  check<T, W<T, false, true>>(h, "NT", false, true, 1000, 1032, 1048, seed);
  check<T, W<T, true, false>>(h, "TN", true, false, 1000, 1032, 1048, seed + 1);
  check<T, W<T, true, true>>(h, "TT", true, true, 1000, 1032, 1048, seed + 2);
}

static bool want(const std::string& only, const char* name) { return only.empty() || only == name; }

template <typename T, typename W> static void bench_shapes(cublasHandle_t h, bool all) {
  bench<T, W>(h, 4096, 4096, 4096);
  bench<T, W>(h, 8192, 8192, 8192);
  bench<T, W>(h, 4096, 11008, 4096);
  bench<T, W>(h, 4096, 4096, 11008);
  bench<T, W>(h, 8192, 28672, 8192);
  if (all) {
    bench<T, W>(h, 1000, 1000, 1000);
    bench<T, W>(h, 4097, 4095, 4099);
    bench<T, W>(h, 4097, 4096, 4104);
  }
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];  // ws-check ws-layouts ws-bench ws-tune
    else if (!strcmp(argv[i], "--headers") || !strcmp(argv[i], "--cuda-include")) ++i;  // accepted, unused
    else if (!strcmp(argv[i], "--quick")) {}
    else { fprintf(stderr, "unknown argument %s\n", argv[i]); return 2; }
  }
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  g_sms = p.multiProcessorCount;
  printf("device: %s, %d SMs, cc %d.%d, smem/block optin %zu B\n", p.name, p.multiProcessorCount, p.major, p.minor,
         p.sharedMemPerBlockOptin);
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&g_encode), 12000,
                                      cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || !g_encode) { fprintf(stderr, "no cuTensorMapEncodeTiled\n"); return 1; }
  printf("smem: W1 %d, W2 %d, W3 %d, W4 %d bytes\n", W1<half>::SMEM, W2<half>::SMEM, W3<half>::SMEM, W4<half>::SMEM);
  cublasHandle_t h; CB(cublasCreate(&h));
  if (want(only, "ws-check")) {
    check_shapes<half, W1<half>>(h, 1);
    check_shapes<__nv_bfloat16, W1<__nv_bfloat16>>(h, 11);
    check_shapes<half, W2<half>>(h, 21);
    check_shapes<__nv_bfloat16, W2<__nv_bfloat16>>(h, 31);
    check_shapes<half, W3<half>>(h, 41);
    check_shapes<__nv_bfloat16, W4<__nv_bfloat16>>(h, 51);
    check<half, W1<half>>(h, "NN", false, false, 4096, 4096, 4096, 61);
    check<__nv_bfloat16, W2<__nv_bfloat16>>(h, "NN", false, false, 4096, 4096, 4096, 62);
  }
  if (only == "ws-small") {  // for compute-sanitizer: ragged, few tiles, phases wrapping
    W1<half>::grid = 2;
    check<half, W1<half>>(h, "NN", false, false, 300, 520, 328, 5);
    W2<__nv_bfloat16>::grid = 2;
    check<__nv_bfloat16, W2<__nv_bfloat16>>(h, "NN", false, false, 300, 520, 328, 6);
    check<half, W3<half>>(h, "NN", false, false, 77, 40, 24, 7);
  }
  if (want(only, "ws-layouts")) {
    check_layouts<half, W1>(h, 71);
    check_layouts<__nv_bfloat16, W2>(h, 81);
    check_layouts<half, W3>(h, 91);
  }
  if (want(only, "ws-tune")) {  // 4096^3 f16: configurations, grid forms, raster groups
    for (int g : {8, 16, 4}) {
      W1<half>::group = g; W2<half>::group = g;
      bench<half, W1<half>>(h, 4096, 4096, 4096);
      bench<half, W2<half>>(h, 4096, 4096, 4096);
    }
    W1<half>::group = 8; W2<half>::group = 8;
    bench<half, W3<half>>(h, 4096, 4096, 4096);
    bench<half, W4<half>>(h, 4096, 4096, 4096);
    W1<half>::grid = -1; bench<half, W1<half>>(h, 4096, 4096, 4096); W1<half>::grid = 0;
    W2<half>::grid = -1; bench<half, W2<half>>(h, 4096, 4096, 4096); W2<half>::grid = 0;
    bench<half, W3<half>>(h, 8192, 8192, 8192);
    bench<half, W4<half>>(h, 8192, 8192, 8192);
    print_table();
    g_rows.clear();
  }
  if (want(only, "ws-bench")) {
    bench_shapes<half, W1<half>>(h, true);
    bench_shapes<__nv_bfloat16, W1<__nv_bfloat16>>(h, true);
    bench_shapes<half, W2<half>>(h, false);
    bench_shapes<__nv_bfloat16, W2<__nv_bfloat16>>(h, false);
    print_table();
  }
  CB(cublasDestroy(h));
  printf("%s (%d failure(s))\n", g_fail ? "FAILED" : "ALL CHECKS PASSED", g_fail);
  return g_fail ? 1 : 0;
}
#endif
