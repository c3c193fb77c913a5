#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace tl {
// A register vector; its alignment makes loads and stores through it one
// wide memory instruction (LDG.128 / STG.128 for 16 bytes).
template <typename T, int N> struct alignas(sizeof(T) * N) vec { T x[N]; };
// p[0] += a, p[1] += b atomically, p 8-byte aligned in global memory: one 8-byte
// vector reduction on sm_90+ (red.global.add.v2.f32: half the L2 atomic operations
// of two scalar ones), two atomicAdds before.
__device__ __forceinline__ void atomic_add2(float* p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
#endif
}
}  // namespace tl
