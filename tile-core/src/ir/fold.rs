//! Constant folding, with the semantics the generated code has at run time.
//!
//! A folded constant must be the value the same expression computes on the
//! device (the generated C and CUDA C++ agree on everything folded here), so
//! folding never changes what a program does:
//!
//! - Integers follow C: types narrower than 32 bits are promoted to `int`
//!   before arithmetic, so an `Expr::Int(v, u8)` holds the promoted value (it
//!   may lie outside `u8`: `200u8 + 100u8` is 300, and only a store or a cast
//!   wraps it); `u32` and `u64` arithmetic wraps; signed overflow of `int` or
//!   `long long` and division by zero are undefined and never folded (the
//!   frontend reports them when both operands are constants).
//! - A cast to an integer type wraps (two's complement); from a float it
//!   truncates and saturates, NaN giving 0 (Rust's `as`; both backends
//!   generate that conversion).
//! - Floats: `f32` arithmetic is done in `f32`, `f64` in `f64`; `f16` and
//!   `bf16` arithmetic is not folded (the CPU computes it in `float` and
//!   rounds at stores, CUDA in half precision). A cast to `f16`/`bf16` rounds
//!   through `float`, as the generated code does. `f8` values compute in
//!   `f32` (the frontend converts them); a cast to `f8` rounds to nearest even
//!   from the value once and saturates to the largest finite value (CUDA's
//!   `satfinite` conversion). An `Expr::Float(v, t)` holds
//!   a value of `t`, except an unsuffixed literal (typed `f32`), which keeps
//!   its decimal value until an operation or a cast gives it a type.

use super::{BinOp, DType, Expr};

/// The C type an integer dtype computes in (after the integer promotions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CInt {
    Int,
    UInt,
    LongLong,
    ULongLong,
}

fn promoted(t: DType) -> CInt {
    match t {
        DType::U32 => CInt::UInt,
        DType::I64 => CInt::LongLong,
        DType::U64 => CInt::ULongLong,
        _ => CInt::Int,
    }
}

/// The C type of `a op b` for operands of dtypes `a` and `b` (the usual
/// arithmetic conversions).
fn common(a: DType, b: DType) -> CInt {
    let (x, y) = (promoted(a), promoted(b));
    let wide = |c: CInt| matches!(c, CInt::LongLong | CInt::ULongLong);
    match (wide(x), wide(y)) {
        (true, false) => x,
        (false, true) => y,
        _ if x == CInt::UInt || x == CInt::ULongLong => x,
        _ => y,
    }
}

/// `v` as a value of C type `c`, or why not: `Err(true)` when C leaves it
/// undefined (signed overflow), `Err(false)` when it is defined but has no
/// `i64` representation (a `u64` above `i64::MAX`).
fn in_c(v: i128, c: CInt) -> Result<i64, bool> {
    match c {
        CInt::Int => i32::try_from(v).map(i64::from).map_err(|_| true),
        CInt::LongLong => i64::try_from(v).map_err(|_| true),
        CInt::UInt => Ok(v.rem_euclid(1 << 32) as i64),
        CInt::ULongLong => i64::try_from(v.rem_euclid(1 << 64)).map_err(|_| false),
    }
}

/// The value an integer constant has after conversion to `t` (wrapping, as C
/// converts); `None` for a `u64` above `i64::MAX`.
pub fn wrap_int(v: i64, t: DType) -> Option<i64> {
    Some(match t {
        DType::I8 => v as i8 as i64,
        DType::U8 => v as u8 as i64,
        DType::I16 => v as i16 as i64,
        DType::U16 => v as u16 as i64,
        DType::I32 => v as i32 as i64,
        DType::U32 => v as u32 as i64,
        DType::U64 if v < 0 => return None,
        _ => v,
    })
}

/// Why an integer operation on constants is not folded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoFold {
    /// C leaves it undefined: signed overflow, or division by zero.
    Undefined(&'static str),
    /// Defined, but the value is not representable here (a large `u64`), or
    /// the operator is not an integer operator.
    Unrepresentable,
}

/// A folded integer operation: an integer (of the operation's dtype) or the
/// result of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntValue {
    Int(i64),
    Bool(bool),
}

/// `x op y` on integer constants of dtypes `ta` and `tb` as the generated
/// code computes it.
pub fn int_op(op: BinOp, x: i64, ta: DType, y: i64, tb: DType) -> Result<IntValue, NoFold> {
    let c = common(ta, tb);
    // Unsigned operands hold their canonical value.
    let norm = |v: i64| match c {
        CInt::UInt => (v as i128).rem_euclid(1 << 32),
        CInt::ULongLong => (v as i128).rem_euclid(1 << 64),
        _ => v as i128,
    };
    let (x, y) = (norm(x), norm(y));
    let v = match op {
        BinOp::Lt => return Ok(IntValue::Bool(x < y)),
        BinOp::Le => return Ok(IntValue::Bool(x <= y)),
        BinOp::Gt => return Ok(IntValue::Bool(x > y)),
        BinOp::Ge => return Ok(IntValue::Bool(x >= y)),
        BinOp::Eq => return Ok(IntValue::Bool(x == y)),
        BinOp::Ne => return Ok(IntValue::Bool(x != y)),
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div | BinOp::Rem if y == 0 => return Err(NoFold::Undefined("division by zero")),
        BinOp::Div => x / y,
        BinOp::Rem => x % y,
        BinOp::Min => x.min(y),
        BinOp::Max => x.max(y),
        // Two's complement bits: exact on the (sign-extended or canonical
        // unsigned) values, as C computes them in the promoted type.
        BinOp::BitAnd => x & y,
        BinOp::BitOr => x | y,
        BinOp::BitXor => x ^ y,
        BinOp::Shl | BinOp::Shr => {
            let bits = match c {
                CInt::Int | CInt::UInt => 32,
                CInt::LongLong | CInt::ULongLong => 64,
            };
            if !(0..bits).contains(&y) {
                return Err(NoFold::Undefined("shift amount out of range"));
            }
            if op == BinOp::Shr {
                // Arithmetic for negative signed values (what gcc, clang and
                // nvcc do; C leaves it to the implementation).
                x >> y
            } else if x < 0 {
                return Err(NoFold::Undefined("left shift of a negative value"));
            } else {
                // Signed: overflow is undefined (`in_c` says so); unsigned wraps.
                x << y
            }
        }
        BinOp::And | BinOp::Or => return Err(NoFold::Unrepresentable),
    };
    match in_c(v, c) {
        Ok(v) => Ok(IntValue::Int(v)),
        Err(true) => Err(NoFold::Undefined("overflow")),
        Err(false) => Err(NoFold::Unrepresentable),
    }
}

/// `-x` on an integer constant of dtype `t`, as the generated code computes it.
pub fn int_neg(x: i64, t: DType) -> Result<i64, NoFold> {
    match int_op(BinOp::Sub, 0, t, x, t)? {
        IntValue::Int(v) => Ok(v),
        IntValue::Bool(_) => Err(NoFold::Unrepresentable),
    }
}

/// A float value rounded to `t` as the generated code rounds it: `f32` and
/// `f64` directly, `f16` and `bf16` through `float`.
pub fn round_float(v: f64, t: DType) -> f64 {
    match t {
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f32(v as f32).to_f64(),
        DType::BF16 => half::bf16::from_f32(v as f32).to_f64(),
        // Single rounding from the exact value: the backends convert f64
        // values with the double conversion and narrower ones exactly widened.
        DType::F8E4M3 => tile_abi::f8::e4m3_to_f64(tile_abi::f8::e4m3_from_f64(v)),
        DType::F8E5M2 => tile_abi::f8::e5m2_to_f64(tile_abi::f8::e5m2_from_f64(v)),
        _ => v,
    }
}

/// `x op y` on float constants of dtype `t`, where the generated code computes
/// it in `t` (`f32`, `f64`); `None` otherwise.
pub fn float_op(op: BinOp, x: f64, y: f64, t: DType) -> Option<f64> {
    let f = |a: f64, b: f64| match op {
        BinOp::Add => Some(a + b),
        BinOp::Sub => Some(a - b),
        BinOp::Mul => Some(a * b),
        BinOp::Div => Some(a / b),
        _ => None,
    };
    match t {
        DType::F64 => f(x, y),
        DType::F32 => {
            let (a, b) = (x as f32, y as f32);
            let v = match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                BinOp::Div => a / b,
                _ => return None,
            };
            Some(v as f64)
        }
        _ => None,
    }
}

/// A float converted to integer dtype `t` as Rust's `as` does (truncation
/// toward zero, saturation, NaN to 0), which the backends generate; `None`
/// for a `u64` above `i64::MAX`.
pub fn float_to_int(v: f64, t: DType) -> Option<i64> {
    if v.is_nan() {
        return Some(0);
    }
    Some(match t {
        DType::I8 => v as i8 as i64,
        DType::U8 => v as u8 as i64,
        DType::I16 => v as i16 as i64,
        DType::U16 => v as u16 as i64,
        DType::I32 => v as i32 as i64,
        DType::U32 => v as u32 as i64,
        DType::I64 => v as i64,
        _ => i64::try_from(v as u64).ok()?,
    })
}

/// An integer constant (the value of C type `from` computes in) converted to
/// float dtype `t` as the generated code converts it.
fn int_to_float(v: i64, t: DType) -> f64 {
    match t {
        DType::F64 => v as f64,
        _ => round_float(v as f32 as f64, t),
    }
}

impl Expr {
    /// Builds a binary op, folding constants (with the generated code's
    /// semantics, see the module docs) and trivial identities.
    pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
        let ty = if op.is_cmp() || op.is_logic() {
            DType::Bool
        } else {
            a.dtype()
        };
        match (&a, &b) {
            (Expr::Int(x, ta), Expr::Int(y, tb)) => match int_op(op, *x, *ta, *y, *tb) {
                Ok(IntValue::Int(v)) => return Expr::Int(v, ty),
                Ok(IntValue::Bool(c)) => return Expr::Bool(c),
                Err(_) => {}
            },
            (Expr::Float(x, ta), Expr::Float(y, tb)) if ta == tb => {
                if let Some(v) = float_op(op, *x, *y, *ta) {
                    return Expr::Float(v, ty);
                }
            }
            _ => {}
        }
        match (op, a.as_int(), b.as_int()) {
            (BinOp::Add, Some(0), _) if b.dtype() == ty => return b,
            (BinOp::Add, _, Some(0)) | (BinOp::Sub, _, Some(0)) => return a,
            (BinOp::Mul, Some(1), _) if b.dtype() == ty => return b,
            (BinOp::Mul, _, Some(1)) | (BinOp::Div, _, Some(1)) => return a,
            (BinOp::Mul, Some(0), _) | (BinOp::Mul, _, Some(0)) => return Expr::Int(0, ty),
            _ => {}
        }
        match (op, &a, &b) {
            (BinOp::And, Expr::Bool(true), _) => return b,
            (BinOp::And, _, Expr::Bool(true)) => return a,
            _ => {}
        }
        Expr::Bin(op, Box::new(a), Box::new(b), ty)
    }

    /// `self as to`, folded for constants with the generated code's
    /// semantics (see the module docs).
    pub fn cast(self, to: DType) -> Expr {
        let from = self.dtype();
        if from == to {
            return self;
        }
        let folded = match &self {
            // A cast to a packed pair puts the value in both halves; a
            // constant pair is `Float(v, pair)`, `v` rounded to a half.
            Expr::Int(v, _) if to.is_packed() => {
                Some(Expr::Float(round_float(*v as f64, to.lane()), to))
            }
            Expr::Float(v, _) if to.is_packed() => Some(Expr::Float(
                round_float(round_float(*v, from), to.lane()),
                to,
            )),
            Expr::Int(v, _) if to.is_int() => wrap_int(*v, to).map(|w| Expr::Int(w, to)),
            Expr::Int(v, _) if to.is_float() => Some(Expr::Float(int_to_float(*v, to), to)),
            // An unsuffixed literal keeps its decimal value into `f64`.
            Expr::Float(v, _) if to == DType::F64 => Some(Expr::Float(*v, to)),
            Expr::Float(v, _) if to.is_float() => {
                Some(Expr::Float(round_float(round_float(*v, from), to), to))
            }
            Expr::Float(v, _) if to.is_int() => {
                float_to_int(round_float(*v, from), to).map(|w| Expr::Int(w, to))
            }
            _ => None,
        };
        folded.unwrap_or_else(|| Expr::Cast(to, Box::new(self)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_integers_are_promoted_and_wrap_at_casts() {
        let s = Expr::bin(
            BinOp::Add,
            Expr::Int(200, DType::U8),
            Expr::Int(100, DType::U8),
        );
        assert_eq!(s, Expr::Int(300, DType::U8));
        assert_eq!(s.cast(DType::U8), Expr::Int(300, DType::U8));
        let s = Expr::bin(
            BinOp::Add,
            Expr::Int(200, DType::U8),
            Expr::Int(100, DType::U8),
        );
        assert_eq!(s.cast(DType::I8), Expr::Int(44, DType::I8));
        assert_eq!(
            Expr::Int(70000, DType::I32)
                .cast(DType::I16)
                .cast(DType::F32),
            Expr::Float(4464.0, DType::F32)
        );
    }

    #[test]
    fn signed_overflow_and_division_by_zero_are_not_folded() {
        let max = Expr::Int(i32::MAX as i64, DType::I32);
        assert!(matches!(
            Expr::bin(BinOp::Add, max, Expr::int(1)),
            Expr::Bin(..)
        ));
        assert!(matches!(
            Expr::bin(BinOp::Div, Expr::int(1), Expr::int(0)),
            Expr::Bin(..)
        ));
        // Unsigned arithmetic wraps.
        assert_eq!(
            Expr::bin(
                BinOp::Sub,
                Expr::Int(0, DType::U32),
                Expr::Int(1, DType::U32)
            ),
            Expr::Int(u32::MAX as i64, DType::U32)
        );
    }

    #[test]
    fn float_casts_round_like_the_device() {
        let v = Expr::Float(1.0001, DType::F32).cast(DType::F16);
        assert_eq!(v, Expr::Float(1.0, DType::F16));
        assert_eq!(v.cast(DType::F32), Expr::Float(1.0, DType::F32));
        assert_eq!(
            Expr::Float(3e9, DType::F32).cast(DType::I32),
            Expr::Int(i32::MAX as i64, DType::I32)
        );
        assert_eq!(
            Expr::Float(f64::NAN, DType::F64).cast(DType::U8),
            Expr::Int(0, DType::U8)
        );
        assert_eq!(
            Expr::Float(-1.5, DType::F64).cast(DType::U16),
            Expr::Int(0, DType::U16)
        );
    }
}
