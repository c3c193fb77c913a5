// The comparison of a tuned variant's outputs with the reference variant's, on the
// device (see outputs.rs). Plain C with no headers: NVRTC compiles it without the
// CUDA include folder, and a host C compiler builds the element functions for the
// runtime's tests, which check them against the host comparison.
//
// An element is read as a double the way the host comparison reads it (`values` in
// autotune/outputs.rs): integers by value, floats (f8 included) exactly.
// Two elements are the same when both are NaN, equal, or |x - y| <= atol.

typedef unsigned long long tt_u64;

#ifdef __CUDACC__
#define TT_FN static __device__ __forceinline__
#else
#define TT_FN static
#endif

TT_FN double tt_from_bits(tt_u64 b) {
    union { tt_u64 u; double d; } v;
    v.u = b;
    return v.d;
}

TT_FN double tt_f16(unsigned short h) {
    unsigned int e = (h >> 10) & 31u, m = h & 1023u;
    double v;
    if (e == 0) {
        v = (double)m * (1.0 / 16777216.0);
    } else if (e == 31) {
        v = m ? tt_from_bits(0x7ff8000000000000ULL) : tt_from_bits(0x7ff0000000000000ULL);
    } else {
        v = (double)(1024u + m) * tt_from_bits((tt_u64)((int)e - 25 + 1023) << 52);
    }
    return (h >> 15) ? -v : v;
}

TT_FN double tt_bf16(unsigned short b) {
    union { unsigned int u; float f; } v;
    v.u = (unsigned int)b << 16;
    return (double)v.f;
}

// e5m2 is binary16's top byte, so its value is that of the f16 it starts.
TT_FN double tt_e5m2(unsigned char b) {
    return tt_f16((unsigned short)(b << 8));
}

// e4m3 (bias 7, 3 mantissa bits) has no infinities: 0x7f and 0xff are its NaNs.
TT_FN double tt_e4m3(unsigned char b) {
    unsigned int e = (b >> 3) & 15u, m = b & 7u;
    double v;
    if ((b & 0x7f) == 0x7f) {
        return tt_from_bits(0x7ff8000000000000ULL);
    } else if (e == 0) {
        v = (double)m * (1.0 / 512.0);
    } else {
        v = (double)(8u + m) * tt_from_bits((tt_u64)((int)e - 10 + 1023) << 52);
    }
    return (b >> 7) ? -v : v;
}

// Element `i` of `p`; `code` as `dtype_code` in outputs.rs.
TT_FN double tt_load(const unsigned char* p, tt_u64 i, int code) {
    switch (code) {
    case 0: return (double)p[i];
    case 1: return (double)((const signed char*)p)[i];
    case 2: return (double)((const short*)p)[i];
    case 3: return (double)((const unsigned short*)p)[i];
    case 4: return (double)((const int*)p)[i];
    case 5: return (double)((const unsigned int*)p)[i];
    case 6: return (double)((const long long*)p)[i];
    case 7: return (double)((const tt_u64*)p)[i];
    case 8: return tt_f16(((const unsigned short*)p)[i]);
    case 9: return tt_bf16(((const unsigned short*)p)[i]);
    case 10: return (double)((const float*)p)[i];
    case 12: return tt_e4m3(p[i]);
    case 13: return tt_e5m2(p[i]);
    default: return ((const double*)p)[i];
    }
}

TT_FN int tt_isnan(double x) { return x != x; }
TT_FN double tt_abs(double x) { return x < 0.0 ? -x : x; }
TT_FN int tt_finite(double x) { return x - x == 0.0; }

TT_FN int tt_same(double x, double y, double atol) {
    return (tt_isnan(x) && tt_isnan(y)) || x == y || tt_abs(x - y) <= atol;
}

#ifdef __CUDACC__

#define TT_THREADS 256

// max |x| over the finite elements of `w`, as the bits of a non-negative double
// (which order as unsigned integers) into `*out` (set to 0 before).
extern "C" __global__ void __launch_bounds__(TT_THREADS)
tile_tune_absmax(const unsigned char* w, tt_u64 n, int code, tt_u64* out) {
    __shared__ double s[TT_THREADS];
    double m = 0.0;
    for (tt_u64 i = (tt_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (tt_u64)gridDim.x * blockDim.x) {
        double v = tt_load(w, i, code);
        if (tt_finite(v) && tt_abs(v) > m) {
            m = tt_abs(v);
        }
    }
    s[threadIdx.x] = m;
    __syncthreads();
    for (unsigned int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k && s[threadIdx.x + k] > s[threadIdx.x]) {
            s[threadIdx.x] = s[threadIdx.x + k];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0 && s[0] > 0.0) {
        atomicMax(out, (tt_u64)__double_as_longlong(s[0]));
    }
}

// The index of the first element where `w` and `g` differ into `*first` (set to
// all ones before): each thread stops at its first mismatch, the smallest of its
// stride, so the minimum over the threads is the first overall.
extern "C" __global__ void __launch_bounds__(TT_THREADS)
tile_tune_compare(const unsigned char* w, const unsigned char* g, tt_u64 n, int code,
                  double atol, tt_u64* first) {
    for (tt_u64 i = (tt_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (tt_u64)gridDim.x * blockDim.x) {
        if (i >= *(volatile tt_u64*)first) {
            return;
        }
        if (!tt_same(tt_load(w, i, code), tt_load(g, i, code), atol)) {
            atomicMin(first, i);
            return;
        }
    }
}

#else

// The host versions the tests call: the same element functions, in loops.
double tt_host_load(const unsigned char* p, tt_u64 i, int code) {
    return tt_load(p, i, code);
}

double tt_host_absmax(const unsigned char* w, tt_u64 n, int code) {
    double m = 0.0;
    for (tt_u64 i = 0; i < n; i++) {
        double v = tt_load(w, i, code);
        if (tt_finite(v) && tt_abs(v) > m) {
            m = tt_abs(v);
        }
    }
    return m;
}

tt_u64 tt_host_first_mismatch(const unsigned char* w, const unsigned char* g, tt_u64 n,
                              int code, double atol) {
    for (tt_u64 i = 0; i < n; i++) {
        if (!tt_same(tt_load(w, i, code), tt_load(g, i, code), atol)) {
            return i;
        }
    }
    return ~0ULL;
}

#endif
