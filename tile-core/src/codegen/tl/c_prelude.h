#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <math.h>

static inline float tl_h2f(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
  if (e == 0x1fu) u = s | 0x7f800000u | (m << 13);
  else if (e != 0) u = s | ((e + 112u) << 23) | (m << 13);
  else if (m == 0) u = s;
  else { e = 113u; while (!(m & 0x400u)) { m <<= 1; e--; } u = s | (e << 23) | ((m & 0x3ffu) << 13); }
  float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t tl_f2h(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  uint32_t s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u);
  if (a < 0x38800000u) {
    if (a < 0x33000000u) return (uint16_t)s;
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, sh = 126u - e;
    uint32_t r = m >> sh, rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1u);
    if (rem > half || (rem == half && (r & 1u))) r++;
    return (uint16_t)(s | r);
  }
  uint32_t r = ((a - 0x38000000u) >> 13), rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
  return (uint16_t)(s | r);
}
static inline float tl_bf2f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t tl_f2bf(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
/* Atomic adds: blocks of one launch run on several CPU threads. */
static inline void tl_atomic_add_f32(float *p, float v) {
  uint32_t o = __atomic_load_n((uint32_t *)p, __ATOMIC_RELAXED), n; float f;
  do { memcpy(&f, &o, 4); f += v; memcpy(&n, &f, 4); }
  while (!__atomic_compare_exchange_n((uint32_t *)p, &o, n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}
static inline void tl_atomic_add_f64(double *p, double v) {
  uint64_t o = __atomic_load_n((uint64_t *)p, __ATOMIC_RELAXED), n; double f;
  do { memcpy(&f, &o, 8); f += v; memcpy(&n, &f, 8); }
  while (!__atomic_compare_exchange_n((uint64_t *)p, &o, n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}
static inline void tl_atomic_add_h(uint16_t *p, float v, int bf) {
  uint16_t o = __atomic_load_n(p, __ATOMIC_RELAXED), n;
  do { n = bf ? tl_f2bf(tl_bf2f(o) + v) : tl_f2h(tl_h2f(o) + v); }
  while (!__atomic_compare_exchange_n(p, &o, n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}
/* Float to integer as Rust's `as` (the IR's cast): truncate, saturate, NaN to 0. */
static inline int64_t tl_f2s(double x, int64_t lo, int64_t hi) {
  return x != x ? 0 : x <= (double)lo ? lo : x >= -(double)lo ? hi : (int64_t)x;
}
static inline uint64_t tl_f2u(double x, uint64_t hi) {
  return x != x || x <= 0.0 ? 0 : x >= (double)hi + 1.0 ? hi : (uint64_t)x;
}
static inline float tl_rh(float x) { return tl_h2f(tl_f2h(x)); }
static inline float tl_rbf(float x) { return tl_bf2f(tl_f2bf(x)); }
