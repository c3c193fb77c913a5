//! Host types of the two 8-bit float dtypes, [`f8e4m3`] and [`f8e5m2`]: what a
//! `Tensor<f8e4m3>` holds, in the spirit of `half::f16`.
//!
//! They are storage types: no arithmetic, only conversions (exact, rounding as
//! CUDA's `__nv_fp8_e4m3(float)` does, see [`tile_abi::f8`]), float comparisons,
//! negation and formatting. Widen to `f32` to compute.

use core::cmp::Ordering;
use core::fmt;
use tile_abi::f8 as cvt;

macro_rules! f8_type {
    (
        $(#[$doc:meta])*
        $name:ident, $from64:ident, $to64:ident, $from32:ident, $to32:ident,
        max = $max:literal, min_normal = $min_normal:literal, min_sub = $min_sub:literal,
        max_sub = $max_sub:literal, epsilon = $eps:literal, nan = $nan:literal
    ) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Default)]
        pub struct $name(u8);

        impl $name {
            /// +0.
            pub const ZERO: Self = Self(0x00);
            /// −0.
            pub const NEG_ZERO: Self = Self(0x80);
            /// 1.
            pub const ONE: Self = Self::from_f64(1.0);
            /// −1.
            pub const NEG_ONE: Self = Self::from_f64(-1.0);
            #[doc = concat!("The largest finite value, ", stringify!($max), "; conversions saturate to it.")]
            pub const MAX: Self = Self::from_f64($max);
            #[doc = concat!("The smallest finite value, −", stringify!($max), ".")]
            pub const MIN: Self = Self::from_f64(-$max);
            #[doc = concat!("The smallest positive normal value, ", stringify!($min_normal), ".")]
            pub const MIN_POSITIVE: Self = Self::from_f64($min_normal);
            #[doc = concat!("The smallest positive value, ", stringify!($min_sub), ".")]
            pub const MIN_POSITIVE_SUBNORMAL: Self = Self::from_f64($min_sub);
            #[doc = concat!("The largest subnormal value, ", stringify!($max_sub), ".")]
            pub const MAX_SUBNORMAL: Self = Self::from_f64($max_sub);
            #[doc = concat!("The gap between 1 and the next value, ", stringify!($eps), ".")]
            pub const EPSILON: Self = Self::from_f64($eps);
            /// The NaN that converting a quiet NaN gives (as CUDA converts).
            pub const NAN: Self = Self($nan);

            /// The value with these bits.
            pub const fn from_bits(bits: u8) -> Self {
                Self(bits)
            }

            /// The bits of this value.
            pub const fn to_bits(self) -> u8 {
                self.0
            }

            /// Rounds to nearest even; overflow and infinities saturate to
            /// [`MAX`](Self::MAX)/[`MIN`](Self::MIN), as CUDA's satfinite conversion.
            pub const fn from_f32(v: f32) -> Self {
                Self(cvt::$from32(v))
            }

            /// Rounds to nearest even (once, from the exact value); overflow and
            /// infinities saturate, as CUDA's satfinite conversion.
            pub const fn from_f64(v: f64) -> Self {
                Self(cvt::$from64(v))
            }

            /// The exact value.
            pub const fn to_f32(self) -> f32 {
                cvt::$to32(self.0)
            }

            /// The exact value.
            pub const fn to_f64(self) -> f64 {
                cvt::$to64(self.0)
            }

            /// Whether the value is a NaN.
            pub const fn is_nan(self) -> bool {
                self.to_f64().is_nan()
            }

            /// Whether the value is ±infinity (never for `f8e4m3`, which has none).
            pub const fn is_infinite(self) -> bool {
                self.to_f64().is_infinite()
            }

            /// Whether the value is neither infinite nor NaN.
            pub const fn is_finite(self) -> bool {
                self.to_f64().is_finite()
            }

            /// True for values with the sign bit set (−0 and negative NaNs too).
            pub const fn is_sign_negative(self) -> bool {
                self.0 & 0x80 != 0
            }

            /// True for values with the sign bit clear (+0 and positive NaNs too).
            pub const fn is_sign_positive(self) -> bool {
                !self.is_sign_negative()
            }
        }

        impl From<$name> for f32 {
            fn from(v: $name) -> f32 {
                v.to_f32()
            }
        }

        impl From<$name> for f64 {
            fn from(v: $name) -> f64 {
                v.to_f64()
            }
        }

        // Every value is exactly an f32, so f32's comparisons are the float
        // semantics wanted: NaN unequal to everything, +0 == −0.
        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.to_f32() == other.to_f32()
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                self.to_f32().partial_cmp(&other.to_f32())
            }
        }

        impl core::ops::Neg for $name {
            type Output = Self;
            /// Flips the sign bit (exact, NaNs included).
            fn neg(self) -> Self {
                Self(self.0 ^ 0x80)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.to_f32(), f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f32(), f)
            }
        }

        impl fmt::LowerExp for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerExp::fmt(&self.to_f32(), f)
            }
        }

        // SAFETY: one byte of plain data (`repr(transparent)` over `u8`), the
        // layout of CUDA's `__nv_fp8_*` storage; passed by value as that byte.
        unsafe impl cudarc::driver::DeviceRepr for $name {}
        // SAFETY: the all-zero byte is +0.
        unsafe impl cudarc::driver::ValidAsZeroBits for $name {}
    };
}

f8_type! {
    /// An 8-bit float with 4 exponent bits (bias 7) and 3 mantissa bits, CUDA's
    /// `__nv_fp8_e4m3` (`float8_e4m3fn` elsewhere): no infinities, NaN is
    /// `0x7F`/`0xFF`, range ±448, subnormals down to 2⁻⁹.
    f8e4m3, e4m3_from_f64, e4m3_to_f64, e4m3_from_f32, e4m3_to_f32,
    max = 448.0, min_normal = 0.015625, min_sub = 0.001953125,
    max_sub = 0.013671875, epsilon = 0.125, nan = 0x7F
}

f8_type! {
    /// An 8-bit float with 5 exponent bits (bias 15) and 2 mantissa bits, CUDA's
    /// `__nv_fp8_e5m2`: IEEE binary16 cut to its top byte (infinities `0x7C`/`0xFC`,
    /// NaNs above), finite range ±57344, subnormals down to 2⁻¹⁶.
    f8e5m2, e5m2_from_f64, e5m2_to_f64, e5m2_from_f32, e5m2_to_f32,
    max = 57344.0, min_normal = 0.00006103515625, min_sub = 0.0000152587890625,
    max_sub = 0.0000457763671875, epsilon = 0.25, nan = 0x7E
}

impl f8e5m2 {
    /// +∞ (only a bit pattern: conversions saturate instead of producing it).
    pub const INFINITY: Self = Self(0x7C);
    /// −∞.
    pub const NEG_INFINITY: Self = Self(0xFC);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants() {
        assert_eq!(f8e4m3::ONE.to_bits(), 0x38);
        assert_eq!(f8e4m3::NEG_ONE.to_bits(), 0xB8);
        assert_eq!(f8e4m3::MAX.to_bits(), 0x7E);
        assert_eq!(f8e4m3::MIN.to_bits(), 0xFE);
        assert_eq!(f8e4m3::MIN_POSITIVE.to_bits(), 0x08);
        assert_eq!(f8e4m3::MIN_POSITIVE_SUBNORMAL.to_bits(), 0x01);
        assert_eq!(f8e4m3::MAX_SUBNORMAL.to_bits(), 0x07);
        assert_eq!(f8e4m3::EPSILON.to_f64(), 1.125 - 1.0);
        assert!(f8e4m3::NAN.is_nan());
        assert_eq!(f8e4m3::from_f32(f32::NAN).to_bits(), f8e4m3::NAN.to_bits());

        assert_eq!(f8e5m2::ONE.to_bits(), 0x3C);
        assert_eq!(f8e5m2::MAX.to_bits(), 0x7B);
        assert_eq!(f8e5m2::MIN.to_bits(), 0xFB);
        assert_eq!(f8e5m2::MIN_POSITIVE.to_bits(), 0x04);
        assert_eq!(f8e5m2::MIN_POSITIVE_SUBNORMAL.to_bits(), 0x01);
        assert_eq!(f8e5m2::MAX_SUBNORMAL.to_bits(), 0x03);
        assert_eq!(f8e5m2::EPSILON.to_f64(), 1.25 - 1.0);
        assert_eq!(f8e5m2::from_f64(f64::NAN).to_bits(), f8e5m2::NAN.to_bits());
        assert!(f8e5m2::INFINITY.is_infinite() && f8e5m2::NEG_INFINITY.is_sign_negative());
        assert_eq!(f8e5m2::default().to_bits(), 0);
    }

    #[test]
    fn float_comparisons() {
        assert_eq!(f8e4m3::ZERO, f8e4m3::NEG_ZERO);
        assert_ne!(f8e4m3::NAN, f8e4m3::NAN);
        assert!(f8e4m3::NAN.partial_cmp(&f8e4m3::ONE).is_none());
        assert!(f8e4m3::NEG_ONE < f8e4m3::ZERO && f8e4m3::ZERO < f8e4m3::ONE);
        assert!(f8e4m3::MIN < f8e4m3::NEG_ONE && f8e4m3::ONE < f8e4m3::MAX);
        assert!(f8e5m2::MAX < f8e5m2::INFINITY && f8e5m2::NEG_INFINITY < f8e5m2::MIN);
        assert_eq!(-f8e4m3::ONE, f8e4m3::NEG_ONE);
        assert_eq!((-f8e5m2::ZERO).to_bits(), 0x80);
    }

    #[test]
    fn conversions_and_formatting() {
        assert_eq!(f8e4m3::from_f32(1000.0), f8e4m3::MAX);
        assert_eq!(f8e5m2::from_f64(f64::NEG_INFINITY), f8e5m2::MIN);
        assert_eq!(f32::from(f8e4m3::from_f32(0.3)), 0.3125);
        assert_eq!(f64::from(f8e5m2::from_f32(0.3)), 0.3125);
        assert_eq!(format!("{}", f8e4m3::from_f64(-2.5)), "-2.5");
        assert_eq!(format!("{:?}", f8e5m2::MAX), "57344.0");
        assert_eq!(format!("{:e}", f8e4m3::MAX), "4.48e2");
    }

    #[test]
    fn host_tensors_round_trip() -> crate::Result<()> {
        use crate::{Device, Tensor};
        let a: Vec<f8e4m3> = (0..=255).map(f8e4m3::from_bits).collect();
        let t = Tensor::from_slice(&a, &[16, 16], Device::Cpu)?;
        let bits: Vec<u8> = t.to_vec()?.iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits, (0..=255).collect::<Vec<u8>>());
        let b = crate::testing::random_tensor::<f8e5m2>(&[64], 3, Device::Cpu)?.to_vec()?;
        assert!(b.iter().all(|v| (-2.0..=2.0).contains(&v.to_f32())));
        assert!(b.iter().any(|v| v.to_f32() < -1.0) && b.iter().any(|v| v.to_f32() > 1.0));
        let z = Tensor::<f8e4m3>::zeros(&[3], Device::Cpu)?.to_vec()?;
        assert!(z.iter().all(|v| v.to_bits() == 0));
        Ok(())
    }
}
