//! Element types: the dtype table is the kernel ABI's ([`tile_abi::DType`]); what this
//! module adds is the host side, which Rust type carries each dtype ([`Element`]).

pub use tile_abi::DType;

/// A Rust type that can be the element of a [`Tensor`](crate::Tensor).
///
/// # Safety
///
/// Implementors promise that `Self` is plain data laid out exactly as [`Element::DTYPE`]
/// is in the generated C and CUDA code: `size_of::<Self>() == DTYPE.size()`, alignment at
/// most its size, no padding, no pointers, and the all-zero byte pattern is a valid value.
/// Tensors move elements as raw bytes (between host and device, through kernels), so a
/// kernel that writes an element must write a valid value (`0` or `1` for `bool`).
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The dtype this type carries.
    const DTYPE: DType;

    /// Widening conversion used by test helpers (`bool` is 0 or 1).
    fn to_f64(self) -> f64;

    /// Narrowing conversion used by test helpers: floats round to nearest, integers
    /// truncate toward zero and saturate at the type's bounds, `bool` is `v != 0`.
    fn from_f64(v: f64) -> Self;
}

macro_rules! element_prim {
    ($($ty:ty => $dtype:ident),* $(,)?) => {$(
        // SAFETY: a primitive with the size and layout of the C type of this dtype;
        // all-zero bytes are zero.
        unsafe impl Element for $ty {
            const DTYPE: DType = DType::$dtype;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $ty
            }
        }
    )*};
}

element_prim! {
    i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32,
    i64 => I64, u64 => U64, f32 => F32, f64 => F64,
}

// SAFETY: `bool` is one byte, like C `bool`/`uint8_t`; all-zero bytes are `false`.
unsafe impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        if self {
            1.0
        } else {
            0.0
        }
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
}

// SAFETY: `half::f16` is `repr(transparent)` over `u16` holding IEEE binary16 bits, the
// layout of CUDA `__half`; all-zero bytes are +0.0.
unsafe impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
    fn to_f64(self) -> f64 {
        half::f16::to_f64(self)
    }
    fn from_f64(v: f64) -> Self {
        half::f16::from_f64(v)
    }
}

// SAFETY: `half::bf16` is `repr(transparent)` over `u16` holding bfloat16 bits, the
// layout of CUDA `__nv_bfloat16`; all-zero bytes are +0.0.
unsafe impl Element for half::bf16 {
    const DTYPE: DType = DType::BF16;
    fn to_f64(self) -> f64 {
        half::bf16::to_f64(self)
    }
    fn from_f64(v: f64) -> Self {
        half::bf16::from_f64(v)
    }
}

macro_rules! element_f8 {
    ($($ty:ident => $dtype:ident),* $(,)?) => {$(
        // SAFETY: `repr(transparent)` over `u8` holding the format's bits, the layout of
        // CUDA's `__nv_fp8_*` storage; the all-zero byte is +0.
        unsafe impl Element for crate::f8::$ty {
            const DTYPE: DType = DType::$dtype;
            fn to_f64(self) -> f64 {
                crate::f8::$ty::to_f64(self)
            }
            fn from_f64(v: f64) -> Self {
                crate::f8::$ty::from_f64(v)
            }
        }
    )*};
}

element_f8! { f8e4m3 => F8E4M3, f8e5m2 => F8E5M2 }

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T: Element>() {
        assert_eq!(core::mem::size_of::<T>(), T::DTYPE.size(), "{}", T::DTYPE);
        assert!(core::mem::align_of::<T>() <= T::DTYPE.size());
    }

    #[test]
    fn element_sizes_match_dtypes() {
        check::<bool>();
        check::<i8>();
        check::<u8>();
        check::<i16>();
        check::<u16>();
        check::<i32>();
        check::<u32>();
        check::<i64>();
        check::<u64>();
        check::<half::f16>();
        check::<half::bf16>();
        check::<f32>();
        check::<f64>();
        check::<crate::f8e4m3>();
        check::<crate::f8e5m2>();
    }

    #[test]
    fn conversions() {
        assert_eq!(i8::from_f64(1000.0), i8::MAX);
        assert_eq!(u8::from_f64(-3.0), 0);
        assert_eq!(i32::from_f64(-2.7), -2);
        assert!(bool::from_f64(2.0));
        assert_eq!(half::f16::from_f64(1.5).to_f64(), 1.5);
        assert_eq!(half::bf16::from_f64(-2.0).to_f64(), -2.0);
        assert_eq!(DType::BF16.to_string(), "bfloat16");
        // f8 rounds to nearest even and saturates, as the device converts.
        assert_eq!(crate::f8e4m3::from_f64(1.0625).to_f64(), 1.0);
        assert_eq!(crate::f8e4m3::from_f64(1e9).to_f64(), 448.0);
        assert_eq!(
            <crate::f8e5m2 as Element>::from_f64(-1e9).to_f64(),
            -57344.0
        );
    }
}
