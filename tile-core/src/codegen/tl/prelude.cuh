#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace tl {
// A register vector; its alignment makes loads and stores through it one
// wide memory instruction (LDG.128 / STG.128 for 16 bytes).
template <typename T, int N> struct alignas(sizeof(T) * N) vec { T x[N]; };
}  // namespace tl
