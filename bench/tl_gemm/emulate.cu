// Host-only check of tl/gemm.cuh's addressing and fragment bookkeeping: emulates
// ldmatrix (.x4, plain and .trans) and mma.m16n8k16 (per the PTX ISA fragment
// layouts) warp by warp, using the header's own lane/constant address functions,
// and compares the accumulators (through acc_coord) with a reference product.
// Also checks smem_offset (bijection, 16-byte chunks) and bank-conflict freedom.
//   nvcc -std=c++17 -O1 -o emulate emulate.cu && ./emulate
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "../../tile-core/src/codegen/tl/gemm.cuh"

static int failures = 0;
#define CHECK(c, ...) do { if (!(c)) { if (failures++ < 20) { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } } while (0)

template <int ROWS, int COLS> void test_layout() {
  std::vector<int> seen(ROWS * COLS, 0);
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < COLS; ++c) {
      int o = tl::smem_offset<ROWS, COLS>(r, c);
      CHECK(o >= 0 && o < ROWS * COLS, "range %dx%d (%d,%d)->%d", ROWS, COLS, r, c, o);
      if (o >= 0 && o < ROWS * COLS) seen[o]++;
      if (c % 8) CHECK((o == tl::smem_offset<ROWS, COLS>(r, c - c % 8) + c % 8), "contig");
      else CHECK(o % 8 == 0, "align");
    }
  for (int o = 0; o < ROWS * COLS; ++o) CHECK(seen[o] == 1, "bijective %dx%d off %d", ROWS, COLS, o);
  // 8 rows at one chunk column -> distinct 16-byte bank groups
  for (int r0 = 0; r0 < ROWS; r0 += 8)
    for (int c = 0; c < COLS; c += 8) {
      int mask = 0;
      for (int r = r0; r < r0 + 8; ++r) mask |= 1 << ((tl::smem_offset<ROWS, COLS>(r, c) / 8) & 7);
      CHECK(mask == 255, "ldmatrix column conflict %dx%d r0=%d c=%d", ROWS, COLS, r0, c);
    }
  // 8 consecutive row-major chunks -> distinct bank groups
  for (int g0 = 0; g0 < ROWS * COLS / 8; g0 += 8) {
    int mask = 0;
    for (int g = g0; g < g0 + 8; ++g) {
      int r = g / (COLS / 8), c = (g % (COLS / 8)) * 8;
      mask |= 1 << ((tl::smem_offset<ROWS, COLS>(r, c) / 8) & 7);
    }
    CHECK(mask == 255, "store conflict %dx%d g0=%d", ROWS, COLS, g0);
  }
}

static unsigned rng = 12345;
static float rnd() { rng = rng * 1664525u + 1013904223u; return (float)((int)((rng >> 16) % 9) - 4); }

template <int M, int N, int K, int WM, int WN, bool TA, bool TB> void test_gemm() {
  using G = tl::detail::Geom<M, N, K, WM, WN, TA, TB>;
  constexpr int THREADS = 32 * WM * WN, REGS = tl::acc_regs<M, N, WM, WN>();
  static_assert(REGS == G::MI * G::NI * 4, "regs");
  std::vector<float> a(M * K), b(K * N), ref(M * N, 0.f);
  for (auto& x : a) x = rnd();
  for (auto& x : b) x = rnd();
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float s = 0; for (int k = 0; k < K; ++k) s += a[i * K + k] * b[k * N + j];
      ref[i * N + j] = s;
    }
  // shared tiles
  std::vector<float> sa(M * K), sb(K * N);
  for (int i = 0; i < M; ++i) for (int k = 0; k < K; ++k)
    sa[TA ? tl::smem_offset<K, M>(k, i) : tl::smem_offset<M, K>(i, k)] = a[i * K + k];
  for (int k = 0; k < K; ++k) for (int j = 0; j < N; ++j)
    sb[TB ? tl::smem_offset<N, K>(j, k) : tl::smem_offset<K, N>(k, j)] = b[k * N + j];

  std::vector<float> acc(THREADS * REGS, 0.f);
  for (int warp = 0; warp < WM * WN; ++warp) {
    // per-lane swizzled lane parts
    int a_sw[32], b_sw[32], a_ln[32], b_ln[32];
    for (int l = 0; l < 32; ++l) {
      a_ln[l] = G::a_lane(G::warp_m(warp), l); b_ln[l] = G::b_lane(G::warp_n(warp), l);
      a_sw[l] = tl::detail::Swz<G::A_COLS>::apply(a_ln[l]);
      b_sw[l] = tl::detail::Swz<G::B_COLS>::apply(b_ln[l]);
    }
    // emulated ldmatrix.x4: returns regs[lane][q][2]
    auto ldsm = [&](const std::vector<float>& s, const int* offs_chunks, bool trans, float out[32][4][2], int cols) {
      for (int q = 0; q < 4; ++q) {
        float mat[8][8];
        int mask = 0;
        for (int i = 0; i < 8; ++i) {
          int o = offs_chunks[8 * q + i];
          mask |= 1 << (o & 7);
          for (int e = 0; e < 8; ++e) mat[i][e] = s[o * 8 + e];
        }
        CHECK(mask == 255, "ldmatrix bank conflict cols=%d", cols);
        for (int L = 0; L < 32; ++L)
          for (int h = 0; h < 2; ++h)
            out[L][q][h] = trans ? mat[2 * (L % 4) + h][L / 4] : mat[L / 4][2 * (L % 4) + h];
      }
    };
    for (int kk = 0; kk < G::KS; ++kk) {
      static float fa[G::MI][32][4][2], fb[G::NI][32][2][2];
      for (int mi = 0; mi < G::MI; ++mi) {
        int offs[32];
        for (int l = 0; l < 32; ++l) {
          int c = G::a_const(mi, kk);
          CHECK((a_ln[l] & c) == 0, "A parts overlap");
          offs[l] = G::template at<G::A_COLS>(a_sw[l], c);
          CHECK(offs[l] == tl::detail::Swz<G::A_COLS>::apply(a_ln[l] + c), "A at()");
        }
        float out[32][4][2];
        ldsm(sa, offs, TA, out, G::A_COLS);
        for (int l = 0; l < 32; ++l) for (int q = 0; q < 4; ++q) for (int h = 0; h < 2; ++h) fa[mi][l][q][h] = out[l][q][h];
      }
      for (int nj = 0; nj < G::NI / 2; ++nj) {
        int offs[32];
        for (int l = 0; l < 32; ++l) {
          int c = G::b_const(nj, kk);
          CHECK((b_ln[l] & c) == 0, "B parts overlap");
          offs[l] = G::template at<G::B_COLS>(b_sw[l], c);
          CHECK(offs[l] == tl::detail::Swz<G::B_COLS>::apply(b_ln[l] + c), "B at()");
        }
        float out[32][4][2];
        ldsm(sb, offs, !TB, out, G::B_COLS);
        for (int l = 0; l < 32; ++l) for (int h = 0; h < 2; ++h) {
          fb[2 * nj][l][0][h] = out[l][0][h]; fb[2 * nj][l][1][h] = out[l][1][h];
          fb[2 * nj + 1][l][0][h] = out[l][2][h]; fb[2 * nj + 1][l][1][h] = out[l][3][h];
        }
      }
      // emulated mma.m16n8k16.row.col (PTX ISA fragment layouts)
      for (int mi = 0; mi < G::MI; ++mi)
        for (int ni = 0; ni < G::NI; ++ni) {
          float Am[16][16], Bm[16][8];
          for (int L = 0; L < 32; ++L) {
            int g = L / 4, t = L % 4;
            for (int q = 0; q < 4; ++q) for (int h = 0; h < 2; ++h)
              Am[g + 8 * (q & 1)][2 * t + 8 * (q >> 1) + h] = fa[mi][L][q][h];
            for (int q = 0; q < 2; ++q) for (int h = 0; h < 2; ++h)
              Bm[2 * t + 8 * q + h][g] = fb[ni][L][q][h];
          }
          for (int L = 0; L < 32; ++L) {
            int g = L / 4, t = L % 4;
            for (int e = 0; e < 4; ++e) {
              int r = g + 8 * (e >> 1), c = 2 * t + (e & 1);
              float s = 0; for (int k = 0; k < 16; ++k) s += Am[r][k] * Bm[k][c];
              acc[(warp * 32 + L) * REGS + (mi * G::NI + ni) * 4 + e] += s;
            }
          }
        }
    }
  }
  std::vector<int> hit(M * N, 0);
  for (int tid = 0; tid < THREADS; ++tid)
    for (int s = 0; s < REGS; ++s) {
      int i, j;
      tl::detail::Geom<M, N, 16, WM, WN, false, false>::acc_coord(tid, s, i, j);
      if (s & 1) { int i0, j0; tl::detail::Geom<M, N, 16, WM, WN, false, false>::acc_coord(tid, s - 1, i0, j0);
        CHECK(i0 == i && j0 + 1 == j && j0 % 2 == 0, "pair"); }
      CHECK(i >= 0 && i < M && j >= 0 && j < N, "coord range");
      hit[i * N + j]++;
      CHECK(acc[tid * REGS + s] == ref[i * N + j], "value M%d N%d K%d WM%d WN%d TA%d TB%d (%d,%d) %f vs %f",
            M, N, K, WM, WN, TA, TB, i, j, acc[tid * REGS + s], ref[i * N + j]);
    }
  for (int x = 0; x < M * N; ++x) CHECK(hit[x] == 1, "acc_coord not a bijection");
}

template <int M, int N, int K, int WM, int WN> void test_all_trans() {
  test_gemm<M, N, K, WM, WN, false, false>();
  test_gemm<M, N, K, WM, WN, false, true>();
  test_gemm<M, N, K, WM, WN, true, false>();
  test_gemm<M, N, K, WM, WN, true, true>();
}
template <int M, int N, int K> void test_warps() {
  test_all_trans<M, N, K, 2, 2>();
  test_all_trans<M, N, K, 1, 4>();
  test_all_trans<M, N, K, 4, 1>();
  test_all_trans<M, N, K, 2, 4>();
  test_all_trans<M, N, K, 4, 2>();
}
template <int M, int N> void test_k() { test_warps<M, N, 16>(); test_warps<M, N, 32>(); test_warps<M, N, 64>(); }

int main() {
  test_layout<8, 8>(); test_layout<16, 16>(); test_layout<64, 16>(); test_layout<64, 32>(); test_layout<128, 64>();
  test_layout<32, 128>(); test_layout<16, 256>(); test_layout<64, 512>(); test_layout<8, 1024>();
  test_k<64, 64>(); test_k<64, 128>(); test_k<128, 64>(); test_k<128, 128>(); test_k<128, 256>();
  test_k<256, 128>(); test_k<256, 256>(); test_k<64, 256>();
  test_all_trans<128, 128, 32, 8, 1>(); test_all_trans<128, 128, 32, 1, 8>();
  printf(failures ? "emulate: %d FAILURES\n" : "emulate: all checks passed\n", failures);
  return failures != 0;
}
