// Host-only checks of tile-core/src/codegen/tl/wgmma.cuh (no GPU needed):
//  (a) tl::wg::smem_offset is a bijection onto [0, ROWS*COLS) with contiguous, 16-byte
//      aligned chunks, and matches the byte addresses of bench/wgmma/RESULTS.md;
//  (b) the descriptors GemmPipe builds (decoded from their bits) make the hardware's
//      canonical-layout address generation, swizzle included, land on exactly the
//      smem_offset position of every element every wgmma of every warpgroup reads;
//  (c) tl::wg::acc_coord is a bijection onto the C tile with (2q, 2q+1) pairs;
//  (d) NVRTC compiles the pasted prelude + gemm.cuh + wgmma.cuh (+ tma.cuh) for sm_90a (with a
//      kernel using every entry point) and for sm_80 (pasted, not used).
// Build and run: see run.sh (--build-only runs it too).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "../../tile-core/src/codegen/tl/gemm.cuh"
#include "../../tile-core/src/codegen/tl/wgmma.cuh"
#include <nvrtc.h>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static int g_fail = 0;
static int g_checks = 0;
#define EXPECT(cond, ...) do { ++g_checks; if (!(cond)) { ++g_fail; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

// ---- (a) layout ------------------------------------------------------------------
template <int ROWS, int COLS> static void check_layout() {
  std::vector<int> seen(ROWS * COLS, 0);
  bool ok = true;
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < COLS; ++c) {
      const int o = tl::wg::smem_offset<ROWS, COLS>(r, c);
      if (o < 0 || o >= ROWS * COLS) { ok = false; continue; }
      seen[o]++;
      if (c % 8 == 0 && o % 8 != 0) ok = false;                                                 // 16-byte aligned
      if (c % 8 != 0 && o != tl::wg::smem_offset<ROWS, COLS>(r, c - c % 8) + c % 8) ok = false;  // contiguous
      // The stated rule: panel p = c / PW, row r at r*PW, chunk q at q ^ swizzle(r).
      const int pw = COLS < 64 ? COLS : 64, cpr = pw / 8, rdiv = 8 / cpr;
      const int want = (c / pw) * ROWS * pw + r * pw + ((((c % pw) / 8) ^ ((r / rdiv) % cpr)) * 8) + c % 8;
      if (o != want) ok = false;
    }
  for (int x = 0; x < ROWS * COLS; ++x) ok = ok && seen[x] == 1;
  EXPECT(ok, "smem_offset<%d, %d>", ROWS, COLS);
  printf("smem_offset<%4d,%4d>: bijective, chunks contiguous and aligned, matches the rule: %s\n", ROWS, COLS,
         ok ? "ok" : "FAIL");
}

static void check_results_md() {
  // bench/wgmma/RESULTS.md: A stage [BM][64]: row m at byte m*128, chunk c at c ^ (m % 8);
  // B stage [64 k][BN n]: (k, n) at byte (n/64)*8192 + k*128 + swizzled chunk of (n%64).
  bool ok = true;
  for (int k = 0; k < 64; ++k)
    for (int n = 0; n < 128; ++n) {
      const int want = (n / 64) * 8192 + k * 128 + ((((n % 64) / 8) ^ (k % 8)) << 4) + (n % 8) * 2;
      ok = ok && 2 * tl::wg::smem_offset<64, 128>(k, n) == want;
    }
  for (int m = 0; m < 128; ++m)
    for (int k = 0; k < 64; ++k) {
      const int want = m * 128 + (((k / 8) ^ (m % 8)) << 4) + (k % 8) * 2;
      ok = ok && 2 * tl::wg::smem_offset<128, 64>(m, k) == want;
    }
  EXPECT(ok, "RESULTS.md byte addresses");
  printf("64x128 B tile and 128x64 A tile match bench/wgmma/RESULTS.md byte addresses: %s\n", ok ? "ok" : "FAIL");
}

// ---- (b) descriptors ---------------------------------------------------------------
struct Desc { unsigned start, lbo, sbo; int mode; };
static Desc decode(unsigned long long d) {
  Desc x;
  x.start = (unsigned)(d & 0x3FFF) << 4;
  x.lbo = (unsigned)((d >> 16) & 0x3FFF) << 4;
  x.sbo = (unsigned)((d >> 32) & 0x3FFF) << 4;
  x.mode = (int)(d >> 62);
  const unsigned base_off = (unsigned)((d >> 49) & 7);
  if (base_off != 0 || ((d >> 14) & 3) || ((d >> 30) & 3) || ((d >> 46) & 7) || ((d >> 52) & 0x3FF)) x.mode = -1;
  return x;
}
// Byte address wgmma reads for element (x, k) of an operand slice (x along M or N, k in
// 0..15), per the PTX canonical layouts (CUTLASS's GmmaDescriptor notes), T = 8 elements:
//   K-major,  swizzle W bytes: ((8,m),(T,2)) : ((W, SBO),(1,T)) -> (x%8)*W + (x/8)*SBO + 2k
//   MN-major, swizzle W bytes: ((T,W/16,m),(8,k)) : ((1,T,LBO),(W/2 el.,SBO))
//                              -> 2*(x % (W/2)) + (x / (W/2))*LBO + (k%8)*W + (k/8)*SBO
// then the swizzle of the address bits: [4, 4+b) ^= [7, 7+b), W = 16 * 2^b.
static long canon_addr(const Desc& d, bool trans, int x, int k) {
  const int W = d.mode == 1 ? 128 : d.mode == 2 ? 64 : d.mode == 3 ? 32 : 0;
  if (!W) return -1;
  unsigned a = !trans ? d.start + (x % 8) * W + (x / 8) * d.sbo + 2 * k
                      : d.start + 2 * (x % (W / 2)) + (x / (W / 2)) * d.lbo + (k % 8) * W + (k / 8) * d.sbo;
  const unsigned mask = W / 16 - 1;
  return (long)(a ^ (((a >> 7) & mask) << 4));
}

template <int M, int N, int K, int WGS, bool TA, bool TB> static void check_desc() {
  using G = tl::wg::detail::Geom<M, N, K, WGS, TA, TB>;
  bool ok = true;
  int bad = 0;
  for (unsigned baseA : {0u, 1024u * 37u}) {
    const unsigned baseB = baseA + 2 * M * K + 1024u * 5u;  // any 1024-aligned base
    for (int g = 0; g < WGS; ++g) {
      // Exactly what GemmPipe::run computes (g is warpgroup-uniform there).
      const unsigned long long da = G::OA::desc(baseA + (unsigned)g * G::A_WG);
      const unsigned long long db = G::OB::desc(baseB);
      for (int ks = 0; ks < G::KS; ++ks) {
        const Desc b = decode(tl::wg::detail::desc_add(db, G::b_off(ks)));
        for (int mi = 0; mi < G::MI; ++mi) {
          const Desc a = decode(tl::wg::detail::desc_add(da, G::a_off(0, mi, ks)));
          for (int x = 0; x < 64; ++x)
            for (int kk = 0; kk < 16; ++kk) {
              const int m = g * G::MW + 64 * mi + x, k = 16 * ks + kk;
              long want;
              if constexpr (TA) want = baseA + 2L * tl::wg::smem_offset<K, M>(k, m);
              else want = baseA + 2L * tl::wg::smem_offset<M, K>(m, k);
              if (canon_addr(a, G::TRANS_A_IMM == 1, x, kk) != want) { ok = false; bad++; }
            }
        }
        if (g == 0)
          for (int n = 0; n < N; ++n)
            for (int kk = 0; kk < 16; ++kk) {
              const int k = 16 * ks + kk;
              long want;
              if constexpr (TB) want = baseB + 2L * tl::wg::smem_offset<N, K>(n, k);
              else want = baseB + 2L * tl::wg::smem_offset<K, N>(k, n);
              // transpose-B immediate 1 = B is MN-major
              if (canon_addr(b, G::TRANS_B_IMM == 1, n, kk) != want) { ok = false; bad++; }
            }
      }
    }
  }
  // Accumulator map: a bijection onto [0,M) x [0,N), pairs (2q, 2q+1) = (i, j), (i, j+1), j even.
  std::vector<int> seen(M * N, 0);
  bool acc_ok = tl::wg::acc_regs<M, N, WGS>() == G::REGS;
  for (int t = 0; t < 128 * WGS; ++t)
    for (int s = 0; s < G::REGS; s += 2) {
      int i0, j0, i1, j1;
      tl::wg::detail::acc_coord_of<M, N, WGS>(t, s, i0, j0);
      tl::wg::detail::acc_coord_of<M, N, WGS>(t, s + 1, i1, j1);
      if (i0 < 0 || i0 >= M || j0 < 0 || j1 >= N || i1 != i0 || j1 != j0 + 1 || j0 % 2) { acc_ok = false; continue; }
      seen[i0 * N + j0]++;
      seen[i1 * N + j1]++;
    }
  for (int x = 0; x < M * N; ++x) acc_ok = acc_ok && seen[x] == 1;
  EXPECT(ok, "descriptors %dx%dx%d wg%d %c%c (%d bad addresses)", M, N, K, WGS, TA ? 'T' : 'N', TB ? 'T' : 'N', bad);
  EXPECT(acc_ok, "acc_coord %dx%d wg%d", M, N, WGS);
  printf("desc %3dx%3dx%3d wg%d %c%c  A %s swz%d LBO %5u SBO %4u | B %s swz%d LBO %5u SBO %4u : %s, acc map %s\n", M,
         N, K, WGS, TA ? 'T' : 'N', TB ? 'T' : 'N', TA ? "MN" : "K ", G::OA::SWIZZLE, G::OA::LBO, G::OA::SBO,
         TB ? "K " : "MN", G::OB::SWIZZLE, G::OB::LBO, G::OB::SBO, ok ? "ok" : "FAIL", acc_ok ? "ok" : "FAIL");
}
template <int M, int N, int K, int WGS> static void check_desc4() {
  check_desc<M, N, K, WGS, false, false>();
  check_desc<M, N, K, WGS, false, true>();
  check_desc<M, N, K, WGS, true, false>();
  check_desc<M, N, K, WGS, true, true>();
}

// ---- (d) NVRTC -------------------------------------------------------------------------
static std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
static const char* kUse = R"(
extern "C" __global__ void __launch_bounds__(256) tl_wg_use(const half* A, const __nv_bfloat16* B, float* C, int ld) {
  extern __shared__ __align__(1024) unsigned char sm[];
  half* sA = (half*)sm; half* sB = sA + 128 * 64;
  tl::wg::copy_tile<half, 128, 64, 256>(sA, A, ld, 100, 64);
  tl::wg::copy_tile<half, 64, 256, 256, tl::COPY_SCALAR>(sB, A, ld, 64, 250);
  tl::cp_async_commit(); tl::cp_async_wait<0>(); tl::wg::fence_proxy_async(); __syncthreads();
  float acc[tl::wg::acc_regs<128, 256, 2>()];
  for (int i = 0; i < tl::wg::acc_regs<128, 256, 2>(); ++i) acc[i] = 0.f;
  tl::wg::gemm_ss<half, float, 128, 256, 64, 2, false, false>(sA, sB, acc);
  tl::wg::GemmPipe<__nv_bfloat16, 128, 256, 64, 2, true, true, true> p;
  p.first((const __nv_bfloat16*)sA, (const __nv_bfloat16*)sB);
  p.run((const __nv_bfloat16*)sA, (const __nv_bfloat16*)sB, acc, [] {}, [] { __syncthreads(); });
  for (int s = 0; s < tl::wg::acc_regs<128, 256, 2>(); ++s) { int i, j; tl::wg::acc_coord<128, 256, 2>(s, i, j); C[i * 256 + j] = acc[s]; }
}
)";
static const char* kNoUse = R"(
extern "C" __global__ void plain(float* p) { p[threadIdx.x] = (float)tl::wg::smem_offset<64, 128>(threadIdx.x, 5); }
)";
// Every tl::tma entry point and tl::wg::MmaAsync, as a warp-specialized kernel uses them.
static const char* kUseTma = R"(
extern "C" __global__ void __launch_bounds__(256, 1) tl_tma_use(const __grid_constant__ tl::tma::Desc da,
    const __grid_constant__ tl::tma::Desc dc, float* C) {
  extern __shared__ __align__(1024) unsigned char sm[];
  half* sA = (half*)sm; half* sB = sA + 128 * 64;
  tl::tma::Pipe<2>* pipe = (tl::tma::Pipe<2>*)(sm + 65536);
  if (threadIdx.x == 0) pipe->init(4);
  if (threadIdx.x == 128) tl::tma::prefetch(&da);
  __syncthreads();
  if (threadIdx.x >= 128) {
    tl::tma::setmaxnreg_dec<40>();
    if (threadIdx.x == 128) {
      tl::tma::Pipe<2>::State st;
      for (int k = 0; k < 4; ++k) {
        pipe->producer_acquire(st, 2 * tl::tma::tile_bytes<128, 64>());
        tl::tma::load_tile<128, 64>(sA + st.stage * 0, &da, pipe->full_bar(st), 0, 64 * k);
        tl::tma::load_tile<64, 128>(sB, &da, pipe->full_bar(st), 64 * k, 0);
        st.advance();
      }
    }
    return;
  }
  tl::tma::setmaxnreg_inc<232>();
  using Mma = tl::wg::MmaAsync<half, 128, 128, 64, 1, false, false>;
  float acc[tl::wg::acc_regs<128, 128, 1>()];
  for (int i = 0; i < tl::wg::acc_regs<128, 128, 1>(); ++i) acc[i] = 0.f;
  Mma::begin(acc);
  tl::tma::Pipe<2>::State st, prev;
  for (int k = 0; k < 4; ++k) {
    pipe->consumer_wait(st);
    Mma::issue(sA, sB, acc);
    Mma::wait<1>(acc);
    if (k > 0) pipe->consumer_release(prev);
    prev = st;
    st.advance();
  }
  Mma::wait<0>(acc);
  pipe->consumer_release(prev);
  tl::tma::bar_sync<1, 128>();
  for (int s = 0; s < tl::wg::acc_regs<128, 128, 1>(); s += 2) {
    int i, j; tl::wg::acc_coord<128, 128, 1>(s, i, j);
    *(__half2*)&sA[tl::wg::smem_offset<128, 128>(i, j)] = __floats2half2_rn(acc[s], acc[s + 1]);
  }
  tl::tma::fence_proxy_async();
  tl::tma::bar_sync<1, 128>();
  if (threadIdx.x == 0) { tl::tma::store_2d(&dc, sA, 0, 0); tl::tma::store_commit(); tl::tma::store_wait_read<0>(); }
  C[threadIdx.x] = acc[0];
}
)";
static void nvrtc_compile(const std::string& src, const char* arch, const char* inc, bool expect_ok, const char* what) {
  nvrtcProgram prog;
  nvrtcCreateProgram(&prog, src.c_str(), "tl_wg_paste.cu", 0, nullptr, nullptr);
  std::string a = std::string("--gpu-architecture=") + arch, i = std::string("-I") + inc;
  const char* opts[] = {a.c_str(), "-std=c++17", i.c_str()};
  const nvrtcResult rc = nvrtcCompileProgram(prog, 3, opts);
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  std::string log(n, '\0');
  if (n) nvrtcGetProgramLog(prog, &log[0]);
  size_t cubin = 0;
  if (rc == NVRTC_SUCCESS) nvrtcGetCUBINSize(prog, &cubin);
  nvrtcDestroyProgram(&prog);
  const bool ok = (rc == NVRTC_SUCCESS) == expect_ok;
  EXPECT(ok, "nvrtc %s %s", arch, what);
  printf("nvrtc %-7s %-44s %s (%s, cubin %zu bytes)\n", arch, what, ok ? "ok" : "FAIL", nvrtcGetErrorString(rc), cubin);
  if (!ok || (!expect_ok && log.find("sm_90a") == std::string::npos)) printf("%s\n", log.c_str());
}

int main(int argc, char** argv) {
  check_layout<8, 16>(); check_layout<64, 16>(); check_layout<8, 32>(); check_layout<64, 32>();
  check_layout<8, 64>(); check_layout<128, 64>(); check_layout<64, 128>(); check_layout<64, 256>();
  check_layout<32, 192>(); check_layout<16, 512>(); check_layout<256, 64>();
  check_results_md();

  // The GPU harness's shapes, and more: N from 8 to 256, K from 16 to 256, WGS 1-4.
  check_desc4<64, 64, 64, 1>();
  check_desc4<128, 128, 64, 1>();
  check_desc4<128, 256, 64, 2>();
  check_desc4<128, 128, 32, 1>();
  check_desc4<64, 128, 128, 1>();
  check_desc4<256, 128, 64, 2>();
  check_desc4<64, 64, 16, 1>();
  check_desc4<64, 32, 64, 1>();
  check_desc4<192, 128, 64, 3>();
  check_desc4<256, 256, 64, 4>();
  check_desc4<64, 256, 256, 1>();
  check_desc4<128, 192, 192, 1>();
  check_desc<64, 40, 64, 1, false, true>();   // N = 40 (K-major B only: [N][K] rows need N % 8)
  check_desc<64, 8, 32, 1, true, true>();
  check_desc<128, 200, 128, 2, false, true>();
  check_desc<64, 16, 16, 1, false, false>();  // N = 16 MN-major: 32-byte swizzle B

  if (argc > 2) {  // host_check HEADER_DIR CUDA_INCLUDE_DIR
    const std::string dir = argv[1];
    const std::string pasted = slurp(dir + "/prelude.cuh") + slurp(dir + "/gemm.cuh") + slurp(dir + "/wgmma.cuh");
    EXPECT(pasted.find("TL_WGMMA_CUH_") != std::string::npos, "reading the headers from %s", dir.c_str());
    nvrtc_compile(pasted + kUse, "sm_90a", argv[2], true, "every entry point, sm_90a");
    nvrtc_compile(pasted + kNoUse, "sm_80", argv[2], true, "pasted but unused, sm_80");
    nvrtc_compile(pasted + kNoUse, "sm_90", argv[2], true, "pasted but unused, sm_90");
    nvrtc_compile(pasted + kUse, "sm_90", argv[2], false, "used on sm_90 (must be refused)");
    // tma.cuh pasted after wgmma.cuh, as a warp-specialized kernel has it.
    const std::string with_tma = pasted + slurp(dir + "/tma.cuh");
    EXPECT(with_tma.find("TL_TMA_CUH_") != std::string::npos, "reading tma.cuh from %s", dir.c_str());
    nvrtc_compile(with_tma + kUseTma, "sm_90a", argv[2], true, "tma.cuh: every entry point, sm_90a");
    nvrtc_compile(with_tma + kNoUse, "sm_80", argv[2], true, "tma.cuh: pasted but unused, sm_80");
    nvrtc_compile(with_tma + kNoUse, "sm_90", argv[2], true, "tma.cuh: pasted but unused, sm_90");
    nvrtc_compile(with_tma + kUseTma, "sm_90", argv[2], false, "tma.cuh: used on sm_90 (must be refused)");
  }
  printf("\n%d passed, %d failed\n", g_checks - g_fail, g_fail);
  return g_fail ? 1 : 0;
}
