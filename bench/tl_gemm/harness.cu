// Standalone test and benchmark of tile-core/src/codegen/tl/gemm.cuh.
//
//  (a) unit-tests tl::smem_offset (bijection onto [0, ROWS*COLS), 16-byte chunks);
//  (b) runs a complete GEMM written with the header -- block tile BMxBNxBK, a
//      STAGES-deep cp.async pipeline into smem_offset positions (zero-filled on ragged
//      edges), tl::gemm_ss per stage, an epilogue storing C through tl::acc_coord --
//      for NN, NT (B stored [N][K]) and TN (A stored [K][M]) and checks it against cuBLAS;
//  (c) times it against cublasGemmEx (16-bit in, f32 compute, 16-bit out, same layout).
//
// All matrices are row-major. Build: see run.sh. With -DTL_KERNELS_ONLY only the
// kernels are compiled (no cuBLAS needed), for register / SASS inspection.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "../../tile-core/src/codegen/tl/gemm.cuh"

// ----------------------------------------------------------------------------
// The GEMM kernel.
// ----------------------------------------------------------------------------
template <typename T> __device__ __forceinline__ unsigned pack2(float a, float b);
template <> __device__ __forceinline__ unsigned pack2<half>(float a, float b) {
  __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<unsigned*>(&h);
}
template <> __device__ __forceinline__ unsigned pack2<__nv_bfloat16>(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<unsigned*>(&h);
}
template <typename T> __device__ __forceinline__ T from_f(float a);
template <> __device__ __forceinline__ half from_f<half>(float a) { return __float2half_rn(a); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float a) { return __float2bfloat16_rn(a); }

// Fills R x CC shared tiles (tl::smem_offset layout) from a row-major global matrix
// g[rows][cols] with leading dimension ld, one k-tile after another. Thread tid copies
// the 8-element chunks (it * RSTEP + tid / CPR, (tid % CPR) * 8), it = 0..ITERS-1, so
// consecutive threads fill consecutive 16-byte chunks of a row (coalesced, and
// conflict-free under the swizzle). ALIGNED: ld and cols are multiples of 8 and g is
// 16-byte aligned, so every chunk lies wholly inside (cp.async) or wholly outside
// (zero-filled by cp.async). Otherwise chunks are gathered element by element (ragged
// unaligned sizes only).
template <typename T, int R, int CC, int THREADS, bool ALIGNED>
struct TileLoader {
  static constexpr int CPR = CC / 8;
  static_assert((R * CPR) % THREADS == 0 && THREADS % CPR == 0, "tile chunks must divide among threads");
  static constexpr int ITERS = R * CPR / THREADS, RSTEP = THREADS / CPR;
  const T* g;       // element (row0 + r_t, col0 + c_t)
  size_t it_step;   // RSTEP * ld
  int r_t, c_t, ld;
  int rrem, crem;   // rows - row0, cols - col0

  __device__ __forceinline__ TileLoader(const T* base, int ld_, int row0, int col0, int rows, int cols, int tid) {
    r_t = tid / CPR;
    c_t = (tid % CPR) * 8;
    ld = ld_;
    it_step = (size_t)RSTEP * ld_;
    g = base + (size_t)(row0 + r_t) * ld_ + col0 + c_t;
    rrem = rows - row0;
    crem = cols - col0;
  }
  // Advance the window by dr rows and dc columns.
  __device__ __forceinline__ void advance(int dr, int dc) {
    g += (ptrdiff_t)dr * ld + dc;
    rrem -= dr;
    crem -= dc;
  }
  __device__ __forceinline__ void load(T* s) const {
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int r = it * RSTEP + r_t;
      const T* src = g + it * it_step;
      T* dst = s + tl::smem_offset<R, CC>(r, c_t);
      if (ALIGNED) {
        tl::cp_async16(dst, src, r < rrem && c_t < crem);
      } else {
        union { uint4 u; T e[8]; } tmp;
#pragma unroll
        for (int e = 0; e < 8; ++e) tmp.e[e] = (r < rrem && c_t + e < crem) ? src[e] : from_f<T>(0.f);
        *reinterpret_cast<uint4*>(dst) = tmp.u;
      }
    }
  }
};

extern __shared__ uint4 tl_dyn_smem[];

// C[M][N] = A * B. A is [M][K] (or [K][M] when TA); B is [K][N] (or [N][K] when TB).
// PF (the schedule the code generator emits): the stage hand-off (wait + barrier) comes
// before each stage's last k step and the next stage's first fragments load right after it
// (tl::GemmPipe), so no warp waits on ldmatrix when a stage begins. Without PF: the
// hand-off at the top of each iteration, then tl::gemm_ss on the stage.
// LATE: the next tile's copies are issued after the multiplies (without PF: after
// gemm_ss; with PF: after the first k step) rather than before them.
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, bool TA, bool TB, bool ALIGNED,
          int MINB, bool LATE, bool PF>
__global__ void __launch_bounds__(32 * WM * WN, MINB)
tile_gemm(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K) {
  constexpr int THREADS = 32 * WM * WN;
  constexpr int REGS = tl::acc_regs<BM, BN, WM, WN>();
  constexpr int A_TILE = BM * BK, B_TILE = BK * BN;
  constexpr int GROUP = 8;  // rasterize blocks in groups of GROUP block-rows (L2 reuse)
  T* sA = reinterpret_cast<T*>(tl_dyn_smem);
  T* sB = sA + STAGES * A_TILE;
  const int tid = threadIdx.x;

  const int nbm = (M + BM - 1) / BM, nbn = (N + BN - 1) / BN;
  const int pid = blockIdx.x;
  const int group = pid / (GROUP * nbn);
  const int first = group * GROUP;
  const int gsz = min(nbm - first, GROUP);
  const int bm0 = (first + (pid % (GROUP * nbn)) % gsz) * BM;
  const int bn0 = ((pid % (GROUP * nbn)) / gsz) * BN;

  // A tile: [BM][BK] from A[M][K], or [BK][BM] from A[K][M] (TA).
  // B tile: [BK][BN] from B[K][N], or [BN][BK] from B[N][K] (TB).
  using LA = TileLoader<T, TA ? BK : BM, TA ? BM : BK, THREADS, ALIGNED>;
  using LB = TileLoader<T, TB ? BN : BK, TB ? BK : BN, THREADS, ALIGNED>;
  LA la = TA ? LA(A, M, 0, bm0, K, M, tid) : LA(A, K, bm0, 0, M, K, tid);
  LB lb = TB ? LB(B, K, bn0, 0, N, K, tid) : LB(B, N, 0, bn0, K, N, tid);
  const int KT = (K + BK - 1) / BK;
  // Copies k-tile t (if it exists) into stage t % STAGES and commits the group.
  auto load_tile = [&](int t) {
    if (t < KT) {
      const int s = t % STAGES;
      la.load(sA + s * A_TILE);
      lb.load(sB + s * B_TILE);
      if (TA) la.advance(BK, 0); else la.advance(0, BK);
      if (TB) lb.advance(0, BK); else lb.advance(BK, 0);
    }
    tl::cp_async_commit();
  };

  float acc[REGS];
#pragma unroll
  for (int i = 0; i < REGS; ++i) acc[i] = 0.f;

#pragma unroll
  for (int t = 0; t < STAGES - 1; ++t) load_tile(t);
  if constexpr (PF) {
    tl::GemmPipe<T, BM, BN, BK, WM, WN, TA, TB> w;
    tl::cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (KT > 0) w.first(sA, sB);
    for (int kt = 0; kt < KT; ++kt) {
      const int s = kt % STAGES, n = (kt + 1) % STAGES;
      // The stage refilled here was last read in iteration kt - 1, before its barrier.
      if (!LATE) load_tile(kt + STAGES - 1);
      w.run(sA + s * A_TILE, sB + s * B_TILE, acc, [&] { if (LATE) load_tile(kt + STAGES - 1); }, [&] {
        tl::cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (kt + 1 < KT) w.first(sA + n * A_TILE, sB + n * B_TILE);
      });
    }
  } else {
    for (int kt = 0; kt < KT; ++kt) {
      const int s = kt % STAGES;
      tl::cp_async_wait<STAGES - 2>();
      __syncthreads();
      // The stage refilled here was last read in iteration kt - 1, which every warp has finished.
      if (!LATE) load_tile(kt + STAGES - 1);
      tl::gemm_ss<T, float, BM, BN, BK, WM, WN, TA, TB>(sA + s * A_TILE, sB + s * B_TILE, acc);
      if (LATE) load_tile(kt + STAGES - 1);
    }
  }
  tl::cp_async_wait<0>();

  const bool pairs = (N % 2) == 0;
#pragma unroll
  for (int q = 0; q < REGS / 2; ++q) {
    int i, j;
    tl::acc_coord<BM, BN, WM, WN>(2 * q, i, j);
    const int gi = bm0 + i, gj = bn0 + j;
    if (gi < M) {
      T* dst = C + (size_t)gi * N + gj;
      if (pairs && gj + 1 < N) {
        *reinterpret_cast<unsigned*>(dst) = pack2<T>(acc[2 * q], acc[2 * q + 1]);
      } else {
        if (gj < N) dst[0] = from_f<T>(acc[2 * q]);
        if (gj + 1 < N) dst[1] = from_f<T>(acc[2 * q + 1]);
      }
    }
  }
}

// Device-side unit test of smem_offset (the host test covers the same function).
template <int ROWS, int COLS>
__global__ void smem_offset_kernel(int* out) {
  for (int x = threadIdx.x; x < ROWS * COLS; x += blockDim.x) out[x] = tl::smem_offset<ROWS, COLS>(x / COLS, x % COLS);
}

#ifdef TL_KERNELS_ONLY
// ----------------------------------------------------------------------------
// Instantiations for resource / SASS inspection (no host code).
// ----------------------------------------------------------------------------
#define INST(T, BM, BN, BK, WM, WN, ST, TA, TB, AL, MINB, LATE, PF)                                        \
  template __global__ void tile_gemm<T, BM, BN, BK, WM, WN, ST, TA, TB, AL, MINB, LATE, PF>(const T*, const T*, T*, \
                                                                                           int, int, int);
INST(half, 128, 128, 32, 2, 2, 3, false, false, true, 2, false, false)
INST(half, 128, 128, 32, 2, 2, 3, false, true, true, 2, false, false)
INST(half, 128, 128, 32, 2, 2, 3, true, false, true, 2, false, false)
INST(__nv_bfloat16, 128, 128, 32, 2, 2, 3, false, false, true, 2, false, false)
INST(half, 128, 128, 32, 2, 4, 3, false, false, true, 2, false, false)
INST(half, 128, 128, 64, 2, 2, 3, false, false, true, 2, false, false)
INST(half, 128, 256, 32, 2, 4, 3, false, false, true, 1, false, false)
INST(half, 128, 128, 32, 2, 2, 4, false, false, true, 2, false, false)
INST(half, 128, 128, 32, 2, 2, 4, false, false, true, 2, false, true)
INST(half, 128, 128, 64, 2, 2, 3, false, false, true, 2, false, true)
INST(half, 128, 128, 64, 2, 2, 3, false, false, true, 2, true, true)
#else
// ----------------------------------------------------------------------------
// Host side.
// ----------------------------------------------------------------------------
#include "../common/gemm_host.cuh"
#include <nvrtc.h>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

template <int ROWS, int COLS> static void test_smem_offset() {
  std::vector<int> host(ROWS * COLS), dev(ROWS * COLS), seen(ROWS * COLS, 0);
  bool ok = true;
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < COLS; ++c) {
      const int o = tl::smem_offset<ROWS, COLS>(r, c);
      host[r * COLS + c] = o;
      if (o < 0 || o >= ROWS * COLS) { ok = false; continue; }
      seen[o]++;
      if (c % 8 == 0 && o % 8 != 0) ok = false;                                          // 16-byte aligned
      if (c % 8 != 0 && o != tl::smem_offset<ROWS, COLS>(r, c - c % 8) + c % 8) ok = false;  // contiguous
    }
  for (int x = 0; x < ROWS * COLS; ++x) ok = ok && seen[x] == 1;  // bijective
  int* d; CK(cudaMalloc(&d, sizeof(int) * ROWS * COLS));
  smem_offset_kernel<ROWS, COLS><<<1, 256>>>(d);
  CK(cudaGetLastError());
  CK(cudaMemcpy(dev.data(), d, sizeof(int) * ROWS * COLS, cudaMemcpyDeviceToHost));
  CK(cudaFree(d));
  ok = ok && dev == host;
  printf("smem_offset<%4d,%4d> (row %4d B): %s\n", ROWS, COLS, COLS * 2, ok ? "ok" : "FAIL");
  if (!ok) g_fail++;
}



// ----------------------------------------------------------------------------
// NVRTC path: the header text pasted into a source string (as the code generator
// does), compiled at run time, one block computing a whole tile with gemm_ss.
// Chunks of the last 3 rows of the A tile are loaded with valid = false (zero fill).
// ----------------------------------------------------------------------------
static const char* kNvrtcKernel = R"(
extern "C" __global__ void tl_nvrtc_tile(const T_A* A, const T_A* B, float* C) {
  constexpr int AR = T_TA ? T_K : T_M, AC = T_TA ? T_M : T_K;
  constexpr int BR = T_TB ? T_N : T_K, BC = T_TB ? T_K : T_N;
  __shared__ __align__(128) T_A sA[AR * AC];
  __shared__ __align__(128) T_A sB[BR * BC];
  for (int x = threadIdx.x; x < AR * AC / 8; x += blockDim.x) {
    const int r = x / (AC / 8), c = (x % (AC / 8)) * 8;
    const int m = T_TA ? c : r;  // A row (M index) of the chunk's first element
    tl::cp_async16(sA + tl::smem_offset<AR, AC>(r, c), A + r * AC + c, T_TA ? true : m < T_M - 3);
  }
  for (int x = threadIdx.x; x < BR * BC / 8; x += blockDim.x) {
    const int r = x / (BC / 8), c = (x % (BC / 8)) * 8;
    tl::cp_async16(sB + tl::smem_offset<BR, BC>(r, c), B + r * BC + c, true);
  }
  tl::cp_async_commit();
  tl::cp_async_wait<0>();
  __syncthreads();
  float acc[tl::acc_regs<T_M, T_N, T_WM, T_WN>()];
  for (int i = 0; i < tl::acc_regs<T_M, T_N, T_WM, T_WN>(); ++i) acc[i] = 0.f;
  tl::gemm_ss<T_A, float, T_M, T_N, T_K, T_WM, T_WN, T_TA, T_TB>(sA, sB, acc);
  tl::gemm_ss<T_A, float, T_M, T_N, T_K, T_WM, T_WN, T_TA, T_TB>(sA, sB, acc);  // accumulates: C = 2AB
  for (int s = 0; s < tl::acc_regs<T_M, T_N, T_WM, T_WN>(); s += 2) {
    int i, j;
    tl::acc_coord<T_M, T_N, T_WM, T_WN>(s, i, j);
    C[i * T_N + j] = acc[s];
    C[i * T_N + j + 1] = acc[s + 1];
  }
}
)";

static std::string read_file(const char* path) {
  std::ifstream f(path);
  if (!f) return "";
  std::stringstream ss; ss << f.rdbuf(); return ss.str();
}

template <typename T>
static void nvrtc_test(const char* header_path, const char* inc, int M, int N, int K, int WM, int WN, bool ta, bool tb) {
  const bool bf = sizeof(T) == 2 && DT<T>::v == CUDA_R_16BF;
  std::string hdr = read_file(header_path);
  char tag[160];
  snprintf(tag, sizeof tag, "nvrtc %s %dx%dx%d w%dx%d %s%s", DT<T>::name(), M, N, K, WM, WN, ta ? "T" : "N", tb ? "T" : "N");
  if (hdr.empty()) { printf("%-40s FAIL (cannot read %s)\n", tag, header_path); g_fail++; return; }
  // The header's own #includes of cuda_fp16.h / cuda_bf16.h resolve through -I.
  std::string src = hdr + kNvrtcKernel;
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, src.c_str(), "tl_nvrtc.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    printf("%-40s FAIL (create)\n", tag); g_fail++; return;
  }
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  std::vector<std::string> o = {
      std::string("--gpu-architecture=sm_") + std::to_string(p.major * 10 + p.minor) + (p.major == 9 ? "a" : ""),
      "-std=c++17", std::string("-I") + inc, std::string("-DT_A=") + (bf ? "__nv_bfloat16" : "half"),
      "-DT_M=" + std::to_string(M), "-DT_N=" + std::to_string(N), "-DT_K=" + std::to_string(K),
      "-DT_WM=" + std::to_string(WM), "-DT_WN=" + std::to_string(WN), std::string("-DT_TA=") + (ta ? "true" : "false"),
      std::string("-DT_TB=") + (tb ? "true" : "false")};
  std::vector<const char*> opts;
  for (auto& x : o) opts.push_back(x.c_str());
  const nvrtcResult rc = nvrtcCompileProgram(prog, (int)opts.size(), opts.data());
  size_t logn = 0; nvrtcGetProgramLogSize(prog, &logn);
  std::string log(logn, '\0'); if (logn) nvrtcGetProgramLog(prog, &log[0]);
  if (rc != NVRTC_SUCCESS) {
    printf("%-40s FAIL (compile: %s)\n%s\n", tag, nvrtcGetErrorString(rc), log.c_str()); g_fail++;
    nvrtcDestroyProgram(&prog); return;
  }
  size_t n = 0; nvrtcGetCUBINSize(prog, &n);
  std::vector<char> cubin(n); nvrtcGetCUBIN(prog, cubin.data());
  nvrtcDestroyProgram(&prog);
  cudaLibrary_t lib; cudaKernel_t kern;
  CK(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CK(cudaLibraryGetKernel(&kern, lib, "tl_nvrtc_tile"));

  // host data: logical A[M][K], B[K][N]; stored as [K][M] / [N][K] when transposed
  std::vector<T> ha(M * K), hb(K * N);
  std::vector<double> a(M * K), b(K * N);
  unsigned st = 99;
  auto rnd = [&] { st = st * 1664525u + 1013904223u; return (float)((int)(st >> 20) % 17 - 8) / 8.0f; };
  for (int i = 0; i < M; ++i) for (int k = 0; k < K; ++k) {
    const float v = rnd(); const T t = (T)v; a[i * K + k] = (double)(float)t;
    ha[ta ? k * M + i : i * K + k] = t;
  }
  for (int k = 0; k < K; ++k) for (int j = 0; j < N; ++j) {
    const float v = rnd(); const T t = (T)v; b[k * N + j] = (double)(float)t;
    hb[tb ? j * K + k : k * N + j] = t;
  }
  T *da, *db; float* dc;
  CK(cudaMalloc(&da, sizeof(T) * M * K)); CK(cudaMalloc(&db, sizeof(T) * K * N)); CK(cudaMalloc(&dc, sizeof(float) * M * N));
  CK(cudaMemcpy(da, ha.data(), sizeof(T) * M * K, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, hb.data(), sizeof(T) * K * N, cudaMemcpyHostToDevice));
  CK(cudaMemset(dc, 0xFF, sizeof(float) * M * N));
  void* args[] = {&da, &db, &dc};
  CK(cudaLaunchKernel((const void*)kern, dim3(1), dim3(32 * WM * WN), args, 0, 0));
  CK(cudaGetLastError());
  std::vector<float> hc(M * N);
  CK(cudaMemcpy(hc.data(), dc, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
  double maxerr = 0;
  for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) {
    double r = 0;
    if (ta || i < M - 3) for (int k = 0; k < K; ++k) r += a[i * K + k] * b[k * N + j];
    const double e = std::fabs(2 * r - hc[i * N + j]);
    maxerr = std::isfinite(e) ? std::max(maxerr, e) : INFINITY;
  }
  CK(cudaFree(da)); CK(cudaFree(db)); CK(cudaFree(dc));
  CK(cudaLibraryUnload(lib));
  const bool ok = maxerr < 1e-3;  // inputs are exact in 16 bits and sums exact in f32
  if (!ok) g_fail++;
  printf("%-40s max_abs_err %.2e  %s\n", tag, maxerr, ok ? "ok" : "FAIL");
}

template <typename T, int BM, int BN, int BK, int WM, int WN, int ST, bool TA, bool TB, bool AL, int MINB,
          bool LATE = false, bool PF = false>
struct Launcher {
  static constexpr int SMEM = ST * (BM * BK + BK * BN) * (int)sizeof(T);
  static void run(const T* A, const T* B, T* C, int M, int N, int K, cudaStream_t s = 0) {
    static bool init = false;
    auto k = tile_gemm<T, BM, BN, BK, WM, WN, ST, TA, TB, AL, MINB, LATE, PF>;
    if (!init) { CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM)); init = true; }
    const int grid = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    k<<<grid, 32 * WM * WN, SMEM, s>>>(A, B, C, M, N, K);
  }
  static std::string name() {
    char b[96];
    snprintf(b, sizeof b, "%dx%dx%d w%dx%d s%d%s%s", BM, BN, BK, WM, WN, ST, PF ? " xpf" : "", LATE ? " late" : "");
    return b;
  }
};


template <typename T, typename L>
static void report_check(cublasHandle_t h, const char* lay, bool ta, bool tb, int M, int N, int K, unsigned seed) {
  const double e = rel_fro_err<T>(h, ta, tb, M, N, K, seed,
                                  [&](const T* A, const T* B, T* C) { L::run(A, B, C, M, N, K); });
  const bool ok = e < 1e-2;
  if (!ok) g_fail++;
  printf("check %-4s %s %-22s %5dx%5dx%5d  rel_fro_err %.3e  %s\n", DT<T>::name(), lay, L::name().c_str(), M, N, K, e,
         ok ? "ok" : "FAIL");
}


// Ceiling of mma.sync itself: each warp runs 16 independent m16n8k16 chains on registers.
__global__ void mma_peak_kernel(float* out, int iters) {
  unsigned a[4] = {threadIdx.x, threadIdx.x * 3u, threadIdx.x * 5u, threadIdx.x * 7u};
  unsigned b0 = threadIdx.x * 11u, b1 = threadIdx.x * 13u;
  float acc[16][4] = {};
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < 16; ++c) tl::detail::Mma<half>::run(acc[c], a, b0, b1);
  }
  float s = 0;
#pragma unroll
  for (int c = 0; c < 16; ++c) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  if (s == 12345.f) out[0] = s;
}
static double mma_peak_tflops(int sms) {
  float* d; CK(cudaMalloc(&d, 4));
  const int iters = 4096, blocks = sms * 4, threads = 256;
  const float ms = median_ms([&] { mma_peak_kernel<<<blocks, threads>>>(d, iters); }, 3, 10);
  CK(cudaFree(d));
  return (double)blocks * (threads / 32) * iters * 16 * (2.0 * 16 * 8 * 16) / (ms * 1e-3) / 1e12;
}

struct Row { std::string dtype, layout, kernel; double tile_tf, cublas_tf; };
static std::vector<Row> g_rows;

// Times the tile kernel and cuBLAS (same dtype in and out, f32 compute) at M x N x K.
template <typename T, typename L>
static void bench(cublasHandle_t h, const char* lay, bool ta, bool tb, int M, int N, int K) {
  const double flop = 2.0 * M * N * K;
  const auto [tt, tc] =
      time_vs_cublas<T>(h, ta, tb, M, N, K, [&](const T* A, const T* B, T* C) { L::run(A, B, C, M, N, K); });
  g_rows.push_back({DT<T>::name(), lay, L::name(), flop / (tt * 1e-3) / 1e12, flop / (tc * 1e-3) / 1e12});
  printf("bench %s %s %-22s tile %.3f ms  cublas %.3f ms\n", DT<T>::name(), lay, L::name().c_str(), tt, tc);
}

// The primary configuration: 128x128x32 block tile, 4 warps (2x2, 64x64 per warp), 3 stages.
template <typename T, bool TA, bool TB, bool AL>
using Primary = Launcher<T, 128, 128, 32, 2, 2, 3, TA, TB, AL, 2>;

template <typename T> static void checks(cublasHandle_t h) {
  const int S = 4096;
  report_check<T, Primary<T, false, false, true>>(h, "NN", false, false, S, S, S, 1);
  report_check<T, Primary<T, false, true, true>>(h, "NT", false, true, S, S, S, 2);
  report_check<T, Primary<T, true, false, true>>(h, "TN", true, false, S, S, S, 3);
  // ragged, 8-aligned leading dimensions: cp.async with zero-filled edge chunks
  report_check<T, Primary<T, false, false, true>>(h, "NN", false, false, 1000, 1032, 1048, 4);
  report_check<T, Primary<T, false, true, true>>(h, "NT", false, true, 1000, 1032, 1048, 5);
  report_check<T, Primary<T, true, false, true>>(h, "TN", true, false, 1000, 1032, 1048, 6);
  // ragged, unaligned leading dimensions: element-wise gathered edge path
  report_check<T, Primary<T, false, false, false>>(h, "NN", false, false, 1000, 1030, 1050, 7);
  report_check<T, Primary<T, false, true, false>>(h, "NT", false, true, 1000, 1030, 1050, 8);
  report_check<T, Primary<T, true, false, false>>(h, "TN", true, false, 1000, 1030, 1050, 9);
  report_check<T, Primary<T, false, false, false>>(h, "NN", false, false, 77, 33, 19, 10);
}

// Alternative tilings / schedules of the same header (NN), checked and timed for comparison.
template <typename T> using VLate = Launcher<T, 128, 128, 32, 2, 2, 3, false, false, true, 2, true>;
template <typename T> using V4s = Launcher<T, 128, 128, 32, 2, 2, 4, false, false, true, 2>;
template <typename T> using Vk64 = Launcher<T, 128, 128, 64, 2, 2, 3, false, false, true, 2>;
template <typename T> using V8w = Launcher<T, 128, 128, 32, 2, 4, 3, false, false, true, 2>;
template <typename T> using V256 = Launcher<T, 128, 256, 32, 2, 4, 3, false, false, true, 1>;

// The code generator's schedule (PF), with the copies before or after the first k step.
template <typename T> using X1k32 = Launcher<T, 128, 128, 32, 2, 2, 4, false, false, true, 2, false, true>;
template <typename T> using X1k64 = Launcher<T, 128, 128, 64, 2, 2, 3, false, false, true, 2, false, true>;
template <typename T> using X1k64L = Launcher<T, 128, 128, 64, 2, 2, 3, false, false, true, 2, true, true>;
template <typename T> using X1k32L = Launcher<T, 128, 128, 32, 2, 2, 4, false, false, true, 2, true, true>;
template <typename T> using X1k32s3L = Launcher<T, 128, 128, 32, 2, 2, 3, false, false, true, 2, true, true>;
template <typename T> using X1w8 = Launcher<T, 256, 128, 32, 4, 2, 4, false, false, true, 1, false, true>;

// The experimental schedules: checked (including ragged 8-aligned sizes), then timed.
template <typename T> static void experiments(cublasHandle_t h, int S) {
  report_check<T, X1k32<T>>(h, "NN", false, false, 1000, 1032, 1048, 31);
  report_check<T, X1k64L<T>>(h, "NN", false, false, 1000, 1032, 1048, 32);
  report_check<T, X1k32L<T>>(h, "NN", false, false, 1000, 1032, 1048, 33);
  report_check<T, X1w8<T>>(h, "NN", false, false, 1000, 1032, 1048, 34);
  report_check<T, X1k64<T>>(h, "NN", false, false, S, S, S, 35);
  report_check<T, X1k64L<T>>(h, "NN", false, false, S, S, S, 36);
  report_check<T, X1k32L<T>>(h, "NN", false, false, 77, 40, 24, 37);
  bench<T, Vk64<T>>(h, "NN", false, false, S, S, S);
  bench<T, X1k64<T>>(h, "NN", false, false, S, S, S);
  bench<T, X1k64L<T>>(h, "NN", false, false, S, S, S);
  bench<T, X1k32<T>>(h, "NN", false, false, S, S, S);
  bench<T, X1k32L<T>>(h, "NN", false, false, S, S, S);
  bench<T, X1k32s3L<T>>(h, "NN", false, false, S, S, S);
  bench<T, X1w8<T>>(h, "NN", false, false, S, S, S);
  bench<T, Vk64<T>>(h, "NN", false, false, S, S, S);
}

template <typename T> static void variants(cublasHandle_t h, int S) {
  report_check<T, VLate<T>>(h, "NN", false, false, S, S, S, 21);
  report_check<T, V4s<T>>(h, "NN", false, false, S, S, S, 22);
  report_check<T, Vk64<T>>(h, "NN", false, false, S, S, S, 23);
  report_check<T, V8w<T>>(h, "NN", false, false, S, S, S, 24);
  report_check<T, V256<T>>(h, "NN", false, false, S, S, S, 25);
  bench<T, VLate<T>>(h, "NN", false, false, S, S, S);
  bench<T, V4s<T>>(h, "NN", false, false, S, S, S);
  bench<T, Vk64<T>>(h, "NN", false, false, S, S, S);
  bench<T, V8w<T>>(h, "NN", false, false, S, S, S);
  bench<T, V256<T>>(h, "NN", false, false, S, S, S);
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && !strcmp(argv[1], "--quick");
  const bool exp_only = argc > 1 && !strcmp(argv[1], "--experiments");
  if (argc > 1 && !strcmp(argv[1], "--profile")) {  // one run of each schedule at 4096^3, for a profiler
    const int S = 4096;
    half *A, *B, *C;
    CK(cudaMalloc(&A, sizeof(half) * S * S)); CK(cudaMalloc(&B, sizeof(half) * S * S)); CK(cudaMalloc(&C, sizeof(half) * S * S));
    fill_random<half><<<1024, 256>>>(A, (size_t)S * S, 1);
    fill_random<half><<<1024, 256>>>(B, (size_t)S * S, 2);
    Vk64<half>::run(A, B, C, S, S, S);
    X1k64<half>::run(A, B, C, S, S, S);
    X1k64L<half>::run(A, B, C, S, S, S);
    CK(cudaDeviceSynchronize());
    printf("profile runs done\n");
    return 0;
  }
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  printf("device: %s, %d SMs, cc %d.%d\n", p.name, p.multiProcessorCount, p.major, p.minor);

  test_smem_offset<128, 16>(); test_smem_offset<128, 32>(); test_smem_offset<64, 64>();
  test_smem_offset<32, 128>(); test_smem_offset<64, 256>(); test_smem_offset<16, 512>();

#ifdef TL_HEADER_PATH
  const char* hp = TL_HEADER_PATH;
#else
  const char* hp = "../../tile-core/src/codegen/tl/gemm.cuh";
#endif
#ifdef TL_CUDA_INC
  const char* inc = TL_CUDA_INC;
#else
  const char* inc = "/usr/local/cuda/include";
#endif
  nvrtc_test<half>(hp, inc, 128, 128, 32, 2, 2, false, false);
  nvrtc_test<half>(hp, inc, 128, 128, 16, 2, 2, false, true);
  nvrtc_test<half>(hp, inc, 64, 256, 64, 1, 4, true, false);
  nvrtc_test<__nv_bfloat16>(hp, inc, 256, 128, 32, 4, 2, true, true);
  nvrtc_test<__nv_bfloat16>(hp, inc, 64, 64, 64, 2, 2, false, false);

  cublasHandle_t h; CB(cublasCreate(&h));
  if (exp_only) {
    printf("mma.sync m16n8k16 f16->f32 register-only peak: %.1f TFLOP/s\n", mma_peak_tflops(p.multiProcessorCount));
    experiments<half>(h, 4096);
    experiments<__nv_bfloat16>(h, 4096);
    CB(cublasDestroy(h));
    printf("\n%-5s %-3s %-22s %12s %14s %7s\n", "dtype", "lay", "tile kernel", "tile TFLOP/s", "cuBLAS TFLOP/s", "ratio");
    for (auto& r : g_rows)
      printf("%-5s %-3s %-22s %12.1f %14.1f %6.1f%%\n", r.dtype.c_str(), r.layout.c_str(), r.kernel.c_str(), r.tile_tf,
             r.cublas_tf, 100.0 * r.tile_tf / r.cublas_tf);
    printf("\n%s (%d failure(s))\n", g_fail ? "FAILED" : "ALL CHECKS PASSED", g_fail);
    return g_fail ? 1 : 0;
  }
  checks<half>(h);
  checks<__nv_bfloat16>(h);

  printf("mma.sync m16n8k16 f16->f32 register-only peak: %.1f TFLOP/s\n", mma_peak_tflops(p.multiProcessorCount));
  const int S = 4096;
  bench<half, Primary<half, false, false, true>>(h, "NN", false, false, S, S, S);
  bench<half, Primary<half, false, true, true>>(h, "NT", false, true, S, S, S);
  bench<half, Primary<half, true, false, true>>(h, "TN", true, false, S, S, S);
  bench<__nv_bfloat16, Primary<__nv_bfloat16, false, false, true>>(h, "NN", false, false, S, S, S);
  bench<__nv_bfloat16, Primary<__nv_bfloat16, false, true, true>>(h, "NT", false, true, S, S, S);
  bench<__nv_bfloat16, Primary<__nv_bfloat16, true, false, true>>(h, "TN", true, false, S, S, S);
  if (!quick) {
    variants<half>(h, S);
    variants<__nv_bfloat16>(h, S);
    // the primary configuration again, to show the run-to-run spread
    bench<half, Primary<half, false, false, true>>(h, "NN", false, false, S, S, S);
  }
  CB(cublasDestroy(h));

  printf("\n%-5s %-3s %-22s %12s %14s %7s\n", "dtype", "lay", "tile kernel", "tile TFLOP/s", "cuBLAS TFLOP/s", "ratio");
  for (auto& r : g_rows)
    printf("%-5s %-3s %-22s %12.1f %14.1f %6.1f%%\n", r.dtype.c_str(), r.layout.c_str(), r.kernel.c_str(), r.tile_tf,
           r.cublas_tf, 100.0 * r.tile_tf / r.cublas_tf);
  printf("\n%s (%d failure(s))\n", g_fail ? "FAILED" : "ALL CHECKS PASSED", g_fail);
  return g_fail ? 1 : 0;
}
#endif
