
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
}  // namespace tl
#endif  // TL_BITS_CUH_
