// tl/wgmma.cuh -- Hopper wgmma GEMM building blocks for the CUDA backend (sm_90a).
//
// Pasted verbatim into generated CUDA C++ (nvcc or NVRTC) after tl/gemm.cuh, whose
// cp_async16 and copy modes it reuses. Includes only <cuda_fp16.h> / <cuda_bf16.h>;
// wgmma, the fences and the shared-memory descriptors are inline PTX. Public names live
// in tl::wg, helpers in tl::wg::detail. The contract is in README.md next to this file.
//
// Architectures: every name is declared in every compilation pass, because nvcc's host
// pass parses the kernel bodies that call them. The bodies that use sm_90a instructions
// are compiled only in a device pass for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL, which
// compute_90a defines and compute_90 / compute_100a do not); the host pass sees empty
// bodies, and instantiating one of them in a device pass for any other architecture is a
// compile-time error. The layout functions are plain __host__ __device__ C++.
#ifndef TL_WGMMA_CUH_
#define TL_WGMMA_CUH_

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef TL_GEMM_CUH_
#error "tl/wgmma.cuh needs tl/gemm.cuh before it"
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TLWG_SM90A 1
#else
#define TLWG_SM90A 0
#endif
#if defined(__CUDA_ARCH__) && !TLWG_SM90A
#define TLWG_OTHER_DEVICE 1
#else
#define TLWG_OTHER_DEVICE 0
#endif

#define TLWG_HD __host__ __device__ __forceinline__

namespace tl {
namespace wg {
namespace detail {

template <typename X> struct dependent_false { static constexpr bool value = false; };
// The operand types wgmma takes from shared memory here.
template <typename X> struct is_operand { static constexpr bool value = false; };
template <> struct is_operand<half> { static constexpr bool value = true; };
template <> struct is_operand<__nv_bfloat16> { static constexpr bool value = true; };
#if defined(__CUDA_FP8_TYPES_EXIST__)
template <> struct is_operand<__nv_fp8_e4m3> { static constexpr bool value = true; };
template <> struct is_operand<__nv_fp8_e5m2> { static constexpr bool value = true; };
#endif
__host__ __device__ constexpr int ilog2(int x) { return x <= 1 ? 0 : 1 + ilog2(x >> 1); }

// ---------------------------------------------------------------------------
// The canonical swizzled layout that wgmma reads through a descriptor.
//
// A tile of COLS 2-byte columns is cut into panels of PW = min(COLS, 64) columns; a
// panel holds all ROWS rows, PW*2 bytes each (128 bytes for PW = 64). Inside a panel the
// 16-byte chunk q of row r sits at chunk position q ^ ((r >> RDIV_LOG) & (CPR - 1)):
// for 128-byte rows that is q ^ (r % 8). It is exactly what the hardware swizzle does
// to the address bits, [4, 4+b) ^= [7, 7+b) with b = log2(CPR), when every panel starts
// on a 1024-byte boundary (the swizzle period for 128-byte rows: 8 rows).
// PW = 64 (128-byte swizzle) is the main case; COLS = 32 and COLS = 16 (K = 32 or 16
// tiles of a K-major operand) use the 64- and 32-byte swizzle of the same family.
// ---------------------------------------------------------------------------
//
// EB is the element size: 2 (f16, bf16) or 1 (the fp8 formats, whose 128-byte panels hold
// 128 columns and whose 16-byte chunks hold 16 elements). Everything else is in bytes and
// the same for both.
template <int COLS, int EB = 2> struct Layout {
  static_assert(EB == 1 || EB == 2, "tl::wg: elements of 1 or 2 bytes");
  static_assert(COLS * EB == 32 || COLS * EB == 64 || (COLS > 0 && COLS * EB % 128 == 0),
                "tl::wg: a tile row must be 32 or 64 bytes or whole 128-byte panels");
  static constexpr int EPC = 16 / EB;                                // elements per 16-byte chunk
  static constexpr int PW = COLS * EB < 128 ? COLS : 128 / EB;       // panel width, elements
  static constexpr int PW_LOG = ilog2(PW);
  static constexpr int ROW_BYTES = EB * PW;                          // 128, 64 or 32
  static constexpr int CPR = ROW_BYTES / 16;                         // chunks per panel row
  static constexpr int RDIV_LOG = 3 - ilog2(CPR);                    // rows per 128 bytes, log2
  static constexpr int SWIZZLE = CPR == 8 ? 1 : CPR == 4 ? 2 : 3;    // descriptor mode (bits 62-63)
  static constexpr int ATOM_BYTES = 8 * ROW_BYTES;                   // 8 rows: the swizzle period
};

}  // namespace detail

// ---- shared-memory tile layout ----------------------------------------------
// Element offset of (r, c) in a ROWS x COLS tile of EB-byte elements, in the layout above.
// Rows of whole 128-byte panels (or of 32 or 64 bytes), ROWS % 8 == 0; a bijection onto
// [0, ROWS*COLS). The EPC elements (r, c0..c0+EPC-1), c0 % EPC == 0, are contiguous and
// 16-byte aligned.
template <int ROWS, int COLS, int EB = 2>
TLWG_HD constexpr int smem_offset(int r, int c) {
  using L = detail::Layout<COLS, EB>;
  static_assert(ROWS > 0 && ROWS % 8 == 0, "tl::wg::smem_offset: ROWS must be a multiple of 8");
  return (c >> L::PW_LOG) * (ROWS * L::PW) + (r << L::PW_LOG) +
         ((((c & (L::PW - 1)) / L::EPC) ^ ((r >> L::RDIV_LOG) & (L::CPR - 1))) * L::EPC) + (c % L::EPC);
}

template <int M, int N, int WGS>
__host__ __device__ constexpr int acc_regs() { return M * N / (128 * WGS); }

namespace detail {

// ---------------------------------------------------------------------------
// Shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address
// >> 4 in bits 0-13, leading-dimension byte offset (LBO) >> 4 in bits 16-29, stride-
// dimension byte offset (SBO) >> 4 in bits 32-45, base offset 0 in bits 49-51 (the
// panels are aligned to their swizzle period), swizzle mode in bits 62-63.
// ---------------------------------------------------------------------------
TLWG_HD constexpr unsigned long long make_desc(unsigned addr, unsigned lbo, unsigned sbo, int swizzle) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32) | ((unsigned long long)swizzle << 62);
}
// Moves a descriptor's start address by `bytes` (a multiple of 16; the start field does
// not overflow because shared addresses stay below 2^18).
TLWG_HD constexpr unsigned long long desc_add(unsigned long long d, unsigned bytes) { return d + (bytes >> 4); }

// One operand tile as wgmma reads it, in the layout of smem_offset<ROWS, COLS>.
// KMAJOR: the rows run along M (operand A) or N (operand B) and the columns along K
// (transpose immediate 0). Otherwise the rows run along K and the columns along M or N
// ("MN-major", transpose immediate 1).
//   K-major:  one k16 slice lies inside one row of one panel (32 bytes of 32, 64 or 128);
//             SBO = 8 rows (one swizzle period) and LBO is unused (16).
//   MN-major: the MN extent crosses 64-column panels: LBO = the panel stride
//             (ROWS * 128 bytes), SBO = 8 k rows (1024 bytes); a k16 step is 16 rows.
// start(x0, ks) is the byte offset of the slice at MN index x0 (a multiple of 64 for
// MN-major, of 8 for K-major) and k = 16*ks: the offset of its first element, which the
// swizzle leaves in place (row and column multiples of 8).
// With 1-byte elements (fp8, K-major only) a k step is 32 elements: 32 bytes, as for EB = 2.
template <int ROWS, int COLS, bool KMAJOR, int EB = 2> struct Operand {
  using L = Layout<COLS, EB>;
  static_assert(KMAJOR || EB == 2, "tl::wg: an operand of 1-byte elements is K-major");
  static constexpr int KSTEP = 32 / EB;
  static constexpr unsigned LBO = KMAJOR ? 16u : (unsigned)(ROWS * L::ROW_BYTES);
  static constexpr unsigned SBO = L::ATOM_BYTES;
  static constexpr int SWIZZLE = L::SWIZZLE;
  static TLWG_HD constexpr unsigned start(int x0, int ks) {
    return (unsigned)EB * (unsigned)(KMAJOR ? smem_offset<ROWS, COLS, EB>(x0, KSTEP * ks)
                                             : smem_offset<ROWS, COLS, EB>(KSTEP * ks, x0));
  }
  static TLWG_HD constexpr unsigned long long desc(unsigned addr) { return make_desc(addr, LBO, SBO, SWIZZLE); }
};

// The block GEMM's geometry: warpgroup g owns rows [g*MW, (g+1)*MW) of C and all N
// columns, as MI = MW/64 strips of m64nN. A is [M][K] (K-major) or, TRANS_A, [K][M];
// B is [K][N] (MN-major) or, TRANS_B, [N][K] (K-major).
// EB: the operands' element size (1: fp8, k32 steps, both operands K-major).
template <int M, int N, int K, int WGS, bool TRANS_A, bool TRANS_B, int EB = 2> struct Geom {
  static constexpr int KSTEP = 32 / EB;
  static_assert(WGS >= 1 && M % (64 * WGS) == 0, "tl::wg: M / WGS must be a multiple of 64");
  static_assert(N >= 8 && N <= 256 && N % 8 == 0, "tl::wg: N must be a multiple of 8 in [8, 256]");
  static_assert(K >= KSTEP && K % KSTEP == 0, "tl::wg: K must be whole k steps (16, or 32 for fp8)");
  static_assert(EB == 2 || (!TRANS_A && TRANS_B), "tl::wg: fp8 operands are K-major (A [M][K], B [N][K])");
  static constexpr int MW = M / WGS, MI = MW / 64, KS = K / KSTEP, REGS = MI * N / 2, THREADS = 128 * WGS;
  using OA = Operand<TRANS_A ? K : M, TRANS_A ? M : K, !TRANS_A, EB>;
  using OB = Operand<TRANS_B ? N : K, TRANS_B ? K : N, TRANS_B, EB>;
  static constexpr int TRANS_A_IMM = TRANS_A ? 1 : 0, TRANS_B_IMM = TRANS_B ? 0 : 1;
  // Byte offsets from the tile bases of the slices of warpgroup g, strip mi, k step ks
  // (the device code adds g * A_WG at run time and the rest as constants).
  static constexpr unsigned A_WG = OA::start(MW, 0);
  static TLWG_HD constexpr unsigned a_off(int g, int mi, int ks) { return g * A_WG + OA::start(64 * mi, ks); }
  static TLWG_HD constexpr unsigned b_off(int ks) { return OB::start(0, ks); }
};

// Accumulator slot -> (i, j) of the block's C[M][N] for thread tid (M/WGS rows per
// warpgroup). Slot s = mi*(N/2) + 4*q + e holds row g*(M/WGS) + 64*mi + 16*w + l/4 + 8*(e/2),
// column 8*q + 2*(l%4) + e%2, for warpgroup g, warp w of it and lane l: the f32
// accumulator layout of wgmma m64nNk16, one m64 strip after another.
template <int M, int N, int WGS>
TLWG_HD void acc_coord_of(int tid, int slot, int& i, int& j) {
  const int g = tid >> 7, w = (tid >> 5) & 3, l = tid & 31;
  const int mi = slot / (N / 2), r = slot % (N / 2), q = r >> 2, e = r & 3;
  i = g * (M / WGS) + 64 * mi + 16 * w + (l >> 2) + ((e >> 1) << 3);
  j = 8 * q + ((l & 3) << 1) + (e & 1);
}

#if TLWG_SM90A
// ---------------------------------------------------------------------------
// sm_90a instructions.
// ---------------------------------------------------------------------------
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins the accumulators in program order: nothing that reads or writes them moves
// across (used around the asynchronous wgmma region).
template <int R> __device__ __forceinline__ void fence_regs(float* d) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// wgmma.mma_async m64nNk16, f32 accumulators d[0 .. N/2), A and B from descriptors,
// scale-d 1 (accumulate), transpose immediates TRA / TRB.
template <typename T, int N> struct Mma;
#define TLWG_C4_(i) "+f"(d[(i)]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3])
// DR: the accumulator operands "%0, ..., %(N/2-1)"; DA, DB, SC, TA_, TB_: the operand
// numbers of the A descriptor, B descriptor, scale-d and the two transpose immediates.
#define TLWG_MMA_T(CT, PT, N, DR, DA, DB, SC, TA_, TB_, ...)                                                  \
  template <> struct Mma<CT, N> {                                                                             \
    template <int TRA, int TRB>                                                                               \
    __device__ __forceinline__ static void run(float* d, unsigned long long da, unsigned long long db,       \
                                               int scale_d = 1) {                                             \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SC ", 0;\n"                                         \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PT "." PT " {" DR "}, %" #DA ", %" #DB  \
                   ", p, 1, 1, %" #TA_ ", %" #TB_ ";\n}\n"                                                   \
                   : __VA_ARGS__                                                                              \
                   : "l"(da), "l"(db), "r"(scale_d), "n"(TRA), "n"(TRB));                                     \
    }                                                                                                         \
  };
#define TLWG_MMA(N, DR, DA, DB, SC, TA_, TB_, ...)                        \
  TLWG_MMA_T(half, "f16", N, DR, DA, DB, SC, TA_, TB_, __VA_ARGS__)        \
  TLWG_MMA_T(__nv_bfloat16, "bf16", N, DR, DA, DB, SC, TA_, TB_, __VA_ARGS__)

// The fp8 forms (m64nNk32, f32 accumulators): no transpose immediates, both operands
// K-major. Declared when the kernel includes <cuda_fp8.h> (it does when it uses fp8).
#if defined(__CUDA_FP8_TYPES_EXIST__)
#define TLWG_MMA8_T(CT, PT, N, DR, DA, DB, SC, ...)                                                           \
  template <> struct Mma<CT, N> {                                                                             \
    template <int TRA, int TRB>                                                                               \
    __device__ __forceinline__ static void run(float* d, unsigned long long da, unsigned long long db,       \
                                               int scale_d = 1) {                                             \
      static_assert(TRA == 0 && TRB == 0, "tl::wg: fp8 wgmma reads K-major operands only");                   \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SC ", 0;\n"                                         \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32." PT "." PT " {" DR "}, %" #DA ", %" #DB  \
                   ", p, 1, 1;\n}\n"                                                                            \
                   : __VA_ARGS__                                                                              \
                   : "l"(da), "l"(db), "r"(scale_d));                                                         \
    }                                                                                                         \
  };
#define TLWG_MMA8(N, DR, DA, DB, SC, TA_, TB_, ...)                   \
  TLWG_MMA8_T(__nv_fp8_e4m3, "e4m3", N, DR, DA, DB, SC, __VA_ARGS__)  \
  TLWG_MMA8_T(__nv_fp8_e5m2, "e5m2", N, DR, DA, DB, SC, __VA_ARGS__)
#else
#define TLWG_MMA8(...)
#endif

#define TLWG_MMA_ALL(...) TLWG_MMA(__VA_ARGS__) TLWG_MMA8(__VA_ARGS__)

#define TLWG_D4 "%0, %1, %2, %3"
#define TLWG_D8 TLWG_D4 ", %4, %5, %6, %7"
#define TLWG_D12 TLWG_D8 ", %8, %9, %10, %11"
#define TLWG_D16 TLWG_D12 ", %12, %13, %14, %15"
#define TLWG_D20 TLWG_D16 ", %16, %17, %18, %19"
#define TLWG_D24 TLWG_D20 ", %20, %21, %22, %23"
#define TLWG_D28 TLWG_D24 ", %24, %25, %26, %27"
#define TLWG_D32 TLWG_D28 ", %28, %29, %30, %31"
#define TLWG_D36 TLWG_D32 ", %32, %33, %34, %35"
#define TLWG_D40 TLWG_D36 ", %36, %37, %38, %39"
#define TLWG_D44 TLWG_D40 ", %40, %41, %42, %43"
#define TLWG_D48 TLWG_D44 ", %44, %45, %46, %47"
#define TLWG_D52 TLWG_D48 ", %48, %49, %50, %51"
#define TLWG_D56 TLWG_D52 ", %52, %53, %54, %55"
#define TLWG_D60 TLWG_D56 ", %56, %57, %58, %59"
#define TLWG_D64 TLWG_D60 ", %60, %61, %62, %63"
#define TLWG_D68 TLWG_D64 ", %64, %65, %66, %67"
#define TLWG_D72 TLWG_D68 ", %68, %69, %70, %71"
#define TLWG_D76 TLWG_D72 ", %72, %73, %74, %75"
#define TLWG_D80 TLWG_D76 ", %76, %77, %78, %79"
#define TLWG_D84 TLWG_D80 ", %80, %81, %82, %83"
#define TLWG_D88 TLWG_D84 ", %84, %85, %86, %87"
#define TLWG_D92 TLWG_D88 ", %88, %89, %90, %91"
#define TLWG_D96 TLWG_D92 ", %92, %93, %94, %95"
#define TLWG_D100 TLWG_D96 ", %96, %97, %98, %99"
#define TLWG_D104 TLWG_D100 ", %100, %101, %102, %103"
#define TLWG_D108 TLWG_D104 ", %104, %105, %106, %107"
#define TLWG_D112 TLWG_D108 ", %108, %109, %110, %111"
#define TLWG_D116 TLWG_D112 ", %112, %113, %114, %115"
#define TLWG_D120 TLWG_D116 ", %116, %117, %118, %119"
#define TLWG_D124 TLWG_D120 ", %120, %121, %122, %123"
#define TLWG_D128 TLWG_D124 ", %124, %125, %126, %127"

#define TLWG_C4 TLWG_C4_(0)
#define TLWG_C8 TLWG_C4, TLWG_C4_(4)
#define TLWG_C12 TLWG_C8, TLWG_C4_(8)
#define TLWG_C16 TLWG_C12, TLWG_C4_(12)
#define TLWG_C20 TLWG_C16, TLWG_C4_(16)
#define TLWG_C24 TLWG_C20, TLWG_C4_(20)
#define TLWG_C28 TLWG_C24, TLWG_C4_(24)
#define TLWG_C32 TLWG_C28, TLWG_C4_(28)
#define TLWG_C36 TLWG_C32, TLWG_C4_(32)
#define TLWG_C40 TLWG_C36, TLWG_C4_(36)
#define TLWG_C44 TLWG_C40, TLWG_C4_(40)
#define TLWG_C48 TLWG_C44, TLWG_C4_(44)
#define TLWG_C52 TLWG_C48, TLWG_C4_(48)
#define TLWG_C56 TLWG_C52, TLWG_C4_(52)
#define TLWG_C60 TLWG_C56, TLWG_C4_(56)
#define TLWG_C64 TLWG_C60, TLWG_C4_(60)
#define TLWG_C68 TLWG_C64, TLWG_C4_(64)
#define TLWG_C72 TLWG_C68, TLWG_C4_(68)
#define TLWG_C76 TLWG_C72, TLWG_C4_(72)
#define TLWG_C80 TLWG_C76, TLWG_C4_(76)
#define TLWG_C84 TLWG_C80, TLWG_C4_(80)
#define TLWG_C88 TLWG_C84, TLWG_C4_(84)
#define TLWG_C92 TLWG_C88, TLWG_C4_(88)
#define TLWG_C96 TLWG_C92, TLWG_C4_(92)
#define TLWG_C100 TLWG_C96, TLWG_C4_(96)
#define TLWG_C104 TLWG_C100, TLWG_C4_(100)
#define TLWG_C108 TLWG_C104, TLWG_C4_(104)
#define TLWG_C112 TLWG_C108, TLWG_C4_(108)
#define TLWG_C116 TLWG_C112, TLWG_C4_(112)
#define TLWG_C120 TLWG_C116, TLWG_C4_(116)
#define TLWG_C124 TLWG_C120, TLWG_C4_(120)
#define TLWG_C128 TLWG_C124, TLWG_C4_(124)

TLWG_MMA_ALL(8, TLWG_D4, 4, 5, 6, 7, 8, TLWG_C4)
TLWG_MMA_ALL(16, TLWG_D8, 8, 9, 10, 11, 12, TLWG_C8)
TLWG_MMA_ALL(24, TLWG_D12, 12, 13, 14, 15, 16, TLWG_C12)
TLWG_MMA_ALL(32, TLWG_D16, 16, 17, 18, 19, 20, TLWG_C16)
TLWG_MMA_ALL(40, TLWG_D20, 20, 21, 22, 23, 24, TLWG_C20)
TLWG_MMA_ALL(48, TLWG_D24, 24, 25, 26, 27, 28, TLWG_C24)
TLWG_MMA_ALL(56, TLWG_D28, 28, 29, 30, 31, 32, TLWG_C28)
TLWG_MMA_ALL(64, TLWG_D32, 32, 33, 34, 35, 36, TLWG_C32)
TLWG_MMA_ALL(72, TLWG_D36, 36, 37, 38, 39, 40, TLWG_C36)
TLWG_MMA_ALL(80, TLWG_D40, 40, 41, 42, 43, 44, TLWG_C40)
TLWG_MMA_ALL(88, TLWG_D44, 44, 45, 46, 47, 48, TLWG_C44)
TLWG_MMA_ALL(96, TLWG_D48, 48, 49, 50, 51, 52, TLWG_C48)
TLWG_MMA_ALL(104, TLWG_D52, 52, 53, 54, 55, 56, TLWG_C52)
TLWG_MMA_ALL(112, TLWG_D56, 56, 57, 58, 59, 60, TLWG_C56)
TLWG_MMA_ALL(120, TLWG_D60, 60, 61, 62, 63, 64, TLWG_C60)
TLWG_MMA_ALL(128, TLWG_D64, 64, 65, 66, 67, 68, TLWG_C64)
TLWG_MMA_ALL(136, TLWG_D68, 68, 69, 70, 71, 72, TLWG_C68)
TLWG_MMA_ALL(144, TLWG_D72, 72, 73, 74, 75, 76, TLWG_C72)
TLWG_MMA_ALL(152, TLWG_D76, 76, 77, 78, 79, 80, TLWG_C76)
TLWG_MMA_ALL(160, TLWG_D80, 80, 81, 82, 83, 84, TLWG_C80)
TLWG_MMA_ALL(168, TLWG_D84, 84, 85, 86, 87, 88, TLWG_C84)
TLWG_MMA_ALL(176, TLWG_D88, 88, 89, 90, 91, 92, TLWG_C88)
TLWG_MMA_ALL(184, TLWG_D92, 92, 93, 94, 95, 96, TLWG_C92)
TLWG_MMA_ALL(192, TLWG_D96, 96, 97, 98, 99, 100, TLWG_C96)
TLWG_MMA_ALL(200, TLWG_D100, 100, 101, 102, 103, 104, TLWG_C100)
TLWG_MMA_ALL(208, TLWG_D104, 104, 105, 106, 107, 108, TLWG_C104)
TLWG_MMA_ALL(216, TLWG_D108, 108, 109, 110, 111, 112, TLWG_C108)
TLWG_MMA_ALL(224, TLWG_D112, 112, 113, 114, 115, 116, TLWG_C112)
TLWG_MMA_ALL(232, TLWG_D116, 116, 117, 118, 119, 120, TLWG_C116)
TLWG_MMA_ALL(240, TLWG_D120, 120, 121, 122, 123, 124, TLWG_C120)
TLWG_MMA_ALL(248, TLWG_D124, 124, 125, 126, 127, 128, TLWG_C124)
TLWG_MMA_ALL(256, TLWG_D128, 128, 129, 130, 131, 132, TLWG_C128)

// The same with A from registers ("RS"): a[0..3] is the thread's share of one m64 x k16
// slice of A, in the register order of mma.sync's m16n8k16 A operand for the rows
// 16*w .. 16*w+15 of the strip (w: the warp in its warpgroup). B from a descriptor,
// transpose immediate TRB. A0..A3, DB, SC, TB_: operand numbers, as above.
template <typename T, int N> struct MmaRs;
#define TLWG_MMA_RS_T(CT, PT, N, DR, A0, A1, A2, A3, DB, SC, TB_, ...)                                       \
  template <> struct MmaRs<CT, N> {                                                                           \
    template <int TRB>                                                                                        \
    __device__ __forceinline__ static void run(float* d, const unsigned (&a)[4], unsigned long long db) {    \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SC ", 0;\n"                                        \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PT "." PT " {" DR "}, {%" #A0 ", %" #A1 \
                   ", %" #A2 ", %" #A3 "}, %" #DB ", p, 1, 1, %" #TB_ ";\n}\n"                                 \
                   : __VA_ARGS__                                                                              \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1), "n"(TRB));                 \
    }                                                                                                         \
  };
#define TLWG_MMA_RS(N, DR, ...)                                                          \
  TLWG_MMA_RS_T(half, "f16", N, DR, __VA_ARGS__)                                         \
  TLWG_MMA_RS_T(__nv_bfloat16, "bf16", N, DR, __VA_ARGS__)

TLWG_MMA_RS(8, TLWG_D4, 4, 5, 6, 7, 8, 9, 10, TLWG_C4)
TLWG_MMA_RS(16, TLWG_D8, 8, 9, 10, 11, 12, 13, 14, TLWG_C8)
TLWG_MMA_RS(24, TLWG_D12, 12, 13, 14, 15, 16, 17, 18, TLWG_C12)
TLWG_MMA_RS(32, TLWG_D16, 16, 17, 18, 19, 20, 21, 22, TLWG_C16)
TLWG_MMA_RS(40, TLWG_D20, 20, 21, 22, 23, 24, 25, 26, TLWG_C20)
TLWG_MMA_RS(48, TLWG_D24, 24, 25, 26, 27, 28, 29, 30, TLWG_C24)
TLWG_MMA_RS(56, TLWG_D28, 28, 29, 30, 31, 32, 33, 34, TLWG_C28)
TLWG_MMA_RS(64, TLWG_D32, 32, 33, 34, 35, 36, 37, 38, TLWG_C32)
TLWG_MMA_RS(72, TLWG_D36, 36, 37, 38, 39, 40, 41, 42, TLWG_C36)
TLWG_MMA_RS(80, TLWG_D40, 40, 41, 42, 43, 44, 45, 46, TLWG_C40)
TLWG_MMA_RS(88, TLWG_D44, 44, 45, 46, 47, 48, 49, 50, TLWG_C44)
TLWG_MMA_RS(96, TLWG_D48, 48, 49, 50, 51, 52, 53, 54, TLWG_C48)
TLWG_MMA_RS(104, TLWG_D52, 52, 53, 54, 55, 56, 57, 58, TLWG_C52)
TLWG_MMA_RS(112, TLWG_D56, 56, 57, 58, 59, 60, 61, 62, TLWG_C56)
TLWG_MMA_RS(120, TLWG_D60, 60, 61, 62, 63, 64, 65, 66, TLWG_C60)
TLWG_MMA_RS(128, TLWG_D64, 64, 65, 66, 67, 68, 69, 70, TLWG_C64)
TLWG_MMA_RS(136, TLWG_D68, 68, 69, 70, 71, 72, 73, 74, TLWG_C68)
TLWG_MMA_RS(144, TLWG_D72, 72, 73, 74, 75, 76, 77, 78, TLWG_C72)
TLWG_MMA_RS(152, TLWG_D76, 76, 77, 78, 79, 80, 81, 82, TLWG_C76)
TLWG_MMA_RS(160, TLWG_D80, 80, 81, 82, 83, 84, 85, 86, TLWG_C80)
TLWG_MMA_RS(168, TLWG_D84, 84, 85, 86, 87, 88, 89, 90, TLWG_C84)
TLWG_MMA_RS(176, TLWG_D88, 88, 89, 90, 91, 92, 93, 94, TLWG_C88)
TLWG_MMA_RS(184, TLWG_D92, 92, 93, 94, 95, 96, 97, 98, TLWG_C92)
TLWG_MMA_RS(192, TLWG_D96, 96, 97, 98, 99, 100, 101, 102, TLWG_C96)
TLWG_MMA_RS(200, TLWG_D100, 100, 101, 102, 103, 104, 105, 106, TLWG_C100)
TLWG_MMA_RS(208, TLWG_D104, 104, 105, 106, 107, 108, 109, 110, TLWG_C104)
TLWG_MMA_RS(216, TLWG_D108, 108, 109, 110, 111, 112, 113, 114, TLWG_C108)
TLWG_MMA_RS(224, TLWG_D112, 112, 113, 114, 115, 116, 117, 118, TLWG_C112)
TLWG_MMA_RS(232, TLWG_D116, 116, 117, 118, 119, 120, 121, 122, TLWG_C116)
TLWG_MMA_RS(240, TLWG_D120, 120, 121, 122, 123, 124, 125, 126, TLWG_C120)
TLWG_MMA_RS(248, TLWG_D124, 124, 125, 126, 127, 128, 129, 130, TLWG_C124)
TLWG_MMA_RS(256, TLWG_D128, 128, 129, 130, 131, 132, 133, 134, TLWG_C128)

#undef TLWG_MMA_RS
#undef TLWG_MMA_RS_T

#undef TLWG_MMA
#undef TLWG_MMA_T
#undef TLWG_C4_
#undef TLWG_D4
#undef TLWG_D8
#undef TLWG_D12
#undef TLWG_D16
#undef TLWG_D20
#undef TLWG_D24
#undef TLWG_D28
#undef TLWG_D32
#undef TLWG_D36
#undef TLWG_D40
#undef TLWG_D44
#undef TLWG_D48
#undef TLWG_D52
#undef TLWG_D56
#undef TLWG_D60
#undef TLWG_D64
#undef TLWG_D68
#undef TLWG_D72
#undef TLWG_D76
#undef TLWG_D80
#undef TLWG_D84
#undef TLWG_D88
#undef TLWG_D92
#undef TLWG_D96
#undef TLWG_D100
#undef TLWG_D104
#undef TLWG_D108
#undef TLWG_D112
#undef TLWG_D116
#undef TLWG_D120
#undef TLWG_D124
#undef TLWG_D128
#undef TLWG_C4
#undef TLWG_C8
#undef TLWG_C12
#undef TLWG_C16
#undef TLWG_C20
#undef TLWG_C24
#undef TLWG_C28
#undef TLWG_C32
#undef TLWG_C36
#undef TLWG_C40
#undef TLWG_C44
#undef TLWG_C48
#undef TLWG_C52
#undef TLWG_C56
#undef TLWG_C60
#undef TLWG_C64
#undef TLWG_C68
#undef TLWG_C72
#undef TLWG_C76
#undef TLWG_C80
#undef TLWG_C84
#undef TLWG_C88
#undef TLWG_C92
#undef TLWG_C96
#undef TLWG_C100
#undef TLWG_C104
#undef TLWG_C108
#undef TLWG_C112
#undef TLWG_C116
#undef TLWG_C120
#undef TLWG_C124
#undef TLWG_C128
#endif  // TLWG_SM90A

}  // namespace detail

// ---- proxy fence ------------------------------------------------------------
// fence.proxy.async.shared::cta: makes this thread's generic-proxy writes to shared
// memory (cp.async included, once cp_async_wait says they landed; plain stores) visible
// to the async proxy that wgmma reads through. Every thread that wrote a stage executes
// it after its cp_async_wait and before the __syncthreads() that precedes the wgmma.
// (A template only so that merely pasting this header into code for an older
// architecture costs nothing; call it as tl::wg::fence_proxy_async().)
template <int UNUSED = 0>
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#elif defined(__CUDA_ARCH__)
  static_assert(UNUSED != 0 && UNUSED == 0, "tl::wg::fence_proxy_async needs sm_90 or later");
#endif
}

namespace detail {
// One thread's share of copy_tile's element-wise form for an R x C tile: chunk `it` is row
// it * RSTEP + r_t, columns c_t .. c_t + EPC - 1. load<N> reads chunks it0 .. it0 + N - 1
// (zeros past rows and cols) into registers, store<N> writes them to their swizzled places.
template <typename T, int R, int C, int THREADS> struct Gather {
  using L = Layout<C, (int)sizeof(T)>;
  static constexpr int EPC = L::EPC, CPR = C / EPC;
  static_assert(C % EPC == 0 && THREADS % CPR == 0,
                "tl::wg::copy_tile: a tile row's 16-byte chunks must divide the threads");
  static constexpr int RSTEP = THREADS / CPR, ITERS = (R + RSTEP - 1) / RSTEP;
  static constexpr bool WHOLE = R % RSTEP == 0;  // no pass runs past the tile's last row
  struct alignas(16) Chunk { T e[EPC]; };
  template <int N>
  static __device__ __forceinline__ void load(Chunk* v, int it0, const T* g, int ld, int rows, int cols) {
    const int r_t = threadIdx.x / CPR, c_t = (threadIdx.x % CPR) * EPC;
#pragma unroll
    for (int b = 0; b < N; ++b) {
      const int r = (it0 + b) * RSTEP + r_t;
#pragma unroll
      for (int e = 0; e < EPC; ++e)
        v[b].e[e] = (r < rows && c_t + e < cols) ? g[(long long)r * ld + c_t + e] : ::tl::detail::zero<T>();
    }
  }
  template <int N>
  static __device__ __forceinline__ void store(const Chunk* v, int it0, T* s) {
    const int r_t = threadIdx.x / CPR, c_t = (threadIdx.x % CPR) * EPC;
    // With RSTEP % 8 == 0 the swizzle of row r_t + it*RSTEP is that of r_t (period 8 rows).
    T* const s_t = s + smem_offset<R, C, (int)sizeof(T)>(r_t, c_t);
#pragma unroll
    for (int b = 0; b < N; ++b) {
      const int it = it0 + b, r = it * RSTEP + r_t;
      T* d = RSTEP % 8 == 0 ? s_t + it * RSTEP * L::PW : s + smem_offset<R, C, (int)sizeof(T)>(r, c_t);
      if (WHOLE || r < R) *reinterpret_cast<Chunk*>(d) = v[b];
    }
  }
};
}  // namespace detail

// ---- tile copy: global -> shared ----------------------------------------------
// Same signature and semantics as tl::copy_tile (gemm.cuh), writing the layout of
// tl::wg::smem_offset<R, C>: copies the R x C tile whose first element is g (row-major,
// leading dimension ld) into s; elements at rows >= rows or columns >= cols become zero.
// Thread tid moves the 16-byte chunks (it * RSTEP + tid / CPR, (tid % CPR) * 8), so
// consecutive threads take consecutive chunks of a row (coalesced; each 8 threads fill
// one 128-byte row of a panel, conflict-free). COPY_VEC: one predicated cp_async16 per
// chunk (ld % 8 == 0, g 16-byte aligned, cols a multiple of 8 or >= C); COPY_SCALAR:
// element-wise loads and one 16-byte shared store per chunk; COPY_WORDS: four 4-byte
// cp.async per chunk (every row starts on a 4-byte boundary, which the caller checked);
// COPY_CHECK: decides per call between whole chunks and elements.
// Chunks that are not a multiple of the threads: the last pass covers the rows left.
// Elements of 1 byte (fp8) move in chunks of 16 elements, and vec needs ld % 16 == 0.
template <typename T, int R, int C, int THREADS, int MODE = ::tl::COPY_CHECK>
__device__ __forceinline__ void copy_tile(T* s, const T* g, int ld, int rows, int cols) {
  using G = detail::Gather<T, R, C, THREADS>;
  using L = typename G::L;
  constexpr int EB = (int)sizeof(T), EPC = G::EPC, CPR = G::CPR, RSTEP = G::RSTEP, ITERS = G::ITERS;
  constexpr bool WHOLE = G::WHOLE;
  const int r_t = threadIdx.x / CPR, c_t = (threadIdx.x % CPR) * EPC;
  // With RSTEP % 8 == 0 the swizzle of row r_t + it*RSTEP is that of r_t (period 8 rows).
  T* const s_t = s + smem_offset<R, C, EB>(r_t, c_t);
  const bool vec = MODE == ::tl::COPY_VEC || (MODE == ::tl::COPY_CHECK && ld % EPC == 0 && ::tl::aligned16(g));
  if (vec || MODE == ::tl::COPY_WORDS) {
    // One pointer stepped from chunk to chunk; the empty asm hides the steps' sum from
    // the compiler (as in tl::copy_tile). Each chunk is one cp_async16 or, for COPY_WORDS,
    // four 4-byte words (tl::detail::cp_async_chunk_words); MODE is a constant.
    const T* p = g + (long long)r_t * ld + c_t;
    const long long step = (long long)RSTEP * ld;
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int r = it * RSTEP + r_t;
      T* d = RSTEP % 8 == 0 ? s_t + it * RSTEP * L::PW : s + smem_offset<R, C, EB>(r, c_t);
      if (WHOLE || r < R) {
        if (MODE == ::tl::COPY_WORDS)
          ::tl::detail::cp_async_chunk_words(d, p, r < rows, c_t, cols);
        else
          ::tl::cp_async16(d, p, r < rows && c_t < cols);
      }
      p += step;
      asm volatile("" : "+l"(p));
    }
  } else {
    // Element by element, in batches of up to four chunks whose loads are all issued
    // before the batch's stores: one memory latency per batch rather than per chunk
    // (a store to shared memory may alias the source as far as the compiler knows, so
    // it would not move a later chunk's loads above it).
    // At most 32 elements (one register each) in flight: 4 chunks of 2-byte elements, 2 of fp8.
    constexpr int BMAX = 32 / EPC;
    constexpr int BATCH = ITERS % BMAX == 0 ? BMAX : ITERS % 2 == 0 ? 2 : 1;
#pragma unroll 1
    for (int it0 = 0; it0 < ITERS; it0 += BATCH) {
      typename G::Chunk v[BATCH];
      G::template load<BATCH>(v, it0, g, ld, rows, cols);
      G::template store<BATCH>(v, it0, s);
    }
  }
}

// Two tiles' element-wise copies (both tl::COPY_SCALAR, as copy_tile) in one batch: every
// load of both issued before any store, so the pair pays one memory latency where the two
// calls pay two or more (the element-wise path waits on latency, not bandwidth: with a
// quarter of the loads in flight it ran 2x slower, bench/RESULTS.md). Only for pairs whose
// elements a thread moves are at most 64 (one register each, in flight beside a 64-register
// accumulator: no spills in any GEMM of the examples); larger pairs copy one tile after the
// other.
template <typename T, int R1, int C1, int R2, int C2, int THREADS>
__device__ __forceinline__ void copy_tile_pair(T* s1, const T* g1, int ld1, int rows1, int cols1,
                                               T* s2, const T* g2, int ld2, int rows2, int cols2) {
  using G1 = detail::Gather<T, R1, C1, THREADS>;
  using G2 = detail::Gather<T, R2, C2, THREADS>;
  if constexpr (G1::ITERS * G1::EPC + G2::ITERS * G2::EPC > 64) {
    copy_tile<T, R1, C1, THREADS, ::tl::COPY_SCALAR>(s1, g1, ld1, rows1, cols1);
    copy_tile<T, R2, C2, THREADS, ::tl::COPY_SCALAR>(s2, g2, ld2, rows2, cols2);
  } else {
    typename G1::Chunk v1[G1::ITERS];
    typename G2::Chunk v2[G2::ITERS];
    G1::template load<G1::ITERS>(v1, 0, g1, ld1, rows1, cols1);
    G2::template load<G2::ITERS>(v2, 0, g2, ld2, rows2, cols2);
    G1::template store<G1::ITERS>(v1, 0, s1);
    G2::template store<G2::ITERS>(v2, 0, s2);
  }
}

// ---- tile GEMM on wgmma ---------------------------------------------------------
// C[M,N] += A[M,K] * B[K,N] over the whole block: WGS warpgroups, exactly 128*WGS
// threads (threadIdx.x is the thread index), all of them calling. Warpgroup g owns rows
// [g*M/WGS, (g+1)*M/WGS) and all N columns; per k16 step it issues (M/WGS)/64
// wgmma.mma_async.m64nNk16.f32.{f16,bf16} with shared-memory descriptors for both
// operands. A: [M][K] (smem_offset<M, K>) or, TRANS_A, [K][M] (smem_offset<K, M>);
// B: [K][N] (smem_offset<K, N>) or, TRANS_B, [N][K] (smem_offset<N, K>). Every tile
// 1024-byte aligned. acc holds acc_regs<M, N, WGS>() floats per thread (acc_coord).
//
// run() is synchronous: wgmma.fence, the k16 steps, commit_group, wait_group 0. It calls
// after_first() once step 0's instructions are issued (the caller issues its next copies
// there, while the tensor cores work) and before_last() at the stage hand-off, where
// the caller waits for its copies, executes fence_proxy_async() and __syncthreads(), and
// may call first() on the next stage (a no-op here).
//
// ---- asynchronous tile GEMM (for mbarrier pipelines) -----------------------------
// The same product as GemmPipe::run, split at the wait: issue() fences the accumulators,
// executes wgmma.fence, issues every k16 step of one stage and commits them as one
// wgmma group, without waiting; wait<P>() returns once at most P of this thread's groups
// are pending and pins the accumulators again. A consumer that keeps one group in flight
// calls issue(stage t), wait<1>() and then releases stage t-1 (its wgmma finished), so
// the tensor cores run while the warp waits for the next stage. The caller's threads are
// the consumer warpgroups 0 .. WGS-1 (threadIdx.x < 128*WGS); other warpgroups (a
// producer) must not call. Nothing here touches a barrier.
template <typename TA, int M, int N, int K, int WGS, bool TRANS_A, bool TRANS_B>
struct MmaAsync {
  static_assert(detail::is_operand<TA>::value, "tl::wg::MmaAsync: TA must be half, __nv_bfloat16 or fp8");
  using G = detail::Geom<M, N, K, WGS, TRANS_A, TRANS_B, (int)sizeof(TA)>;
  static constexpr int MI = G::MI, KS = G::KS, REGS = G::REGS;

  // Pins the accumulators before the first issue(). Without it ptxas (13.0) may place
  // their initialization (a T::clear before a warp-specialized split, say) so that it
  // serializes every wgmma of the function (warning C7515).
  __device__ __forceinline__ static void begin(float* acc) {
#if TLWG_SM90A
    detail::fence_regs<REGS>(acc);
#endif
  }
  __device__ __forceinline__ static void issue(const TA* A, const TA* B, float* acc) {
    issue(A, B, acc, [] {});
  }
  // The same, calling after_first() once the first k16 step is issued (GemmPipe places
  // the address arithmetic of its next copies there).
  template <typename F>
  __device__ __forceinline__ static void issue(const TA* A, const TA* B, float* acc, F&& after_first) {
    issue_steps(A, B, acc, 1, after_first);
  }
  template <int P>
  __device__ __forceinline__ static void wait(float* acc) {
#if TLWG_SM90A
    detail::wgmma_wait<P>();
    detail::fence_regs<REGS>(acc);
#elif TLWG_OTHER_DEVICE
    static_assert(P < 0 && P >= 0, "tl::wg::MmaAsync needs sm_90a");
#endif
  }

  // fp8 (EB = 1): the tensor cores sum fp8 products in less than f32 precision (about 14
  // mantissa bits), so a whole K loop accumulated in place loses accuracy as K grows (a
  // relative error near 1e-3 of the partial sums by K = 1024, measured on the H200). Each
  // stage is therefore summed into `part` from zero (scale-d 0 on its first k step), and
  // part is added to acc in f32 once its group completed: the promotion cuBLASLt does unless
  // asked for fast accumulation. issue_part() issues and commits; retire<P>() waits until at
  // most P groups are pending (so the group that summed `part` completed) and adds;
  // promote() is retire<0>().
  __device__ __forceinline__ static void issue_part(const TA* A, const TA* B, float* part) {
    issue_steps(A, B, part, 0, [] {});
  }
  template <int P>
  __device__ __forceinline__ static void retire(float* acc, float* part) {
#if TLWG_SM90A
    detail::wgmma_wait<P>();
    detail::fence_regs<REGS>(part);
#pragma unroll
    for (int r = 0; r < REGS; ++r) acc[r] += part[r];
#elif TLWG_OTHER_DEVICE
    static_assert(detail::dependent_false<TA>::value, "tl::wg::MmaAsync needs sm_90a");
#endif
  }
  __device__ __forceinline__ static void promote(float* acc, float* part) { retire<0>(acc, part); }

  // The consumers' loop of a warp-specialized fp8 pipeline of n stages (Pi: a tl::tma::Pipe,
  // st: the consumers' state, advanced past the n stages; a_at(s) / b_at(s): the operand
  // tiles of stage s). Two stage register tiles alternate, so one group stays in flight while
  // the previous stage is added in f32: stage t is issued, stage t-1 retired and its shared
  // tiles released (in every block of the cluster whose copies fill this one's, the ranks of
  // `cluster`'s bits; 0: no cluster: Pi::consumer_release). The loop is unrolled by two
  // because a register tile must be named statically (an index into a pair would put it in
  // local memory).
  template <typename Pi, typename FA, typename FB>
  __device__ __forceinline__ static void consume_promoted(Pi* pipe, typename Pi::State& st, int n, float* acc,
                                                          FA&& a_at, FB&& b_at, unsigned cluster = 0) {
    if (n <= 0) return;
    float pa[REGS], pb[REGS];
    typename Pi::State prev;
    pipe->consumer_wait(st);
    issue_part(a_at(st.stage), b_at(st.stage), pa);
    prev = st;
    st.advance();
    // Issues stage st into `next`, adds `done` (the previous stage) and releases it.
    auto step = [&](float* next, float* done) {
      pipe->consumer_wait(st);
      issue_part(a_at(st.stage), b_at(st.stage), next);
      retire<1>(acc, done);
      pipe->consumer_release(prev, cluster);
      prev = st;
      st.advance();
    };
    int i = 1;
    for (; i + 1 < n; i += 2) {
      step(pb, pa);
      step(pa, pb);
    }
    if (i < n) {
      step(pb, pa);
      retire<0>(acc, pb);
    } else {
      retire<0>(acc, pa);
    }
    pipe->consumer_release(prev, cluster);
  }

 private:
  // Every k step of one stage into d as one committed group; the first step's scale-d is
  // `first_scale_d` (1: accumulate into d, 0: start d from zero).
  template <typename F>
  __device__ __forceinline__ static void issue_steps(const TA* A, const TA* B, float* d, int first_scale_d,
                                                     F&& after_first) {
#if TLWG_SM90A
    // The warpgroup index, made warp-uniform so that the descriptors live in uniform registers.
    const int g = __shfl_sync(0xffffffffu, (int)(threadIdx.x >> 7), 0);
    const unsigned long long da = G::OA::desc(::tl::detail::smem_u32(A) + (unsigned)g * G::A_WG);
    const unsigned long long db = G::OB::desc(::tl::detail::smem_u32(B));
    detail::fence_regs<REGS>(d);
    detail::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        detail::Mma<TA, N>::template run<G::TRANS_A_IMM, G::TRANS_B_IMM>(
            d + mi * (N / 2), detail::desc_add(da, G::a_off(0, mi, ks)), detail::desc_add(db, G::b_off(ks)),
            ks == 0 ? first_scale_d : 1);
      if (ks == 0) after_first();
    }
    detail::wgmma_commit();
#elif TLWG_OTHER_DEVICE
    static_assert(detail::dependent_false<TA>::value,
                  "tl::wg::MmaAsync needs sm_90a (-gencode=arch=compute_90a,code=sm_90a)");
#endif
  }
};

// Where before_last() runs (EARLY_HANDOFF), and what it allows the copies to overwrite:
// wgmma reads shared memory asynchronously, until wait_group, so the barrier in
// before_last() proves a stage free only if every thread passed the wait that covers it.
//   false (default): after wait_group 0. When any thread returns from before_last(),
//     every wgmma of this call has finished in every warp, so after_first() of the next
//     call may refill the stage this call read: prefetch distance STAGES - 1, the
//     schedule of tl::GemmPipe. The tensor cores idle across the barrier.
//   true: after commit_group, before wait_group 0: the barrier overlaps this call's
//     wgmma. after_first() of the next call may then refill only a stage read two or
//     more calls back: prefetch distance <= STAGES - 2.
template <typename TA, int M, int N, int K, int WGS, bool TRANS_A, bool TRANS_B, bool EARLY_HANDOFF = false>
struct GemmPipe {
  static_assert(detail::is_operand<TA>::value, "tl::wg::GemmPipe: TA must be half, __nv_bfloat16 or fp8");
  using G = detail::Geom<M, N, K, WGS, TRANS_A, TRANS_B, (int)sizeof(TA)>;
  static constexpr int MI = G::MI, KS = G::KS, REGS = G::REGS;

  __device__ __forceinline__ GemmPipe() {}
  // Nothing to prefetch: wgmma reads its operands from shared memory itself.
  __device__ __forceinline__ void first(const TA*, const TA*) {}

  template <typename F1, typename F2>
  __device__ __forceinline__ void run(const TA* A, const TA* B, float* acc, F1&& after_first, F2&& before_last) {
#if TLWG_SM90A
    using MA = MmaAsync<TA, M, N, K, WGS, TRANS_A, TRANS_B>;
    if constexpr (sizeof(TA) == 1) {
      // fp8: the stage summed apart and added in f32 (see MmaAsync::issue_part).
      float part[REGS];
      MA::issue_part(A, B, part);
      after_first();
      if (EARLY_HANDOFF) before_last();
      MA::promote(acc, part);
      if (!EARLY_HANDOFF) before_last();
      return;
    }
    // One stage issued as one wgmma group (MmaAsync), then waited for.
    MA::issue(A, B, acc, after_first);
    if (EARLY_HANDOFF) before_last();
    MA::template wait<0>(acc);
    if (!EARLY_HANDOFF) before_last();
#elif TLWG_OTHER_DEVICE
    static_assert(detail::dependent_false<TA>::value,
                  "tl::wg::GemmPipe needs sm_90a (-gencode=arch=compute_90a,code=sm_90a)");
#endif
  }
};

// C[M,N] += A[M,K] * B[K,N] over the whole block, one shared stage: GemmPipe without overlap.
template <typename TA, typename TC, int M, int N, int K, int WGS, bool TRANS_A, bool TRANS_B>
__device__ __forceinline__ void gemm_ss(const TA* A, const TA* B, TC* acc) {
  static_assert(::tl::detail::is_same<TC, float>::value, "tl::wg::gemm_ss: TC must be float");
  GemmPipe<TA, M, N, K, WGS, TRANS_A, TRANS_B> p;
  p.first(A, B);
  p.run(A, B, acc, [] {}, [] {});
}

// C[M,N] += A[M,K] * B[K,N] over the whole block with A in registers: a converted
// accumulator of the block's [M][K] tile in acc_coord<M, K, WGS> order (the registers
// wgmma leaves an m64nK product in, one strip after another). Its slots
// mi*(K/2) + 8*ks + 0..7 are, in pairs, exactly the four A registers of k16 step ks of
// strip mi (rows g, g+8 x k lo, k hi), so A needs no data movement at all. B and acc as
// in gemm_ss (B: [K][N], or TRANS_B [N][K]).
//
// issue() packs A into `ra` (AREGS words the caller keeps until the wait: wgmma reads
// its A registers asynchronously too), issues every k16 step and commits them as one
// wgmma group; wait<P>() returns once at most P groups are pending and pins acc and ra.
// A consumer that overlaps the product with other register work issues, works, waits.
template <typename TA, int M, int N, int K, int WGS, bool TRANS_B>
struct RsAsync {
  static_assert(::tl::detail::is_same<TA, half>::value || ::tl::detail::is_same<TA, __nv_bfloat16>::value,
                "tl::wg::gemm_rs: TA must be half or __nv_bfloat16");
  using G = detail::Geom<M, N, K, WGS, false, TRANS_B>;
  static constexpr int MI = G::MI, KS = G::KS, REGS = G::REGS, AREGS = MI * KS * 4;

  __device__ __forceinline__ static void issue(const TA* a, const TA* B, float* acc, unsigned* ra) {
#if TLWG_SM90A
    const unsigned long long db = G::OB::desc(::tl::detail::smem_u32(B));
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        const TA* p = a + mi * (K / 2) + 8 * ks;
#pragma unroll
        for (int r = 0; r < 4; ++r) ra[(mi * KS + ks) * 4 + r] = ::tl::detail::pack2(p[2 * r], p[2 * r + 1]);
      }
    detail::fence_regs<REGS>(acc);
    detail::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        detail::MmaRs<TA, N>::template run<G::TRANS_B_IMM>(
            acc + mi * (N / 2), *reinterpret_cast<const unsigned(*)[4]>(ra + (mi * KS + ks) * 4),
            detail::desc_add(db, G::b_off(ks)));
    detail::wgmma_commit();
#elif TLWG_OTHER_DEVICE
    static_assert(detail::dependent_false<TA>::value,
                  "tl::wg::gemm_rs needs sm_90a (-gencode=arch=compute_90a,code=sm_90a)");
#endif
  }
  template <int P>
  __device__ __forceinline__ static void wait(float* acc, unsigned* ra) {
#if TLWG_SM90A
    detail::wgmma_wait<P>();
    detail::fence_regs<REGS>(acc);
#pragma unroll
    for (int i = 0; i < AREGS; ++i) asm volatile("" : "+r"(ra[i])::"memory");
#elif TLWG_OTHER_DEVICE
    static_assert(P < 0 && P >= 0, "tl::wg::RsAsync needs sm_90a");
#endif
  }
};

// The same product, synchronous (issue, then wait for it).
template <typename TA, int M, int N, int K, int WGS, bool TRANS_B>
__device__ __forceinline__ void gemm_rs(const TA* a, const TA* B, float* acc) {
  using R = RsAsync<TA, M, N, K, WGS, TRANS_B>;
  unsigned ra[R::AREGS];
  R::issue(a, B, acc, ra);
  R::template wait<0>(acc, ra);
}

// Which element (i, j) of the block's C[M][N] tile this thread's acc[slot] holds.
// Slots 2q, 2q+1 are (i, j), (i, j+1) with j even.
template <int M, int N, int WGS>
__device__ __forceinline__ void acc_coord(int slot, int& i, int& j) {
  detail::acc_coord_of<M, N, WGS>((int)threadIdx.x, slot, i, j);
}

}  // namespace wg
}  // namespace tl

#undef TLWG_HD
#undef TLWG_SM90A
#undef TLWG_OTHER_DEVICE
#endif  // TL_WGMMA_CUH_
