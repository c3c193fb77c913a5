// Which bulk tensor copies the copy engine accepts for matrices whose row pitch is not a
// multiple of 16 bytes (a tensor map's strides must be), and what lands in shared memory.
// A GEMM at such a pitch (K or N odd, e.g. 4097 x 4095 x 4099 or a 50257-wide vocabulary)
// cannot map its operands as matrices; these probes ask whether it could map them as
// something else:
//   1. a 2-D box whose start column is not a multiple of 8 elements (a 6-byte offset);
//   2. the same with the 128-byte swizzle;
//   3. eight one-row boxes with the 128-byte swizzle at shared offsets r * 128 against one
//      eight-row box: does the swizzle follow the shared address (the same bytes) or the
//      row within the box (row 0's pattern every time)?
//   4. a rank-1 map over a whole buffer of odd length: boxes of 64 elements at odd starts,
//      with and without the swizzle (one row of a matrix at any pitch is such a box);
//   5. a rank-1 box that runs past the buffer's end: zero fill of the tail;
//   6. a strided view: rows r = 8q + j of a matrix with an odd pitch K as a 2-D map of
//      (M / 8) x (8 K) elements (the stride 8K * 2 bytes is a multiple of 16), box 64 x 16 at
//      x = j K + k0: rows j, j + 8, ..., j + 120 in one copy.
// Each probe compares every shared byte with the host's expectation and prints PASS/FAIL
// (or the driver's refusal of the map). No project code is used.
// A fault in one probe (an illegal instruction) poisons the process's context, so each probe
// runs in its own process: `./probe N` runs probe N (0 is a control: an aligned box; 7 and 8 are
// probes 4 and 6 with the 128-byte swizzle), and `for i in $(seq 0 8); do ./probe $i; done`
// runs them all.
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a probe.cu -o probe -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static EncodeTiled encode_fn() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  if (!fn) {
    std::printf("no cuTensorMapEncodeTiled\n");
    std::exit(1);
  }
  return reinterpret_cast<EncodeTiled>(fn);
}

// One copy per entry of `boxes`: coordinates (up to 2) and the byte offset in shared memory.
struct Box {
  int c0, c1, smem;
};

__global__ void copy_boxes(const __grid_constant__ CUtensorMap map, int rank, const Box* boxes, int n,
                           unsigned bytes, uint8_t* out, int out_bytes) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  // 1024-byte alignment for the swizzle's atoms.
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  __shared__ __align__(8) uint64_t bar;
  for (int i = threadIdx.x; i < out_bytes; i += blockDim.x) smem[i] = 0xAB;  // poison
  if (threadIdx.x == 0) {
    unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(b));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes) : "memory");
    for (int i = 0; i < n; ++i) {
      unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem + boxes[i].smem));
      if (rank == 1) {
        asm volatile(
            "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];\n" ::"r"(d),
            "l"(reinterpret_cast<uint64_t>(&map)), "r"(b), "r"(boxes[i].c0)
            : "memory");
      } else {
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(d),
            "l"(reinterpret_cast<uint64_t>(&map)), "r"(b), "r"(boxes[i].c0), "r"(boxes[i].c1)
            : "memory");
      }
    }
    asm volatile(
        "{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n@!p bra W;\n}\n" ::"r"(b)
        : "memory");
  }
  __syncthreads();
  for (int i = threadIdx.x; i < out_bytes; i += blockDim.x) out[i] = smem[i];
}

// The byte offset of (row r, byte c) of a tile of 128-byte rows under the 128-byte swizzle:
// the 16-byte chunk index is XORed with the row's index within its 8-row atom.
static int swz128(int r, int c) { return r * 128 + ((((c >> 4) ^ (r & 7)) << 4) | (c & 15)); }

static int fails = 0;
static void report(const char* name, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  int bad = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i]) {
      if (first < 0) first = static_cast<int>(i);
      ++bad;
    }
  if (bad == 0) {
    std::printf("PASS  %s\n", name);
  } else {
    ++fails;
    std::printf("FAIL  %s: %d of %zu bytes differ, first at %d (got 0x%02x, want 0x%02x)\n", name, bad,
                want.size(), first, got[first], want[first]);
  }
}

// Runs the copies of `boxes` through `map` and returns the first `out_bytes` of shared memory.
static std::vector<uint8_t> run(const CUtensorMap& map, int rank, const std::vector<Box>& boxes, unsigned bytes,
                                int out_bytes) {
  Box* d_boxes;
  uint8_t* d_out;
  CK(cudaMalloc(&d_boxes, boxes.size() * sizeof(Box)));
  CK(cudaMalloc(&d_out, out_bytes));
  CK(cudaMemcpy(d_boxes, boxes.data(), boxes.size() * sizeof(Box), cudaMemcpyHostToDevice));
  int smem = out_bytes + 1024;
  CK(cudaFuncSetAttribute(copy_boxes, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  copy_boxes<<<1, 128, smem>>>(map, rank, d_boxes, static_cast<int>(boxes.size()), bytes, d_out, out_bytes);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<uint8_t> out(out_bytes);
  CK(cudaMemcpy(out.data(), d_out, out_bytes, cudaMemcpyDeviceToHost));
  CK(cudaFree(d_boxes));
  CK(cudaFree(d_out));
  return out;
}

int main(int argc, char** argv) {
  const int only = argc > 1 ? std::atoi(argv[1]) : -1;
  auto want_probe = [&](int i) { return only < 0 || only == i; };
  EncodeTiled encode = encode_fn();
  // A 2-byte-element buffer whose element i holds i (mod 65536): every byte says where it
  // came from.
  const int64_t total = 1 << 22;
  std::vector<uint16_t> host(total);
  for (int64_t i = 0; i < total; ++i) host[i] = static_cast<uint16_t>(i * 7 + 1);
  uint16_t* dev;
  CK(cudaMalloc(&dev, total * 2));
  CK(cudaMemcpy(dev, host.data(), total * 2, cudaMemcpyHostToDevice));
  auto elem_bytes = [&](int64_t i, uint8_t* b) {
    uint16_t v = (i >= 0 && i < total) ? host[i] : 0;
    std::memcpy(b, &v, 2);
  };

  auto map2d = [&](CUtensorMap* m, const void* base, uint64_t cols, uint64_t rows, uint64_t pitch_bytes,
                   uint32_t box_c, uint32_t box_r, CUtensorMapSwizzle sw) {
    cuuint64_t dims[2] = {cols, rows};
    cuuint64_t strides[1] = {pitch_bytes};
    cuuint32_t box[2] = {box_c, box_r};
    cuuint32_t es[2] = {1, 1};
    return encode(m, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(base), dims, strides, box, es,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  auto map1d = [&](CUtensorMap* m, const void* base, uint64_t n, uint32_t box_c, CUtensorMapSwizzle sw) {
    cuuint64_t dims[1] = {n};
    cuuint64_t strides[1] = {0};
    cuuint32_t box[1] = {box_c};
    cuuint32_t es[1] = {1};
    return encode(m, CU_TENSOR_MAP_DATA_TYPE_UINT16, 1, const_cast<void*>(base), dims, strides, box, es,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  const CUtensorMapSwizzle NONE = CU_TENSOR_MAP_SWIZZLE_NONE, S128 = CU_TENSOR_MAP_SWIZZLE_128B;
  // The swizzles of a probe pair: probe `plain` without, probe `swizzled` with the 128-byte one.
  auto sws = [&](int plain, int swizzled) {
    std::vector<CUtensorMapSwizzle> v;
    if (want_probe(plain)) v.push_back(NONE);
    if (want_probe(swizzled)) v.push_back(S128);
    return v;
  };

  // 0: the control: one 64 x 8 box at column 64, row 5, 128-byte swizzle (what the GEMM does).
  if (want_probe(0)) {
    CUtensorMap m;
    CUresult r = map2d(&m, dev, 1024, 1024, 2048, 64, 8, S128);
    if (r != CUDA_SUCCESS) {
      std::printf("FAIL  control: map refused (%d)\n", static_cast<int>(r));
      ++fails;
    } else {
      auto got = run(m, 2, {{64, 5, 0}}, 1024, 1024);
      std::vector<uint8_t> want(1024);
      for (int rr = 0; rr < 8; ++rr)
        for (int c = 0; c < 64; ++c) elem_bytes((5 + rr) * 1024 + 64 + c, &want[swz128(rr, c * 2)]);
      report("control: aligned 2-D box, 128-byte swizzle", got, want);
    }
  }

  // 1 and 2: a 1024 x 1024 matrix (aligned pitch), one 64 x 8 box at column 3, row 5.
  for (CUtensorMapSwizzle sw : sws(1, 2)) {
    CUtensorMap m;
    CUresult r = map2d(&m, dev, 1024, 1024, 2048, 64, 8, sw);
    const char* name = sw == NONE ? "2-D box at column 3 (6-byte offset)" : "2-D box at column 3, 128-byte swizzle";
    if (r != CUDA_SUCCESS) {
      std::printf("FAIL  %s: map refused (%d)\n", name, static_cast<int>(r));
      ++fails;
      continue;
    }
    auto got = run(m, 2, {{3, 5, 0}}, 1024, 1024);
    std::vector<uint8_t> want(1024);
    for (int rr = 0; rr < 8; ++rr)
      for (int c = 0; c < 64; ++c) {
        int off = sw == NONE ? rr * 128 + c * 2 : swz128(rr, c * 2);
        elem_bytes((5 + rr) * 1024 + 3 + c, &want[off]);
      }
    report(name, got, want);
  }

  // 3: eight one-row boxes at shared offsets r * 128 against the eight-row box's layout.
  if (want_probe(3)) {
    CUtensorMap m;
    CUresult r = map2d(&m, dev, 1024, 1024, 2048, 64, 1, S128);
    if (r != CUDA_SUCCESS) {
      std::printf("FAIL  one-row boxes, 128-byte swizzle: map refused (%d)\n", static_cast<int>(r));
      ++fails;
    } else {
      std::vector<Box> boxes;
      for (int rr = 0; rr < 8; ++rr) boxes.push_back({3, 5 + rr, rr * 128});
      auto got = run(m, 2, boxes, 1024, 1024);
      std::vector<uint8_t> want(1024);
      for (int rr = 0; rr < 8; ++rr)
        for (int c = 0; c < 64; ++c) elem_bytes((5 + rr) * 1024 + 3 + c, &want[swz128(rr, c * 2)]);
      report("one-row boxes at r * 128, 128-byte swizzle = one 8-row box", got, want);
      // The other reading: every one-row box takes row 0's pattern (no XOR).
      std::vector<uint8_t> plain(1024);
      for (int rr = 0; rr < 8; ++rr)
        for (int c = 0; c < 64; ++c) elem_bytes((5 + rr) * 1024 + 3 + c, &plain[rr * 128 + c * 2]);
      if (got == plain) std::printf("INFO  one-row boxes: the swizzle follows the row within the box\n");
    }
  }

  // 4: rank 1 over a buffer of odd length; boxes of 64 elements at odd starts, one per row
  // of a 4099-pitch matrix (row r starts at r * 4099), at shared offsets r * 128.
  for (CUtensorMapSwizzle sw : sws(4, 7)) {
    CUtensorMap m;
    const int64_t n = total - 1;
    CUresult r = map1d(&m, dev, n, 64, sw);
    const char* name = sw == NONE ? "rank-1 boxes at r * 4099 + 3" : "rank-1 boxes at r * 4099 + 3, 128-byte swizzle";
    if (r != CUDA_SUCCESS) {
      std::printf("FAIL  %s: map refused (%d)\n", name, static_cast<int>(r));
      ++fails;
      continue;
    }
    std::vector<Box> boxes;
    for (int rr = 0; rr < 16; ++rr) boxes.push_back({rr * 4099 + 3, 0, rr * 128});
    auto got = run(m, 1, boxes, 16 * 128, 16 * 128);
    std::vector<uint8_t> want(16 * 128);
    for (int rr = 0; rr < 16; ++rr)
      for (int c = 0; c < 64; ++c) {
        int off = sw == NONE ? rr * 128 + c * 2 : swz128(rr, c * 2);
        elem_bytes(static_cast<int64_t>(rr) * 4099 + 3 + c, &want[off]);
      }
    report(name, got, want);
  }

  // 5: a rank-1 box over the end of a buffer of n elements: the tail is zero.
  if (want_probe(5)) {
    CUtensorMap m;
    const int64_t n = 100003;
    CUresult r = map1d(&m, dev, n, 64, NONE);
    if (r != CUDA_SUCCESS) {
      std::printf("FAIL  rank-1 box past the end: map refused (%d)\n", static_cast<int>(r));
      ++fails;
    } else {
      auto got = run(m, 1, {{static_cast<int>(n - 21), 0, 0}}, 128, 128);
      std::vector<uint8_t> want(128);
      for (int c = 0; c < 64; ++c) {
        int64_t i = n - 21 + c;
        uint16_t v = i < n ? host[i] : 0;
        std::memcpy(&want[c * 2], &v, 2);
      }
      report("rank-1 box past the end: zero fill", got, want);
    }
  }

  // 6: the strided view of a 4099-pitch matrix: (M / 8) x (8 * 4099) elements, stride
  // 8 * 4099 * 2 = 65584 bytes; one 64 x 16 box at x = j * 4099 + k0, y = q0 brings rows
  // 8 (q0 + q) + j, q = 0..15.
  for (CUtensorMapSwizzle sw : sws(6, 8)) {
    CUtensorMap m;
    const uint64_t K = 4099, M = 512;
    CUresult r = map2d(&m, dev, 8 * K, M / 8, 8 * K * 2, 64, 16, sw);
    const char* name = sw == NONE ? "strided view: rows j, j + 8, .. of a 4099 pitch"
                                  : "strided view: rows j, j + 8, .. of a 4099 pitch, 128-byte swizzle";
    if (r != CUDA_SUCCESS) {
      std::printf("FAIL  %s: map refused (%d)\n", name, static_cast<int>(r));
      ++fails;
      continue;
    }
    const int j = 5, k0 = 131, q0 = 2;
    auto got = run(m, 2, {{static_cast<int>(j * K + k0), q0, 0}}, 16 * 128, 16 * 128);
    std::vector<uint8_t> want(16 * 128);
    for (int q = 0; q < 16; ++q)
      for (int c = 0; c < 64; ++c) {
        int off = sw == NONE ? q * 128 + c * 2 : swz128(q, c * 2);
        elem_bytes(static_cast<int64_t>(8 * (q0 + q) + j) * K + k0 + c, &want[off]);
      }
    report(name, got, want);
  }

  CK(cudaFree(dev));
  std::printf("%s: %d probe(s) failed\n", fails ? "FAIL" : "PASS", fails);
  return fails ? 1 : 0;
}
