
#ifndef TL_MATH_CUH_
#define TL_MATH_CUH_
namespace tl {
// 2^x of a float on the special-function unit: ex2.approx.ftz.f32 (within 2 ulp, as
// exp2f; results below 2^-126 flush to zero). exp2f computes the same approximation
// and adds a fix-up for subnormal results (a compare and two predicated multiplies per
// call), which in attention's softmax is a third of the work per score. What
// Triton's exp2 and fast-math builds compile to.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
}  // namespace tl
#endif  // TL_MATH_CUH_
