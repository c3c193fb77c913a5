// tl/tma.cuh -- Hopper bulk tensor copies (TMA), mbarrier pipelines and warpgroup register
// reallocation for the CUDA backend (sm_90 / sm_90a).
//
// Pasted verbatim into generated CUDA C++ (nvcc or NVRTC), after tl/wgmma.cuh when both are
// used; it needs no other header and includes none (the tensor map is an opaque 128-byte
// value here, so neither <cuda.h> nor the driver API is needed on the device side). Public
// names live in tl::tma. The contract is in README.md next to this file.
//
// What is where (PTX ISA sections): "cp.async.bulk.tensor" (TMA loads and stores),
// "mbarrier" (init, arrive, expect-tx, try_wait.parity), "setmaxnreg" (sm_90a only).
//
// Architectures: as in wgmma.cuh, every name is declared in every pass; the bodies exist in a
// device pass for sm_90 or later (setmaxnreg: sm_90a), and instantiating one in a device pass
// for an older architecture is a compile-time error. Pasting the header costs nothing there.
#ifndef TL_TMA_CUH_
#define TL_TMA_CUH_

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TLTMA_SM90 1
#else
#define TLTMA_SM90 0
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TLTMA_SM90A 1
#else
#define TLTMA_SM90A 0
#endif
#if defined(__CUDA_ARCH__) && !TLTMA_SM90
#define TLTMA_OLD_DEVICE 1
#else
#define TLTMA_OLD_DEVICE 0
#endif

namespace tl {
namespace tma {

// The host-encoded tensor map (CUtensorMap: 128 bytes, 64-byte aligned). Kernels take it as a
// `const __grid_constant__ Desc` parameter and pass its address to the copies; the launcher
// encodes it with cuTensorMapEncodeTiled (see README.md for the fields the copies assume).
struct alignas(64) Desc {
  unsigned long long opaque[16];
};

// An mbarrier: 8 bytes of shared memory, 8-byte aligned.
typedef unsigned long long Barrier;

namespace detail {
template <int X> struct never { static constexpr bool value = false; };
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// The bits of a 4-byte accumulator value, and back.
__device__ __forceinline__ unsigned bits_of(float x) { return __float_as_uint(x); }
__device__ __forceinline__ unsigned bits_of(int x) { return static_cast<unsigned>(x); }
template <typename T> __device__ __forceinline__ T value_of(unsigned x);
template <> __device__ __forceinline__ float value_of<float>(unsigned x) { return __uint_as_float(x); }
template <> __device__ __forceinline__ int value_of<int>(unsigned x) { return static_cast<int>(x); }
}  // namespace detail

// ---- mbarriers -------------------------------------------------------------
// init(b, n): phase 0, n arrivals expected per phase. One thread initializes; then
// fence_init() and a __syncthreads() make the barrier visible to the block and to the copy
// engine before anyone arrives or waits.
template <int UNUSED = 0> __device__ __forceinline__ void init(Barrier* b, unsigned count) {
#if TLTMA_SM90
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(detail::smem_addr(b)), "r"(count) : "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}
template <int UNUSED = 0> __device__ __forceinline__ void fence_init() {
#if TLTMA_SM90
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}
// One arrival; with expect_tx the arrival also raises the phase's pending transaction count
// by `bytes`, which the copies that name this barrier pay off as their bytes land.
template <int UNUSED = 0> __device__ __forceinline__ void arrive(Barrier* b) {
#if TLTMA_SM90
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(detail::smem_addr(b)) : "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}
template <int UNUSED = 0> __device__ __forceinline__ void arrive_expect_tx(Barrier* b, unsigned bytes) {
#if TLTMA_SM90
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(detail::smem_addr(b)), "r"(bytes)
               : "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}
// Returns once the phase of parity `parity` (0 or 1) has completed. A barrier's current
// phase counts as incomplete and the one before it as complete, so waiting on parity 1 of a
// fresh barrier returns at once: a producer waits on its empty barriers with the parity
// opposite to its consumers' and needs no special first round.
// Debugging a hang: define TL_TMA_WAIT_LIMIT (clock cycles, e.g. 400000000; nvcc
// -DTL_TMA_WAIT_LIMIT=.., or a #define at the top of this file, which generated kernels
// carry inline). A wait that lasts that long then prints, from lane 0 of each waiting
// warp, the block, its cluster rank, the barrier's shared address, the parity and the
// barrier's raw word, and gives up (the kernel finishes with wrong results, and the printf
// buffer reaches the host). It counts cycles, not polls: try_wait suspends the thread for
// a while in each poll, so a poll count bounds no time. For debugging builds only: the
// check and the printf cost registers and instructions in every wait.
template <int UNUSED = 0> __device__ __forceinline__ void wait(Barrier* b, unsigned parity) {
#if TLTMA_SM90
  const unsigned a = detail::smem_addr(b);
  unsigned done = 0;
#ifdef TL_TMA_WAIT_LIMIT
  const long long t0 = clock64();
#endif
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
#ifdef TL_TMA_WAIT_LIMIT
    if (!done && clock64() - t0 > (long long)(TL_TMA_WAIT_LIMIT)) {
      if ((threadIdx.x & 31) == 0) {
        unsigned r, n;
        asm volatile("mov.u32 %0, %%cluster_ctarank;\nmov.u32 %1, %%cluster_nctarank;\n" : "=r"(r), "=r"(n));
        printf("tl::tma::wait: block (%d, %d) rank %u of %u thread %d: barrier 0x%x parity %u raw 0x%llx\n",
               (int)blockIdx.x, (int)blockIdx.y, r, n, (int)threadIdx.x, a, parity, *(volatile unsigned long long*)b);
      }
      done = 1;
    }
#endif
  } while (!done);
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}

// ---- named barriers ------------------------------------------------------------
// bar.sync ID, N: the first N threads' barrier when a warp-specialized kernel's producer
// warpgroup (the threads from N on) has left; ID 0 is __syncthreads()'s.
template <int ID, int N> __device__ __forceinline__ void bar_sync() {
  static_assert(ID >= 1 && ID < 16 && N % 32 == 0, "tl::tma::bar_sync: ID in [1, 16), N a multiple of 32");
#if defined(__CUDA_ARCH__)
  asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(N) : "memory");
#endif
}

// Two consumer warpgroups taking turns (a rotated attention loop's ping-pong): warpgroup
// `wg` (0 or 1) waits on barrier 2 + wg for its turn and passes the turn by arriving on the
// other's. Each barrier counts N = 256 threads: the 128 of its warpgroup waiting and the 128
// of the other arriving. Warpgroup 1 arrives on warpgroup 0's barrier once at the start,
// so warpgroup 0 takes the first turn, and warpgroup 0 waits there once more at the end
// for the turn warpgroup 1 passed last, so both barriers end complete (no arrival is left
// pending at exit). Every arrival on a warpgroup's barrier thus comes from the other one.
// compute-sanitizer's racecheck (2025.3) reported a hazard on a shared-memory exchange
// after these turns in each arrangement that finished, even one ordered by __syncthreads(),
// and on none without them: bench/racecheck/pingpong.cu (bench/RESULTS.md).
// bar.sync/bar.arrive are .aligned: every lane of a warp must execute the same one, and
// a warp can leave the mbarrier spin before them lane by lane, hence the __syncwarp().
// ID 1 is the consumers' barrier (bar_sync above).
template <int N> __device__ __forceinline__ void pingpong_begin(int wg) {
#if defined(__CUDA_ARCH__)
  __syncwarp();
  if (wg == 1) asm volatile("bar.arrive 2, %0;\n" ::"n"(N) : "memory");
#endif
}
template <int N> __device__ __forceinline__ void pingpong_wait(int wg) {
#if defined(__CUDA_ARCH__)
  __syncwarp();
  asm volatile("bar.sync %0, %1;\n" ::"r"(2 + wg), "n"(N) : "memory");
#endif
}
template <int N> __device__ __forceinline__ void pingpong_pass(int wg) {
#if defined(__CUDA_ARCH__)
  __syncwarp();
  asm volatile("bar.arrive %0, %1;\n" ::"r"(3 - wg), "n"(N) : "memory");
#endif
}
template <int N> __device__ __forceinline__ void pingpong_end(int wg) {
#if defined(__CUDA_ARCH__)
  __syncwarp();
  if (wg == 0) asm volatile("bar.sync 2, %0;\n" ::"n"(N) : "memory");
#endif
}

// ---- clusters of blocks (TMA multicast) -----------------------------------------
// A kernel launched in clusters (the launcher's cuLaunchKernelEx with a cluster dimension;
// without one every block is a cluster of one) reads its cluster's size and its rank in it.
template <int UNUSED = 0> __device__ __forceinline__ unsigned cluster_ctas() {
#if TLTMA_SM90
  unsigned n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
#else
  return 1;
#endif
}
template <int UNUSED = 0> __device__ __forceinline__ unsigned cluster_rank() {
#if TLTMA_SM90
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
#else
  return 0;
#endif
}
// Every non-exited thread of every block of the cluster arrives, then waits for the others:
// around a split loop's exchange of partial sums through shared memory (the arrival
// releases the stores, the wait acquires them). Executed by every thread of a warp (.aligned).
template <int UNUSED = 0> __device__ __forceinline__ void cluster_sync() {
#if TLTMA_SM90
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}
// The same barrier after the mbarrier setup, whose only writes fence_init() already released
// to the cluster: each block's barriers are then visible to the others' copies and arrivals.
// The arrival is relaxed: a releasing one compiles to a whole-GPU memory barrier
// (MEMBAR.ALL.GPU) in every thread, which cost 4-5% of a 1000^3 GEMM in 2 x 2 and 4 x 2
// clusters on an H100 (bench/RESULTS.md, 2026-12-07 sixth session).
template <int UNUSED = 0> __device__ __forceinline__ void cluster_sync_init() {
#if TLTMA_SM90
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}
// One arrival on the barrier at b's offset in the shared memory of the cluster's block `rank`.
// CTA-scoped release, as for a local arrival: the stage's readers are this block's wgmmas,
// complete before the arrival; a cluster-scoped release puts a whole-GPU memory barrier in
// front of every arrival (measured: about 0.5 us more per pipeline stage).
template <int UNUSED = 0> __device__ __forceinline__ void arrive_cluster(Barrier* b, unsigned rank) {
#if TLTMA_SM90
  asm volatile(
      "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\nmbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(
          detail::smem_addr(b)),
      "r"(rank)
      : "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}

// ---- bulk tensor copies ------------------------------------------------------
// Hint that the tensor map will be used soon (one thread, before the first copy).
template <int UNUSED = 0> __device__ __forceinline__ void prefetch(const Desc* d) {
#if TLTMA_SM90
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(d)) : "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}
// One box of a 2-D tensor map, global -> shared: the box whose first element is at
// (x = c0 along the contiguous dimension, y = c1) lands at s (1024-byte aligned for the
// 128-byte swizzle), and its bytes complete on b. Elements outside the tensor are zeros
// and still count as transferred bytes.
template <int UNUSED = 0> __device__ __forceinline__ void load_2d(void* s, const Desc* d, Barrier* b, int c0, int c1) {
#if TLTMA_SM90
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::
          "r"(detail::smem_addr(s)),
      "l"(reinterpret_cast<unsigned long long>(d)), "r"(detail::smem_addr(b)), "r"(c0), "r"(c1)
      : "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}
// load_2d into the same offset s of every block of the cluster in `mask` (bit r: rank r),
// completing on the barrier at b's offset in each of them.
template <int UNUSED = 0>
__device__ __forceinline__ void load_2d_multicast(void* s, const Desc* d, Barrier* b, int c0, int c1, unsigned short mask) {
#if TLTMA_SM90
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n" ::
          "r"(detail::smem_addr(s)),
      "l"(reinterpret_cast<unsigned long long>(d)), "r"(detail::smem_addr(b)), "r"(c0), "r"(c1), "h"(mask)
      : "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}
// One box of a 3-D tensor map, as load_2d with the third coordinate c2.
template <int UNUSED = 0>
__device__ __forceinline__ void load_3d(void* s, const Desc* d, Barrier* b, int c0, int c1, int c2) {
#if TLTMA_SM90
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::
          "r"(detail::smem_addr(s)),
      "l"(reinterpret_cast<unsigned long long>(d)), "r"(detail::smem_addr(b)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}
// One box, shared -> global (the parts outside the tensor are not written). The caller's
// threads wrote s with ordinary stores: each of them executes fence_proxy_async() (wgmma.cuh,
// or the one below) before the barrier that precedes this. Completion: store_commit(), then
// store_wait_read<0>() before s is written again or the block exits.
template <int UNUSED = 0> __device__ __forceinline__ void store_2d(const Desc* d, const void* s, int c0, int c1) {
#if TLTMA_SM90
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<unsigned long long>(d)),
               "r"(detail::smem_addr(s)), "r"(c0), "r"(c1)
               : "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}
template <int UNUSED = 0> __device__ __forceinline__ void store_commit() {
#if TLTMA_SM90
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}
// Waits until at most N committed store groups still read their shared source.
template <int N> __device__ __forceinline__ void store_wait_read() {
#if TLTMA_SM90
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<N>::value && N == N, "tl::tma needs sm_90 or later");
#endif
}
template <int UNUSED = 0> __device__ __forceinline__ void fence_proxy_async() {
#if TLTMA_SM90
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<UNUSED>::value, "tl::tma needs sm_90 or later");
#endif
}

// The panels of an R x C tile of EB-byte elements in the layout of tl::wg::smem_offset<R, C,
// EB>: PW columns each, PW * EB = 128 bytes a row (128-byte swizzle) when a row is whole
// 128-byte panels, else the row itself, 64 or 32 bytes (a k tile of 32 or 16 two-byte
// columns, one panel, 64- or 32-byte swizzle). The tensor map's box is {PW, rows} and its
// swizzle the one whose span is PW * EB bytes (the runtime's tma module derives it so).
template <int R, int C, int EB> struct Panels {
  static constexpr int ROW = C * EB < 128 ? C * EB : 128;  // bytes of a panel's row
  static constexpr int PW = ROW / EB;                       // columns of a panel
  static constexpr int N = C / PW;                          // panels
  static_assert(EB == 1 || EB == 2, "tl::tma: elements of 1 or 2 bytes");
  static_assert((ROW == 32 || ROW == 64 || ROW == 128) && C % PW == 0,
                "tl::tma: a tile row of 32 or 64 bytes or of whole 128-byte panels");
  static_assert(R % 8 == 0 && R <= 256, "tl::tma: R % 8 == 0, R <= 256");
};

// A R x C tile (see Panels) from a row-major matrix through a tensor map whose box is
// {PW, R}: one box per panel, panel p from column c0 + PW*p. Issued by one thread; the
// tile's bytes, EB*R*C, complete on b.
template <int R, int C, int EB = 2>
__device__ __forceinline__ void load_tile(void* s, const Desc* d, Barrier* b, int r0, int c0) {
  using P = Panels<R, C, EB>;
#pragma unroll
  for (int p = 0; p < P::N; ++p) load_2d(static_cast<char*>(s) + p * R * P::ROW, d, b, c0 + P::PW * p, r0);
}
// The same from one matrix of a batch: a 3-D tensor map {columns, rows, matrices} with box
// {PW, R, 1}, matrix z. Zero fill then stops at that matrix's edge, not at the batch's.
template <int R, int C, int EB = 2>
__device__ __forceinline__ void load_tile(void* s, const Desc* d, Barrier* b, int r0, int c0, int z) {
  using P = Panels<R, C, EB>;
#pragma unroll
  for (int p = 0; p < P::N; ++p) load_3d(static_cast<char*>(s) + p * R * P::ROW, d, b, c0 + P::PW * p, r0, z);
}
// Part `part` of load_tile's R x C tile that the N blocks (2, 4 or 8) of a cluster whose ranks
// are the bits of `mask` all load: rows [part * R/N, (part + 1) * R/N) of every panel, through a
// tensor map whose box is {PW, R/N}, multicast to those N blocks. A part is whole 8-row swizzle
// atoms (R % 8N == 0), so the rows land where load_tile puts them.
// Each block's b receives all EB*R*C bytes: its own part and the other blocks'.
template <int R, int C, int EB = 2, int N = 2>
__device__ __forceinline__ void load_tile_part(void* s, const Desc* d, Barrier* b, int r0, int c0, unsigned part,
                                               unsigned mask) {
  using L = Panels<R, C, EB>;
  static_assert(N == 2 || N == 4 || N == 8, "tl::tma::load_tile_part: groups of 2, 4 or 8 blocks");
  static_assert(R % (8 * N) == 0, "tl::tma::load_tile_part: R % 8N == 0");
  constexpr int P = R / N;
#pragma unroll
  for (int p = 0; p < L::N; ++p)
    load_2d_multicast(static_cast<char*>(s) + p * R * L::ROW + part * P * L::ROW, d, b, c0 + L::PW * p,
                      r0 + part * P, (unsigned short)mask);
}
template <int R, int C> __host__ __device__ constexpr unsigned tile_bytes() { return 2u * R * C; }

// ---- warpgroup register reallocation (sm_90a) ----------------------------------
// setmaxnreg: every thread of a warpgroup executes the same call. The kernel needs a register
// cap at entry (__launch_bounds__(threads, blocks)); a producer gives registers back with
// dec<40>() and the consumers take them with inc<N>(): N*128*consumer_wgs + 40*128 must fit in
// the block's share of the register file, or inc waits for ever.
template <int N> __device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg: a multiple of 8 in [24, 256]");
#if TLTMA_SM90A
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#elif defined(__CUDA_ARCH__)
  static_assert(detail::never<N>::value && N == N, "tl::tma::setmaxnreg needs sm_90a");
#endif
}
template <int N> __device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg: a multiple of 8 in [24, 256]");
#if TLTMA_SM90A
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#elif defined(__CUDA_ARCH__)
  static_assert(detail::never<N>::value && N == N, "tl::tma::setmaxnreg needs sm_90a");
#endif
}

// ---- a multi-stage pipeline on full/empty mbarrier pairs -----------------------
// full[s]: one arrival (the producer's arrive_expect_tx) plus the stage's bytes; empty[s]:
// `consumers` arrivals (one per consumer warp, after its wgmma that read the stage completed).
// Producer and consumers walk the stages in the same order, each with its own State; a State
// wraps from stage S-1 to 0 and flips its phase bit then.
// G > 1 splits each stage's tiles into G groups with a full/empty pair each (group g of stage
// s at g * S + s), filled in group order and released independently: a rotated attention loop
// frees K once S = Q K^T completed and V once the deferred P V did, so the producer refills K
// half an iteration sooner. Methods take the group as a template argument (default 0).
template <int S, int G = 1> struct Pipe {
  static_assert(S >= 1 && S <= 32, "tl::tma::Pipe: 1 to 32 stages");
  static_assert(G >= 1 && G <= 2, "tl::tma::Pipe: 1 or 2 groups of tiles a stage");
  Barrier full[G * S];
  Barrier empty[G * S];

  struct State {
    int stage;
    unsigned phase;
    __device__ __forceinline__ State() : stage(0), phase(0) {}
    __device__ __forceinline__ void advance() {
      if (++stage == S) { stage = 0; phase ^= 1u; }
    }
  };

  // One thread, before the block-wide barrier that publishes the pipe.
  __device__ __forceinline__ void init(unsigned consumers) {
#pragma unroll
    for (int s = 0; s < G * S; ++s) {
      ::tl::tma::init(&full[s], 1);
      ::tl::tma::init(&empty[s], consumers);
    }
    fence_init();
  }
  // Producer (the elected thread): waits until the stage is free, then announces `bytes`
  // on its full barrier; the caller issues the copies that complete on full_bar(st) next.
  template <int Gr = 0> __device__ __forceinline__ void producer_acquire(const State& st, unsigned bytes) {
    static_assert(Gr < G, "tl::tma::Pipe: no such group");
    wait(&empty[Gr * S + st.stage], st.phase ^ 1u);
    arrive_expect_tx(&full[Gr * S + st.stage], bytes);
  }
  // Producer, after its last stage, in a cluster whose blocks multicast into each other's
  // stages: waits until every stage's last use was released by every block it fills (the
  // stage's next phase), so that no other block's consumers still arrive on this block's
  // barriers once it leaves. The other blocks' copies into this block all landed before its
  // own consumers finished. This replaces a cluster barrier at the end of the kernel (whose
  // releasing arrival waited for the epilogue's stores): 4-5% of a 1000^3 GEMM in clusters
  // on an H100, beside the relaxed barrier at the start (bench/RESULTS.md).
  __device__ __forceinline__ void producer_tail(State st) {
#pragma unroll 1
    for (int s = 0; s < S; ++s) {
#pragma unroll
      for (int g = 0; g < G; ++g) wait(&empty[g * S + st.stage], st.phase ^ 1u);
      st.advance();
    }
  }
  template <int Gr = 0> __device__ __forceinline__ Barrier* full_bar(const State& st) {
    return &full[Gr * S + st.stage];
  }
  // Consumers: wait until the stage's bytes have landed (visible to wgmma: the copy engine
  // and wgmma both act through the async proxy).
  template <int Gr = 0> __device__ __forceinline__ void consumer_wait(const State& st) {
    wait(&full[Gr * S + st.stage], st.phase);
  }
  // One arrival per consumer warp (lane 0), once the warp's reads of the stage completed.
  template <int Gr = 0> __device__ __forceinline__ void consumer_release(const State& st) {
    if ((threadIdx.x & 31) == 0) arrive(&empty[Gr * S + st.stage]);
  }
  // The same in a cluster whose blocks multicast into each other's stages: `mask` holds the
  // ranks whose copies fill this block's stages, which are the ranks this block's copies fill
  // (each empty barrier was initialized with that many times the consumers; 0: no cluster).
  // Lane r arrives on block r's barrier when bit r is set, so no producer refills a stage that
  // any block it fills still reads.
  __device__ __forceinline__ void consumer_release(const State& st, unsigned mask) {
    const unsigned lane = threadIdx.x & 31;
    if (mask == 0) {
      consumer_release(st);
    } else if (lane < 8 && ((mask >> lane) & 1u)) {
      arrive_cluster(&empty[st.stage], lane);
    }
  }
};

// ---- a loop split over the blocks of a cluster (T::use_split_k) ---------------------------
// Each block of the cluster summed a range of the loop's iterations into its accumulator
// registers (R 4-byte values per consumer thread, THREADS consumers). The blocks other than
// the first leave theirs in their own shared memory at `at`: value i of thread t in the
// 16-byte granule (i / 4) * THREADS + t, so each warp's store is 512 consecutive bytes. After
// a cluster_sync the first block adds the others' (split_gather, one call per block in rank
// order: the same bits on every run), reading them where they lie through the cluster's
// shared memory window; a second cluster_sync keeps every block alive until then.
template <typename T, int R, int THREADS>
__device__ __forceinline__ void split_leave(const T* acc, unsigned char* at) {
  static_assert(sizeof(T) == 4 && R % 4 == 0, "tl::tma::split_leave: 4-byte values, 4 per granule");
  uint4* out = reinterpret_cast<uint4*>(at) + threadIdx.x;
#pragma unroll
  for (int i = 0; i < R / 4; ++i) {
    unsigned v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = detail::bits_of(acc[4 * i + e]);
    out[i * THREADS] = make_uint4(v[0], v[1], v[2], v[3]);
  }
}
template <typename T, int R, int THREADS>
__device__ __forceinline__ void split_gather(T* acc, unsigned char* at, unsigned rank) {
  static_assert(sizeof(T) == 4 && R % 4 == 0, "tl::tma::split_gather: 4-byte values, 4 per granule");
#if TLTMA_SM90
  unsigned base;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(base)
               : "r"(detail::smem_addr(at + 16 * threadIdx.x)), "r"(rank));
#pragma unroll
  for (int i = 0; i < R / 4; ++i) {
    unsigned v[4];
    asm volatile("ld.shared::cluster.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                 : "r"(base + 16u * i * THREADS)
                 : "memory");
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[4 * i + e] += detail::value_of<T>(v[e]);
    // Eight granules at a time: left free, ptxas issues every load first (128 values
    // beside 128 accumulators in a 128 x 256 tile over 256 threads) and spills. No load
    // moves above a memory fence (three per block, once per tile).
    if (i % 8 == 7 && i + 1 < R / 4) __threadfence_block();
  }
#elif TLTMA_OLD_DEVICE
  static_assert(detail::never<R>::value, "tl::tma needs sm_90 or later");
#endif
}

}  // namespace tma
}  // namespace tl

#undef TLTMA_SM90
#undef TLTMA_SM90A
#undef TLTMA_OLD_DEVICE
#endif  // TL_TMA_CUH_
