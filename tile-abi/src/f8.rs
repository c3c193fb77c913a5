//! Exact conversions between `f64`/`f32` and the two 8-bit float formats,
//! [`DType::F8E4M3`](crate::DType::F8E4M3) and [`DType::F8E5M2`](crate::DType::F8E5M2),
//! as bit patterns (`u8`).
//!
//! Encoding matches CUDA's `__nv_cvt_double_to_fp8(x, __NV_SATFINITE, ..)` bit
//! for bit (the conversion the `__nv_fp8_e4m3`/`__nv_fp8_e5m2` constructors use),
//! so that data prepared on the host equals data a kernel converts on the device:
//!
//! - one rounding, to nearest with ties to even, from the exact input value;
//! - finite overflow *and* infinities saturate to the largest finite value of the
//!   sign (e4m3: 448 = `0x7E`, e5m2: 57344 = `0x7B`);
//! - magnitudes up to half the smallest subnormal become a zero of the sign;
//! - NaN becomes `0x7F` (e4m3) or `0x7E | top two f64 mantissa bits` (e5m2),
//!   with the input's sign bit.
//!
//! Decoding: e4m3 (bias 7) has subnormals and no infinities, `0x7F`/`0xFF` are
//! its NaNs; e5m2 (bias 15) is laid out like IEEE binary16 cut to 8 bits:
//! `0x7C` is infinity, `0x7D..=0x7F` are NaNs. NaNs decode to a positive quiet
//! NaN, as CUDA's fp8 → half conversion does.
//!
//! Everything is integer arithmetic on the bit patterns (no float rounding can
//! creep in) and `const`, so host types can define their constants with it.

/// The parameters that tell the two formats apart.
struct Format {
    /// Stored mantissa bits.
    man: u32,
    /// Exponent bias.
    bias: i32,
    /// Code of the largest finite magnitude (saturation target).
    max: u8,
    /// e5m2 keeps IEEE infinities and NaNs; e4m3 spends only `0x7F` on NaN.
    ieee: bool,
}

const E4M3: Format = Format {
    man: 3,
    bias: 7,
    max: 0x7E,
    ieee: false,
};
const E5M2: Format = Format {
    man: 2,
    bias: 15,
    max: 0x7B,
    ieee: true,
};

const F64_SIGN: u64 = 1 << 63;
const F64_INF: u64 = 0x7FF0_0000_0000_0000;
const F64_FRAC: u64 = (1 << 52) - 1;

/// `x / 2^s` rounded to nearest, ties to even. `x < 2^53`, so a shift past 53
/// leaves less than a half and rounds to 0.
const fn shr_round_even(x: u64, s: u32) -> u64 {
    if s == 0 {
        return x;
    }
    if s > 54 {
        return 0;
    }
    let q = x >> s;
    let rem = x & ((1u64 << s) - 1);
    let half = 1u64 << (s - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

const fn encode(v: f64, f: &Format) -> u8 {
    let bits = v.to_bits();
    let sign = ((bits >> 63) as u8) << 7;
    let abs = bits & !F64_SIGN;
    if abs > F64_INF {
        let nan = if f.ieee {
            // CUDA keeps the f64 NaN's top two payload bits (always a NaN code).
            0x7E | ((bits >> 50) & 3) as u8
        } else {
            0x7F
        };
        return nan | sign;
    }
    if abs == F64_INF {
        return f.max | sign;
    }
    // abs = sig * 2^(e - 52), for f64 subnormals too (their e is that of the
    // smallest normal and sig lacks the implicit bit).
    let biased = (abs >> 52) as i32;
    let (sig, e) = if biased == 0 {
        (abs & F64_FRAC, -1022)
    } else {
        ((abs & F64_FRAC) | (1 << 52), biased - 1023)
    };
    // The quantum (one ulp) of the fp8 binade holding abs: subnormals and the
    // first normal binade share the smallest one.
    let emin = 1 - f.bias;
    let qmin = emin - f.man as i32;
    let q = if e > emin { e } else { emin } - f.man as i32;
    // sig * 2^(e-52) / 2^q, rounded once; shift >= 52 - man > 0.
    let n = shr_round_even(sig, (q - (e - 52)) as u32);
    // Codes are monotonic in magnitude and contiguous across binades: the
    // exponent field counts quanta above qmin, and a mantissa that rounds up
    // to 2^(man+1) carries into the exponent by plain addition.
    let code = (((q - qmin) as u64) << f.man) + n;
    let code = if code > f.max as u64 {
        f.max
    } else {
        code as u8
    };
    code | sign
}

const fn decode(bits: u8, f: &Format) -> f64 {
    let mag = bits & 0x7F;
    let exp = (mag >> f.man) as i32;
    let mant = (mag & ((1 << f.man) - 1)) as u64;
    let all_ones: i32 = 0x7F >> f.man;
    let v = if f.ieee && exp == all_ones {
        if mant == 0 {
            f64::INFINITY
        } else {
            return f64::NAN;
        }
    } else if !f.ieee && mag == 0x7F {
        return f64::NAN;
    } else if exp == 0 {
        mant as f64 * pow2(1 - f.bias - f.man as i32)
    } else {
        (mant | (1 << f.man)) as f64 * pow2(exp - f.bias - f.man as i32)
    };
    if bits & 0x80 != 0 {
        -v
    } else {
        v
    }
}

/// 2^k for k in f64's normal exponent range (fp8 needs only -17..=15).
const fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// Converts to f8e4m3 bits: round to nearest even, saturating at ±448.
pub const fn e4m3_from_f64(v: f64) -> u8 {
    encode(v, &E4M3)
}

/// The value of f8e4m3 bits (exact; `0x7F`/`0xFF` are NaN).
pub const fn e4m3_to_f64(bits: u8) -> f64 {
    decode(bits, &E4M3)
}

/// Converts to f8e5m2 bits: round to nearest even, saturating at ±57344.
pub const fn e5m2_from_f64(v: f64) -> u8 {
    encode(v, &E5M2)
}

/// The value of f8e5m2 bits (exact; `0x7C` is infinity, `0x7D..=0x7F` NaN).
pub const fn e5m2_to_f64(bits: u8) -> f64 {
    decode(bits, &E5M2)
}

/// [`e4m3_from_f64`] of an f32 (widening is exact). A NaN becomes `0x7F`
/// whatever its sign, as `__nv_cvt_float_to_fp8` canonicalizes NaNs first.
pub const fn e4m3_from_f32(v: f32) -> u8 {
    if v.is_nan() {
        return 0x7F;
    }
    e4m3_from_f64(v as f64)
}

/// The value of f8e4m3 bits as f32 (exact: every f8 value is an f32).
pub const fn e4m3_to_f32(bits: u8) -> f32 {
    e4m3_to_f64(bits) as f32
}

/// [`e5m2_from_f64`] of an f32 (widening is exact). A NaN becomes `0x7F`
/// whatever its sign and payload, as `__nv_cvt_float_to_fp8` canonicalizes
/// NaNs first.
pub const fn e5m2_from_f32(v: f32) -> u8 {
    if v.is_nan() {
        return 0x7F;
    }
    e5m2_from_f64(v as f64)
}

/// The value of f8e5m2 bits as f32 (exact: every f8 value is an f32).
pub const fn e5m2_to_f32(bits: u8) -> f32 {
    e5m2_to_f64(bits) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3_known_values() {
        assert_eq!(e4m3_to_f64(0x7E), 448.0);
        assert_eq!(e4m3_to_f64(0xFE), -448.0);
        assert_eq!(e4m3_to_f64(0x01), 2f64.powi(-9));
        assert_eq!(e4m3_to_f64(0x07), 7.0 * 2f64.powi(-9));
        assert_eq!(e4m3_to_f64(0x08), 2f64.powi(-6));
        assert_eq!(e4m3_to_f64(0x38), 1.0);
        assert_eq!(e4m3_to_f64(0x39), 1.125);
        assert!(e4m3_to_f64(0x7F).is_nan());
        assert!(e4m3_to_f64(0xFF).is_nan());
        assert_eq!(e4m3_to_f64(0x00).to_bits(), 0.0f64.to_bits());
        assert_eq!(e4m3_to_f64(0x80).to_bits(), (-0.0f64).to_bits());

        assert_eq!(e4m3_from_f64(1.0), 0x38);
        assert_eq!(e4m3_from_f64(-1.0), 0xB8);
        assert_eq!(e4m3_from_f64(448.0), 0x7E);
        assert_eq!(e4m3_from_f64(2f64.powi(-9)), 0x01);
        assert_eq!(e4m3_from_f64(0.0), 0x00);
        assert_eq!(e4m3_from_f64(-0.0), 0x80);
    }

    #[test]
    fn e5m2_known_values() {
        assert_eq!(e5m2_to_f64(0x7B), 57344.0);
        assert_eq!(e5m2_to_f64(0x01), 2f64.powi(-16));
        assert_eq!(e5m2_to_f64(0x04), 2f64.powi(-14));
        assert_eq!(e5m2_to_f64(0x3C), 1.0);
        assert_eq!(e5m2_to_f64(0x7C), f64::INFINITY);
        assert_eq!(e5m2_to_f64(0xFC), f64::NEG_INFINITY);
        for b in [0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF] {
            assert!(e5m2_to_f64(b).is_nan());
        }
        assert_eq!(e5m2_from_f64(1.0), 0x3C);
        assert_eq!(e5m2_from_f64(57344.0), 0x7B);
        assert_eq!(e5m2_from_f64(2f64.powi(-16)), 0x01);
        assert_eq!(e5m2_from_f64(-0.0), 0x80);
    }

    #[test]
    fn ties_go_to_even() {
        // 1.0625 is halfway between 1.0 (0x38, even) and 1.125 (0x39).
        assert_eq!(e4m3_from_f64(1.0625), 0x38);
        // 1.1875 is halfway between 1.125 (odd) and 1.25 (0x3A, even).
        assert_eq!(e4m3_from_f64(1.1875), 0x3A);
        assert_eq!(e4m3_from_f64(1.0625 + 1e-12), 0x39);
        // Subnormal ties: 1.5 and 2.5 minimal subnormals.
        let s = 2f64.powi(-9);
        assert_eq!(e4m3_from_f64(1.5 * s), 0x02);
        assert_eq!(e4m3_from_f64(2.5 * s), 0x02);
        // e5m2: 1.125 is between 1.0 (0x3C) and 1.25 (0x3D).
        assert_eq!(e5m2_from_f64(1.125), 0x3C);
        assert_eq!(e5m2_from_f64(1.375), 0x3E);
        // The largest subnormal rounding up into the smallest normal.
        assert_eq!(e4m3_from_f64(7.5 * s), 0x08);
        assert_eq!(e4m3_from_f64(7.4 * s), 0x07);
    }

    #[test]
    fn underflow_to_signed_zero() {
        let s = 2f64.powi(-9);
        assert_eq!(e4m3_from_f64(0.5 * s), 0x00);
        assert_eq!(e4m3_from_f64(-0.5 * s), 0x80);
        assert_eq!(e4m3_from_f64(0.5 * s * (1.0 + f64::EPSILON)), 0x01);
        assert_eq!(e4m3_from_f64(f64::MIN_POSITIVE), 0x00);
        assert_eq!(e4m3_from_f64(-f64::from_bits(1)), 0x80);
        let s = 2f64.powi(-16);
        assert_eq!(e5m2_from_f64(0.5 * s), 0x00);
        assert_eq!(e5m2_from_f64(-0.5 * s), 0x80);
        assert_eq!(e5m2_from_f64(0.5 * s * (1.0 + f64::EPSILON)), 0x01);
    }

    #[test]
    fn saturation() {
        // Below the midpoint to the next (nonexistent) step rounds down, at
        // and above saturates: either way the maximum finite value.
        for v in [449.0, 463.9, 464.0, 464.1, 1e6, f64::MAX, f64::INFINITY] {
            assert_eq!(e4m3_from_f64(v), 0x7E, "{v}");
            assert_eq!(e4m3_from_f64(-v), 0xFE, "{v}");
        }
        for v in [57345.0, 61439.0, 61440.0, 1e9, f64::MAX, f64::INFINITY] {
            assert_eq!(e5m2_from_f64(v), 0x7B, "{v}");
            assert_eq!(e5m2_from_f64(-v), 0xFB, "{v}");
        }
        assert_eq!(e4m3_from_f32(f32::INFINITY), 0x7E);
        assert_eq!(e5m2_from_f32(f32::NEG_INFINITY), 0xFB);
    }

    #[test]
    fn nan_codes() {
        assert_eq!(e4m3_from_f64(f64::NAN), 0x7F);
        assert_eq!(e4m3_from_f64(-f64::NAN), 0xFF);
        assert_eq!(e5m2_from_f64(f64::NAN), 0x7E);
        assert_eq!(e5m2_from_f64(-f64::NAN), 0xFE);
        assert_eq!(e5m2_from_f64(f64::from_bits(0x7FFC_0000_0000_0000)), 0x7F);
        assert_eq!(e5m2_from_f64(f64::from_bits(0x7FF0_0000_0000_0001)), 0x7E);
        assert_eq!(e4m3_from_f32(-f32::NAN), 0x7F);
        assert_eq!(e5m2_from_f32(-f32::NAN), 0x7F);
    }

    type Fns = (
        fn(u8) -> f64,
        fn(f64) -> u8,
        fn(u8) -> f32,
        fn(f32) -> u8,
        u8,
    );
    const FORMATS: [Fns; 2] = [
        (e4m3_to_f64, e4m3_from_f64, e4m3_to_f32, e4m3_from_f32, 0x7E),
        (e5m2_to_f64, e5m2_from_f64, e5m2_to_f32, e5m2_from_f32, 0x7B),
    ];

    #[test]
    fn every_code_round_trips() {
        for (to, from, to32, from32, max) in FORMATS {
            for b in 0..=255u8 {
                let v = to(b);
                assert_eq!(to32(b).to_bits(), (v as f32).to_bits());
                if v.is_nan() {
                    continue;
                }
                // e5m2's infinities saturate; every finite code is exact.
                let want = if v.is_infinite() { max | (b & 0x80) } else { b };
                assert_eq!(from(v), want, "code {b:#04x} = {v}");
                assert_eq!(from32(v as f32), want, "code {b:#04x} = {v}");
            }
        }
    }

    #[test]
    fn values_are_monotonic_in_codes() {
        // Positive codes increase in value: encoding rounds between neighbours.
        for (to, _, _, _, max) in FORMATS {
            for b in 0..max {
                assert!(to(b) < to(b + 1), "{b:#04x}");
            }
        }
    }
}
