//! Element and scalar types. Each is distinct: there is no silent relaxation
//! between f8 variants or between integer and float types.

use core::fmt;

/// An element or scalar type, as the compiler types kernels and the runtime
/// checks tensors. The host types that carry each dtype are the runtime's
/// business (its `Element` trait); this is only the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// `bool`, one byte (0 or 1).
    Bool,
    /// `i8`.
    I8,
    /// `u8`.
    U8,
    /// `i16`.
    I16,
    /// `u16`.
    U16,
    /// `i32`.
    I32,
    /// `u32`.
    U32,
    /// `i64`.
    I64,
    /// `u64`.
    U64,
    /// IEEE binary16 (`half::f16`, CUDA's `__half`).
    F16,
    /// bfloat16 (`half::bf16`, CUDA's `__nv_bfloat16`).
    BF16,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// 8-bit float, 4 exponent and 3 mantissa bits (CUDA's `__nv_fp8_e4m3`).
    F8E4M3,
    /// 8-bit float, 5 exponent and 2 mantissa bits (CUDA's `__nv_fp8_e5m2`).
    F8E5M2,
    /// Two f16 in one 32-bit register (CUDA's `__half2`): a kernel's value
    /// type for packed arithmetic, never a tensor's element type.
    F16x2,
    /// Two bf16 in one 32-bit register (CUDA's `__nv_bfloat162`), likewise.
    BF16x2,
}

impl DType {
    /// Every element dtype (what a tensor may hold), in declaration order;
    /// the packed pairs are [`PACKED`](Self::PACKED).
    pub const ALL: [DType; 15] = [
        DType::Bool,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::F8E4M3,
        DType::F8E5M2,
    ];

    /// The packed pairs, values of kernels only.
    pub const PACKED: [DType; 2] = [DType::F16x2, DType::BF16x2];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 | DType::F8E4M3 | DType::F8E5M2 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 | DType::F16x2 | DType::BF16x2 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// [`size`](Self::size) as the compiler's integer type.
    pub const fn bytes(self) -> i64 {
        self.size() as i64
    }

    /// True for the floating-point dtypes (f8 variants included).
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 | DType::F8E4M3 | DType::F8E5M2
        )
    }

    /// True for the 8-bit float formats (storage types: no arithmetic of their own).
    pub const fn is_f8(self) -> bool {
        matches!(self, DType::F8E4M3 | DType::F8E5M2)
    }

    /// True for the packed pairs (`f16x2`, `bf16x2`): neither float nor int.
    pub const fn is_packed(self) -> bool {
        matches!(self, DType::F16x2 | DType::BF16x2)
    }

    /// The dtype of each half of a packed pair (`f16` for `f16x2`); `self`
    /// for the others.
    pub const fn lane(self) -> DType {
        match self {
            DType::F16x2 => DType::F16,
            DType::BF16x2 => DType::BF16,
            d => d,
        }
    }

    /// The packed pair of `f16` or `bf16`.
    pub const fn pair(self) -> Option<DType> {
        match self {
            DType::F16 => Some(DType::F16x2),
            DType::BF16 => Some(DType::BF16x2),
            _ => None,
        }
    }

    /// True for the integer dtypes (`bool` is not one).
    pub const fn is_int(self) -> bool {
        matches!(
            self,
            DType::I8
                | DType::U8
                | DType::I16
                | DType::U16
                | DType::I32
                | DType::U32
                | DType::I64
                | DType::U64
        )
    }

    /// True for the signed integer dtypes.
    pub const fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// True for the dtypes with a sign: signed integers and every float.
    pub const fn is_signed(self) -> bool {
        self.is_signed_int() || self.is_float()
    }

    /// The Rust spelling used in kernel signatures (`f16`, `bf16`, ...).
    pub const fn rust_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
            DType::F16x2 => "f16x2",
            DType::BF16x2 => "bf16x2",
        }
    }

    /// The dtype spelled `s` in a kernel signature ([`rust_name`](Self::rust_name)).
    pub fn from_rust_name(s: &str) -> Option<DType> {
        DType::ALL
            .into_iter()
            .chain(DType::PACKED)
            .find(|d| d.rust_name() == s)
    }

    /// TileLang / DLPack spelling, used in the IR script and in messages.
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::I16 => "int16",
            DType::U16 => "uint16",
            DType::I32 => "int32",
            DType::U32 => "uint32",
            DType::I64 => "int64",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F8E4M3 => "float8_e4m3",
            DType::F8E5M2 => "float8_e5m2",
            DType::F16x2 => "float16x2",
            DType::BF16x2 => "bfloat16x2",
        }
    }

    /// The variant's name (`F16`, `BF16`, ...): how generated code names it as a path,
    /// `DType::F16`.
    pub fn variant_name(self) -> String {
        format!("{self:?}")
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_rust_name(d.rust_name()), Some(d));
            assert_eq!(d.bytes(), d.size() as i64);
            assert!(!(d.is_int() && d.is_float()));
        }
        for d in DType::PACKED {
            assert_eq!(DType::from_rust_name(d.rust_name()), Some(d));
            assert!(d.is_packed() && !d.is_float() && !d.is_int());
            assert_eq!(d.lane().pair(), Some(d));
        }
        assert_eq!(DType::from_rust_name("f128"), None);
        assert_eq!(DType::BF16.to_string(), "bfloat16");
        assert_eq!(DType::F8E4M3.variant_name(), "F8E4M3");
        assert!(DType::F32.is_signed() && !DType::F32.is_signed_int());
        assert!(!DType::Bool.is_int() && !DType::U8.is_signed());
    }
}
