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
/* Packed pairs (f16x2 with bf = 0, bf16x2 with bf = 1): the 32 bits of two
 * halves, the first in the low 16 bits. An operation computes each half in
 * float and rounds it to its type, as the device's paired instructions do. */
static inline float tl_p2get(int bf, uint32_t v, int hi) {
  uint16_t h = (uint16_t)(hi ? v >> 16 : v);
  return bf ? tl_bf2f(h) : tl_h2f(h);
}
static inline uint32_t tl_p2make(int bf, float lo, float hi) {
  uint32_t l = bf ? tl_f2bf(lo) : tl_f2h(lo), h = bf ? tl_f2bf(hi) : tl_f2h(hi);
  return l | h << 16;
}
/* op: 0 +, 1 -, 2 *, 3 /, 4 max, 5 min (max and min return the operand that
 * is not NaN, as __hmax2 and __hmin2 do). */
static inline float tl_p2op1(int op, float a, float b) {
  switch (op) {
  case 0: return a + b;
  case 1: return a - b;
  case 2: return a * b;
  case 3: return a / b;
  case 4: return fmaxf(a, b);
  default: return fminf(a, b);
  }
}
static inline uint32_t tl_p2op(int bf, int op, uint32_t a, uint32_t b) {
  return tl_p2make(bf, tl_p2op1(op, tl_p2get(bf, a, 0), tl_p2get(bf, b, 0)),
                   tl_p2op1(op, tl_p2get(bf, a, 1), tl_p2get(bf, b, 1)));
}
static inline uint32_t tl_p2fma(int bf, uint32_t a, uint32_t b, uint32_t c) {
  return tl_p2make(bf, fmaf(tl_p2get(bf, a, 0), tl_p2get(bf, b, 0), tl_p2get(bf, c, 0)),
                   fmaf(tl_p2get(bf, a, 1), tl_p2get(bf, b, 1), tl_p2get(bf, c, 1)));
}
/* The 8-bit floats, stored as bytes and computed in float. Encoding rounds
 * to nearest even from the exact value, saturates overflow and infinities to
 * the largest finite value and keeps NaN a NaN (CUDA's satfinite conversion,
 * which the CUDA backend uses). e4m3: bias 7, 3 mantissa bits, no infinity;
 * e5m2: bias 15, 2 mantissa bits. Scaling by powers of two is exact, so
 * rint() of the value over its quantum is the whole rounding. */
static inline uint8_t tl_f8_enc(double x, int mbits, int bias, double maxv, uint8_t maxc,
                                int e5m2) {
  uint64_t u;
  memcpy(&u, &x, 8);
  uint8_t sign = (uint8_t)((u >> 56) & 0x80);
  if (x != x) return (uint8_t)(sign | (e5m2 ? 0x7E | ((u >> 50) & 3) : 0x7F));
  double a = fabs(x);
  if (a >= 2.0 * maxv) return (uint8_t)(sign | maxc); /* infinities too */
  int emin = 1 - bias; /* exponent of the smallest normal */
  int e;
  frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  int eq = (a == 0.0 || e - 1 < emin) ? emin : e - 1;
  double q = ldexp(1.0, eq - mbits); /* the quantum at a's binade */
  double r = rint(a / q) * q;
  if (r > maxv) return (uint8_t)(sign | maxc);
  if (r < ldexp(1.0, emin)) return (uint8_t)(sign | (uint8_t)(r / ldexp(1.0, emin - mbits)));
  frexp(r, &e);
  int m = (int)(ldexp(r, -(e - 1) + mbits)) - (1 << mbits);
  return (uint8_t)(sign | ((e - 1 + bias) << mbits) | m);
}
static inline float tl_f8_dec(uint8_t b, int mbits, int bias, int e5m2) {
  int ebits = 7 - mbits;
  int ex = (b >> mbits) & ((1 << ebits) - 1), m = b & ((1 << mbits) - 1);
  float s = (b & 0x80) ? -1.0f : 1.0f;
  if (e5m2 && ex == 31) return m ? NAN : s * INFINITY;
  if (!e5m2 && ex == 15 && m == 7) return NAN;
  if (ex == 0) return s * ldexpf((float)m, 1 - bias - mbits);
  return s * ldexpf((float)((1 << mbits) + m), ex - bias - mbits);
}
static inline uint8_t tl_f2e4m3(double x) { return tl_f8_enc(x, 3, 7, 448.0, 0x7E, 0); }
static inline uint8_t tl_f2e5m2(double x) { return tl_f8_enc(x, 2, 15, 57344.0, 0x7B, 1); }
static inline float tl_e4m32f(uint8_t b) { return tl_f8_dec(b, 3, 7, 0); }
static inline float tl_e5m22f(uint8_t b) { return tl_f8_dec(b, 2, 15, 1); }
static inline float tl_re4m3(double x) { return tl_e4m32f(tl_f2e4m3(x)); }
static inline float tl_re5m2(double x) { return tl_e5m22f(tl_f2e5m2(x)); }
