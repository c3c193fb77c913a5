// tl/gemm.cuh -- tile-level GEMM building blocks for the CUDA backend (sm_80+).
//
// Self-contained: needs only <cuda_fp16.h> / <cuda_bf16.h> and inline PTX, so the
// code generator can paste it verbatim into a source compiled by NVRTC or nvcc.
// The contract is documented in README.md next to this file.
#ifndef TL_GEMM_CUH_
#define TL_GEMM_CUH_

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define TL_HD __host__ __device__ __forceinline__

namespace tl {
namespace detail {

template <typename X, typename Y> struct is_same { static constexpr bool value = false; };
template <typename X> struct is_same<X, X> { static constexpr bool value = true; };

__host__ __device__ constexpr int ilog2(int x) { return x <= 1 ? 0 : 1 + ilog2(x >> 1); }
__host__ __device__ constexpr bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

// ---------------------------------------------------------------------------
// Swizzle.
//
// A tile row of COLS 2-byte elements is CPR = COLS/8 chunks of 16 bytes. Chunk
// g = r*CPR + c/8 of the row-major tile is stored at chunk position
//     g ^ (((g >> S) ^ (g >> (S + 3))) & 7),     S = log2(max(CPR, 8)),
// i.e. inside every aligned group of eight chunks (128 bytes = the 32 banks) the
// chunk index is XORed with the number L of the 128-byte line (CPR <= 8) or the
// row L (CPR >= 8), folded as (L ^ L/8) mod 8. Any eight consecutive rows at one
// chunk column -- what one 8x8 ldmatrix matrix reads -- land in eight distinct
// 16-byte bank groups, and so do eight rows 8 apart (a column of a tile read by
// threads that each hold eight consecutive rows: a transpose); eight consecutive
// chunks of the row-major order (what eight consecutive threads store) are a
// permutation of one 128-byte line. The map only changes bits 0..2 of g by a
// linear function of higher bits, so it is a bijection and it is XOR-linear:
// swz(a ^ b) = swz(a) ^ swz(b).
// ---------------------------------------------------------------------------
template <int COLS> struct Swz {
  static_assert(COLS % 8 == 0 && is_pow2(COLS / 8),
                "tl: tile COLS must be 8 * 2^k elements (row of 16 * 2^k bytes)");
  static constexpr int CPR = COLS / 8;
  static constexpr int S = CPR >= 8 ? ilog2(CPR) : 3;
  static TL_HD int apply(int g) { return g ^ (((g >> S) ^ (g >> (S + 3))) & 7); }
};

// ---------------------------------------------------------------------------
// Warp-level GEMM geometry, shared by the device code and host-side tests.
//
// Per warp: MI 16-row A fragments, NI 8-column B fragments, KS 16-deep k steps.
// Each ldmatrix.x4 fetches four 8x8 matrices; lane l supplies the address of row
// (l % 8) of matrix (l / 8). Addresses are "lane part" (depends on lane and warp,
// computed once) + "constant part" (depends on unrolled loop indices only). The two
// parts never share a set bit of the chunk index, so by XOR-linearity
//     swz(lane + const) = swz(lane) ^ swz(const),
// and because only bits 0..2 are permuted this is (swz(lane) ^ lo) + hi with
// lo = swz(const) & 7, hi = swz(const) & ~7 -- one LOP per distinct lo, and hi folds
// into the ldmatrix immediate offset.
// ---------------------------------------------------------------------------
template <int M, int N, int K, int WM, int WN, bool TRANS_A, bool TRANS_B>
struct Geom {
  static constexpr int WTM = M / WM;
  static constexpr int WTN = N / WN;
  static constexpr int MI = WTM / 16;
  static constexpr int NI = WTN / 8;
  static constexpr int KS = K / 16;
  static constexpr int THREADS = 32 * WM * WN;
  // Shared tiles: A is [M][K] or, when TRANS_A, [K][M]; B is [K][N] or, when TRANS_B, [N][K].
  static constexpr int A_ROWS = TRANS_A ? K : M, A_COLS = TRANS_A ? M : K;
  static constexpr int B_ROWS = TRANS_B ? N : K, B_COLS = TRANS_B ? K : N;
  static constexpr int A_CPR = A_COLS / 8, B_CPR = B_COLS / 8;

  static_assert(M % WM == 0 && N % WN == 0, "tl::gemm_ss: M % WM and N % WN must be 0");
  static_assert(WTM % 16 == 0 && WTN % 16 == 0, "tl::gemm_ss: (M/WM) and (N/WN) must be multiples of 16");
  static_assert(is_pow2(WTM), "tl::gemm_ss: M/WM must be a power of two");
  static_assert(K % 16 == 0, "tl::gemm_ss: K must be a multiple of 16");
  static_assert(is_pow2(WM) && is_pow2(WN), "tl::gemm_ss: WM and WN must be powers of two");

  // Warps are numbered along M first: warp w sits at (w % WM, w / WM).
  static TL_HD int warp_m(int warp) { return warp % WM; }
  static TL_HD int warp_n(int warp) { return warp / WM; }

  // ---- A operand (16x16 per fragment; matrices: rows 0-7/8-15 x k 0-7/8-15) ----
  // [M][K], plain ldmatrix: matrix q = (rows 8*(q&1).., k 8*(q>>1)..).
  // [K][M], ldmatrix.trans: matrix q = (k 8*(q>>1).., m 8*(q&1)..).
  static TL_HD int a_lane(int wm, int lane) {
    if (!TRANS_A) return (wm * WTM + (lane & 15)) * A_CPR + (lane >> 4);
    return ((lane & 7) + ((lane >> 4) << 3)) * A_CPR + ((wm * WTM) >> 3) + ((lane >> 3) & 1);
  }
  static TL_HD constexpr int a_const(int mi, int kk) {
    return TRANS_A ? (kk * 16) * A_CPR + 2 * mi : (mi * 16) * A_CPR + 2 * kk;
  }
  // ---- B operand, two 8-column fragments (n 16*nj .. 16*nj+15) per ldmatrix.x4 ----
  // matrix q = (k 8*(q&1).., n 8*(q>>1)..): regs {q0,q1} = fragment 2nj, {q2,q3} = 2nj+1.
  // [K][N]: ldmatrix.trans; [N][K]: plain ldmatrix.
  static TL_HD int b_lane(int wn, int lane) {
    if (!TRANS_B) return (lane & 15) * B_CPR + ((wn * WTN) >> 3) + (lane >> 4);
    return (wn * WTN + (lane & 7) + ((lane >> 4) << 3)) * B_CPR + ((lane >> 3) & 1);
  }
  static TL_HD constexpr int b_const(int nj, int kk) {
    return TRANS_B ? (nj * 16) * B_CPR + 2 * kk : (kk * 16) * B_CPR + 2 * nj;
  }
  // Chunk position of lane part (already swizzled) + constant part.
  template <int COLS>
  static TL_HD int at(int lane_swz, int c) {
    const int s = Swz<COLS>::apply(c);
    return (lane_swz ^ (s & 7)) + (s & ~7);
  }

  // Accumulator slot -> (i, j) in the block's C tile, for thread tid.
  // slot = (mi * NI + ni) * 4 + e; e = 0,1: row g, cols 2t, 2t+1; e = 2,3: row g+8.
  static TL_HD void acc_coord(int tid, int slot, int& i, int& j) {
    const int warp = tid >> 5, lane = tid & 31;
    const int e = slot & 3, f = slot >> 2;
    const int mi = f / NI, ni = f % NI;
    i = warp_m(warp) * WTM + mi * 16 + (lane >> 2) + ((e >> 1) << 3);
    j = warp_n(warp) * WTN + ni * 8 + ((lane & 3) << 1) + (e & 1);
  }
};

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
template <bool TRANS>
__device__ __forceinline__ void ldsm(unsigned addr, unsigned (&r)[4]) {
  if (TRANS) ldsm_x4_t(addr, r); else ldsm_x4(addr, r);
}

template <typename T> struct Mma;
template <> struct Mma<half> {
  static __device__ __forceinline__ void run(float* d, const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <> struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float* d, const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

}  // namespace detail

// ---- shared-memory tile layout --------------------------------------------
// Element offset of (r, c) in a ROWS x COLS tile of 2-byte elements.
// Supports COLS = 8 * 2^k (rows of 16, 32, 64, 128, 256, 512, ... bytes), ROWS % 8 == 0.
// (r, c0..c0+7), c0 % 8 == 0, are contiguous and 16-byte aligned (tile base 16-byte
// aligned); the tile occupies exactly [0, ROWS*COLS).
template <int ROWS, int COLS>
TL_HD int smem_offset(int r, int c) {
  static_assert(ROWS % 8 == 0, "tl::smem_offset: ROWS must be a multiple of 8");
  return detail::Swz<COLS>::apply(r * (COLS / 8) + (c >> 3)) * 8 + (c & 7);
}

template <int M, int N, int WM, int WN>
__host__ __device__ constexpr int acc_regs() { return M * N / (32 * WM * WN); }

// ---- async copy (sm_80+) ---------------------------------------------------
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = detail::smem_u32(smem);
  const int src_bytes = valid ? 16 : 0;  // 0: nothing is read, 16 zero bytes are written
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n"
               :: "r"(dst), "l"(gmem), "r"(src_bytes) : "memory");
}
// 4 bytes, of which the first src_bytes (0 to 4) are read and the rest zero-filled.
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, int src_bytes) {
  const unsigned dst = detail::smem_u32(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
               :: "r"(dst), "l"(gmem), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

// ---- tile copy: global -> shared (sm_80+) ----------------------------------
namespace detail {
template <typename T> __device__ __forceinline__ T zero();
template <> __device__ __forceinline__ half zero<half>() { return __float2half_rn(0.f); }
template <> __device__ __forceinline__ __nv_bfloat16 zero<__nv_bfloat16>() { return __float2bfloat16_rn(0.f); }
#if defined(__CUDA_FP8_TYPES_EXIST__)
template <> __device__ __forceinline__ __nv_fp8_e4m3 zero<__nv_fp8_e4m3>() { __nv_fp8_e4m3 z; z.__x = 0; return z; }
template <> __device__ __forceinline__ __nv_fp8_e5m2 zero<__nv_fp8_e5m2>() { __nv_fp8_e5m2 z; z.__x = 0; return z; }
#endif
}  // namespace detail

// How tl::copy_tile moves its chunks: COPY_CHECK decides per call (one branch);
// COPY_VEC, COPY_WORDS and COPY_SCALAR are for a caller that decided once, outside its
// loop, so that the loop body has no branch to split the multiplies from the copies
// (a branch per call between words and elements cost 4-12% at odd pitches on the H200).
// COPY_WORDS: 4-byte cp.async words (tl::wg::copy_tile; tl::copy_tile gathers elements).
enum { COPY_CHECK = 0, COPY_VEC = 1, COPY_SCALAR = 2, COPY_WORDS = 3 };

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}
__device__ __forceinline__ bool aligned4(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 3) == 0;
}

namespace detail {
// Where rows start on 4-byte boundaries (an even pitch of 2-byte elements, say 1030) but
// not on 16-byte ones, a tile copy still moves 4-byte words with cp.async (COPY_WORDS):
// asynchronous like the vector path, so the pipeline's stages cover its latency, where
// gathering element by element through registers waited a memory latency per batch of
// chunks (1000 x 1030 x 1050 ran at 0.58 of cuBLAS, bench/RESULTS.md).
// One 16-byte chunk of a tile row as four 4-byte cp.async: elements c, c + 1, .. of the row
// at p into d (16 contiguous shared bytes); those at columns >= cols, or all of them when
// the row is past the tensor's (!row_ok), are zero-filled.
template <typename T>
__device__ __forceinline__ void cp_async_chunk_words(T* d, const T* p, bool row_ok, int c, int cols) {
  constexpr int EPW = 4 / (int)sizeof(T);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int left = row_ok ? (cols - c - q * EPW) * (int)sizeof(T) : 0;
    cp_async4(d + q * EPW, p + q * EPW, left <= 0 ? 0 : left >= 4 ? 4 : left);
  }
}
}  // namespace detail

// Copies the R x C tile whose first element is g (a row-major tensor with leading
// dimension ld) into the shared tile s (smem_offset layout); tile elements at rows
// >= rows or columns >= cols (past the tensor's edge) become zero. Thread tid moves
// the 16-byte chunks (it * RSTEP + tid / CPR, (tid % CPR) * 8), so consecutive threads
// fill consecutive chunks of a row (coalesced, and conflict-free under the swizzle).
// When the tile's chunks are not a multiple of the threads (a 64 x 64 tile over 384
// threads), the last pass covers the rows left and the threads past them skip it.
// When ld is a multiple of 8 and g is 16-byte aligned (COPY_VEC), every chunk lies
// wholly inside or wholly outside the tensor: one predicated cp.async per chunk
// (zero-filled when outside), no branch. Otherwise (COPY_SCALAR) chunks are gathered
// element by element, COPY_WORDS included. (tl::wg::copy_tile moves 4-byte cp.async
// words where every row starts on a 4-byte boundary; here the branch for it, decided per
// call, pushed the 64 x 256 tile over its registers on sm_80: 72-80 bytes of spills.)
template <typename T, int R, int C, int THREADS, int MODE = COPY_CHECK>
__device__ __forceinline__ void copy_tile(T* s, const T* g, int ld, int rows, int cols) {
  constexpr int CPR = C / 8;
  static_assert(C % 8 == 0 && THREADS % CPR == 0,
                "tl::copy_tile: a tile row's 16-byte chunks must divide the threads");
  constexpr int RSTEP = THREADS / CPR, ITERS = (R + RSTEP - 1) / RSTEP;
  constexpr bool WHOLE = R % RSTEP == 0;  // no pass runs past the tile's last row
  const int r_t = threadIdx.x / CPR, c_t = (threadIdx.x % CPR) * 8;
  const bool vec = MODE == COPY_VEC || (MODE == COPY_CHECK && ld % 8 == 0 && aligned16(g));
  if (vec) {
    // One pointer stepped from chunk to chunk; the empty asm hides the steps' sum
    // from the compiler, which would otherwise keep every chunk's offset in a
    // register across the caller's loop.
    const T* p = g + (long long)r_t * ld + c_t;
    const long long step = (long long)RSTEP * ld;
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int r = it * RSTEP + r_t;
      if (WHOLE || r < R) cp_async16(s + smem_offset<R, C>(r, c_t), p, r < rows && c_t < cols);
      p += step;
      asm volatile("" : "+l"(p));
    }
  } else {
    // Element by element, in batches of up to four chunks whose loads are all issued
    // before the batch's stores (one memory latency per batch, not per chunk).
    struct alignas(16) Chunk { T e[8]; };
    // Two chunks per batch: four pushed the 8-warp k32 GEMM over its registers on sm_80.
    constexpr int BATCH = ITERS % 2 == 0 ? 2 : 1;
#pragma unroll 1
    for (int it0 = 0; it0 < ITERS; it0 += BATCH) {
      Chunk v[BATCH];
#pragma unroll
      for (int b = 0; b < BATCH; ++b) {
        const int r = (it0 + b) * RSTEP + r_t;
#pragma unroll
        for (int e = 0; e < 8; ++e)
          v[b].e[e] = (r < rows && c_t + e < cols) ? g[(long long)r * ld + c_t + e] : detail::zero<T>();
      }
#pragma unroll
      for (int b = 0; b < BATCH; ++b) {
        const int r = (it0 + b) * RSTEP + r_t;
        if (WHOLE || r < R) *reinterpret_cast<Chunk*>(s + smem_offset<R, C>(r, c_t)) = v[b];
      }
    }
  }
}

// ---- tile GEMM on tensor cores ---------------------------------------------
// One warp's share of C[M,N] += A[M,K] * B[K,N] over the whole block (32*WM*WN
// threads, 1-D block), with its register fragments as state, so that a software
// pipeline can fetch the first k step of the next stage while the current stage's
// last step multiplies (see GemmPipe::run).
template <typename TA, int M, int N, int K, int WM, int WN, bool TRANS_A, bool TRANS_B>
struct GemmPipe {
  static_assert(detail::is_same<TA, half>::value || detail::is_same<TA, __nv_bfloat16>::value,
                "tl::gemm_ss: TA must be half or __nv_bfloat16");
  using G = detail::Geom<M, N, K, WM, WN, TRANS_A, TRANS_B>;
  static constexpr int MI = G::MI, NI = G::NI, KS = G::KS;

  // Double-buffered register fragments: step kk+1 is loaded while step kk multiplies.
  unsigned fa[2][MI][4];
  unsigned fb[2][NI][2];
  int a_sw, b_sw;  // this lane's swizzled chunk positions

  __device__ __forceinline__ GemmPipe() {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    a_sw = detail::Swz<G::A_COLS>::apply(G::a_lane(G::warp_m(warp), lane));
    b_sw = detail::Swz<G::B_COLS>::apply(G::b_lane(G::warp_n(warp), lane));
  }

  // Fragments of step kk into buffer buf, fetched in the order the first multiplies
  // need them (B pair 0, A 0, ...).
  __device__ __forceinline__ void load(const TA* A, const TA* B, int kk, int buf) {
    const unsigned a_base = detail::smem_u32(A);
    const unsigned b_base = detail::smem_u32(B);
    constexpr int LD_STEPS = MI > NI / 2 ? MI : NI / 2;
#pragma unroll
    for (int x = 0; x < LD_STEPS; ++x) {
      if (x < NI / 2) {
        const int off = G::template at<G::B_COLS>(b_sw, G::b_const(x, kk));
        unsigned r[4];
        detail::ldsm<!TRANS_B>(b_base + off * 16, r);
        fb[buf][2 * x][0] = r[0];
        fb[buf][2 * x][1] = r[1];
        fb[buf][2 * x + 1][0] = r[2];
        fb[buf][2 * x + 1][1] = r[3];
      }
      if (x < MI) {
        const int off = G::template at<G::A_COLS>(a_sw, G::a_const(x, kk));
        detail::ldsm<TRANS_A>(a_base + off * 16, fa[buf][x]);
      }
    }
  }

  // Step 0 of the stage (A, B): must precede run(A, B, ...).
  __device__ __forceinline__ void first(const TA* A, const TA* B) { load(A, B, 0, 0); }

  // Multiplies the stage (A, B) into acc. After the first step's multiplies are issued
  // it calls after_first() (work placed there, such as the address arithmetic of the
  // next copies, issues while the tensor cores are busy). Before the last step's
  // multiplies it calls before_last(), which may call first() for the next stage: those
  // loads then overlap the last step's multiplies instead of stalling the next stage's
  // first one. The next stage's step 0 lands in buffer KS % 2, so that needs an even KS.
  template <typename F1, typename F2>
  __device__ __forceinline__ void run(const TA* A, const TA* B, float* acc, F1&& after_first,
                                      F2&& before_last) {
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      if (kk + 1 < KS) load(A, B, kk + 1, (kk + 1) & 1);
      else before_last();
      const int buf = kk & 1;
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int n = 0; n < NI; ++n) {
          const int ni = (mi & 1) ? (NI - 1 - n) : n;  // serpentine: reuse the B fragment
          detail::Mma<TA>::run(acc + (mi * NI + ni) * 4, fa[buf][mi], fb[buf][ni][0], fb[buf][ni][1]);
        }
      }
      if (kk == 0) after_first();
    }
  }
};

// C[M,N] += A[M,K] * B[K,N] over the whole block, one shared stage at a time.
template <typename TA, typename TC, int M, int N, int K, int WM, int WN, bool TRANS_A, bool TRANS_B>
__device__ __forceinline__ void gemm_ss(const TA* A, const TA* B, TC* acc) {
  static_assert(detail::is_same<TC, float>::value, "tl::gemm_ss: TC must be float");
  GemmPipe<TA, M, N, K, WM, WN, TRANS_A, TRANS_B> p;
  p.first(A, B);
  p.run(A, B, acc, [] {}, [] {});
}

// Which element (i, j) of the block's C[M][N] tile this thread's acc[slot] holds.
// Slots 2q, 2q+1 are (i, j), (i, j+1) with j even.
template <int M, int N, int WM, int WN>
__device__ __forceinline__ void acc_coord(int slot, int& i, int& j) {
  detail::Geom<M, N, 16, WM, WN, false, false>::acc_coord(threadIdx.x, slot, i, j);
}

// ---- row fragments ---------------------------------------------------------
// A per-row value kept beside an accumulator (a running row maximum, a row sum)
// lives in the registers of the threads whose accumulator registers cover its
// row: no shared memory, no barrier. Row slot r of the thread is row
// mma_row<M, WM>(r) of the M-row tile (two rows, g and g + 8, per 16-row strip of
// the warp's tile); accumulator slot s of an M x N accumulator in
// acc_coord<M, N, WM, WN> order lies in row slot mma_row_slot<M, N, WM, WN>(s).
// The threads of a row (the four lanes of a quad, in each of the WN warps along
// N) hold equal copies; mma_row_owner() picks one of them for stores to memory.
template <int M, int WM>
__device__ __forceinline__ int mma_row(int r) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  return (warp % WM) * (M / WM) + (r >> 1) * 16 + (lane >> 2) + ((r & 1) << 3);
}
template <int M, int N, int WM, int WN>
TL_HD constexpr int mma_row_slot(int slot) {
  return ((slot >> 2) / (N / WN / 8)) * 2 + ((slot >> 1) & 1);
}
template <int WM>
__device__ __forceinline__ bool mma_row_owner() {
  return (threadIdx.x & 3) == 0 && (int)(threadIdx.x >> 5) < WM;
}
// The same for wgmma's accumulator (tl::wg::acc_coord): two rows per 64-row
// strip of the warpgroup's M/WGS rows, 16 per warp; all of a row's registers sit
// in one quad.
template <int M, int WGS>
__device__ __forceinline__ int wg_row(int r) {
  const int g = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, l = threadIdx.x & 31;
  return g * (M / WGS) + 64 * (r >> 1) + 16 * w + (l >> 2) + ((r & 1) << 3);
}
template <int M, int N, int WGS>
TL_HD constexpr int wg_row_slot(int slot) {
  return (slot / (N / 2)) * 2 + (((slot % (N / 2)) >> 1) & 1);
}
__device__ __forceinline__ bool wg_row_owner() { return (threadIdx.x & 3) == 0; }

namespace detail {
template <typename T> __device__ __forceinline__ unsigned pack2(T lo, T hi);
template <> __device__ __forceinline__ unsigned pack2<half>(half lo, half hi) {
  __half2 h = __halves2half2(lo, hi);
  return *reinterpret_cast<unsigned*>(&h);
}
template <> __device__ __forceinline__ unsigned pack2<__nv_bfloat16>(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  __nv_bfloat162 h = __halves2bfloat162(lo, hi);
  return *reinterpret_cast<unsigned*>(&h);
}
}  // namespace detail

// C[M,N] += A[M,K] * B[K,N] with A in registers: `a` is an M x K fragment of TA in
// acc_coord<M, K, WM, 1> order (an accumulator converted element by element), so
// each warp holds whole rows of A and its m16n8k16 A operands are pairs of its own
// registers: slots (mi*K/8 + 2*kk)*4 + 0..7 are the (g, g+8) x (k, k+8) quarters of
// k step kk. B is a swizzled shared tile; acc is in acc_coord<M, N, WM, 1> order.
template <typename TA, int M, int N, int K, int WM, bool TRANS_B>
__device__ __forceinline__ void gemm_rs(const TA* a, const TA* B, float* acc) {
  using G = detail::Geom<M, N, K, WM, 1, false, TRANS_B>;
  constexpr int MI = G::MI, NI = G::NI, KS = G::KS, NIA = K / 8;
  const int lane = threadIdx.x & 31;
  const int b_sw = detail::Swz<G::B_COLS>::apply(G::b_lane(0, lane));
  const unsigned b_base = detail::smem_u32(B);
#pragma unroll
  for (int kk = 0; kk < KS; ++kk) {
    unsigned fb[NI][2];
#pragma unroll
    for (int x = 0; x < NI / 2; ++x) {
      unsigned r[4];
      detail::ldsm<!TRANS_B>(b_base + G::template at<G::B_COLS>(b_sw, G::b_const(x, kk)) * 16, r);
      fb[2 * x][0] = r[0];
      fb[2 * x][1] = r[1];
      fb[2 * x + 1][0] = r[2];
      fb[2 * x + 1][1] = r[3];
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const TA* p = a + (mi * NIA + 2 * kk) * 4;
      const unsigned fa[4] = {detail::pack2(p[0], p[1]), detail::pack2(p[2], p[3]),
                              detail::pack2(p[4], p[5]), detail::pack2(p[6], p[7])};
#pragma unroll
      for (int n = 0; n < NI; ++n) {
        const int ni = (mi & 1) ? (NI - 1 - n) : n;
        detail::Mma<TA>::run(acc + (mi * NI + ni) * 4, fa, fb[ni][0], fb[ni][1]);
      }
    }
  }
}

}  // namespace tl

#undef TL_HD
#endif  // TL_GEMM_CUH_
