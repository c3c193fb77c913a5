
#ifndef TL_BITS_CUH_
#define TL_BITS_CUH_
namespace tl {
// The bits of `from` read as a `To` of the same size (`T::bitcast`): a register
// move, no conversion.
template <typename To, typename From>
__device__ __forceinline__ To bitcast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bitcast keeps the size");
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}
// `(a & b) | c` in one instruction (ptxas splits it in two when `b` and `c`
// are both constants).
__device__ __forceinline__ unsigned int and_or(unsigned int a, unsigned int b, unsigned int c) {
  unsigned int d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ int and_or(int a, int b, int c) {
  return (int)and_or((unsigned int)a, (unsigned int)b, (unsigned int)c);
}
}  // namespace tl
#endif  // TL_BITS_CUH_
