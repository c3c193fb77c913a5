//! Integer interval analysis over index expressions, used to prove accesses
//! in bounds (so no guard is emitted), to prove that index arithmetic fits
//! the 32-bit `int` it is computed in, and by codegen's affine analysis.

use crate::ir::*;
use std::collections::HashMap;

/// Known inclusive ranges of variables, plus let-bound values for inlining.
#[derive(Clone, Default)]
pub struct Env {
    pub ranges: HashMap<VarId, (i64, i64)>,
    pub lets: HashMap<VarId, Expr>,
    /// Ranges that hold whenever the kernel runs, for variables `ranges`
    /// does not know: a dynamic dim is at most `i32::MAX` (the runtime
    /// checks), a block index is below its grid extent, a loop variable
    /// within its loop. Used by [`Env::fits_i32`] only, so proofs of bounds
    /// are unchanged.
    pub limits: HashMap<VarId, (i64, i64)>,
    /// Exclusive upper bounds as expressions, for variables whose bound is
    /// not a constant: a block index is below its grid extent, a loop
    /// variable from 0 below its loop's extent. They prove `E - 1 - v` (a
    /// grid or loop walked backwards) non-negative.
    pub below: HashMap<VarId, Expr>,
    /// Variables the kernel assigns (`let mut` scalars), which a loop's
    /// extent in `below` must not read.
    pub assigned: std::collections::HashSet<VarId>,
}

/// The values of integer dtype `t`.
fn type_range(t: DType) -> Option<(i64, i64)> {
    Some(match t {
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::U8 => (0, u8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::U16 => (0, u16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::U32 => (0, u32::MAX as i64),
        DType::I64 => (i64::MIN, i64::MAX),
        DType::U64 => (0, i64::MAX),
        _ => return None,
    })
}

const I32: (i64, i64) = (i32::MIN as i64, i32::MAX as i64);

/// The variable `d` of a grid extent `d` or `ceildiv(d, c)` (`(d + c - 1) /
/// c` with a positive constant `c`): an extent of at least 1 needs `d >= 1`.
fn dim_of_extent(g: &Expr) -> Option<VarId> {
    if let Expr::Var(d, _) = g {
        return Some(*d);
    }
    let Expr::Bin(BinOp::Div, num, c, _) = g else {
        return None;
    };
    let c = c.as_int().filter(|&c| c > 0)?;
    let Expr::Bin(BinOp::Sub, sum, one, _) = &**num else {
        return None;
    };
    let Expr::Bin(BinOp::Add, d, k, _) = &**sum else {
        return None;
    };
    match &**d {
        Expr::Var(d, _) if one.as_int() == Some(1) && k.as_int() == Some(c) => Some(*d),
        _ => None,
    }
}

impl Env {
    pub fn range(&self, e: &Expr) -> Option<(i64, i64)> {
        self.range_in(e, false)
    }

    /// What holds whenever `f` runs, before any statement: a constant grid
    /// extent bounds its block index (`ranges`); every dynamic dim and grid
    /// extent fits in `int` (the runtime's argument and grid checks), and a
    /// block index is below its grid extent (`limits`).
    pub fn at_launch(f: &PrimFunc) -> Env {
        const MAX_INT: i64 = i32::MAX as i64;
        let mut env = Env::default();
        for (d, &v) in f.launch.block_vars.iter().enumerate() {
            if let Some(g) = f.launch.grid[d].as_int() {
                env.ranges.insert(v, (0, g - 1));
            }
        }
        for &d in &f.dims {
            env.limits.insert(d, (0, MAX_INT));
        }
        // A block runs only when every grid extent is at least 1, so a dim
        // that is an extent, or whose ceildiv by a constant is, is at least
        // 1 wherever the body runs: `H * B - 1` or `ceildiv(H * B, n)` over
        // such dims is then never negative.
        for g in &f.launch.grid {
            if let Some(d) = dim_of_extent(g).filter(|d| f.dims.contains(d)) {
                env.limits.insert(d, (1, MAX_INT));
            }
        }
        for (d, &v) in f.launch.block_vars.iter().enumerate() {
            let hi = env
                .run_time_range(&f.launch.grid[d])
                .map_or(MAX_INT, |(_, hi)| hi.min(MAX_INT));
            env.limits.insert(v, (0, (hi - 1).max(0)));
            env.below.insert(v, f.launch.grid[d].clone());
        }
        f.body.visit(&mut |s| {
            if let Stmt::Assign { var, .. } = s {
                env.assigned.insert(*var);
            }
        });
        env
    }

    /// Records `v < extent` for a loop from `start` 0, unless the extent
    /// reads a variable the kernel assigns (then `extent` in the body may not
    /// be the value the loop started with). `assigned` comes from
    /// [`Env::at_launch`].
    pub fn bound_loop(&mut self, v: VarId, start: &Expr, extent: &Expr) {
        if start.as_int() == Some(0) && !self.assigned.iter().any(|&a| extent.uses_var(a)) {
            self.below.insert(v, extent.clone());
        }
    }

    /// Records `v < E` for a scalar bound to `x % E` with `x` and `E` never
    /// negative (a coordinate taken from a flat index, as `T::persistent`
    /// binds them), under the same rule as [`Env::bound_loop`].
    pub fn bound_let(&mut self, v: VarId, value: &Expr) {
        if let Expr::Bin(BinOp::Rem, x, e, _) = value {
            let stable = !self.assigned.iter().any(|&a| value.uses_var(a));
            if stable && self.non_negative(x) && self.non_negative(e) {
                self.below.insert(v, (**e).clone());
            }
        }
    }

    /// Whether `a - b >= 0` by a variable's symbolic bound: `v < E` makes
    /// `E - v`, `(E - 1) - v` and `(E - v) - 1` non-negative. A remainder
    /// `x % E` of non-negative parts is below `E` the same way, wherever it
    /// stands: both sides are read at once, so `E` is the same value in each
    /// (`nq - 1 - f(..) % nq`, a helper's result reversed in place).
    fn difference_non_negative(&self, a: &Expr, b: &Expr) -> bool {
        let below = |v| self.exclusive_bound(v);
        if let Some(e) = below(b) {
            let one_less =
                matches!(a, Expr::Bin(BinOp::Sub, x, c, _) if **x == *e && c.as_int() == Some(1));
            return *a == *e || one_less;
        }
        match a {
            Expr::Bin(BinOp::Sub, x, v, _) => {
                below(v).is_some_and(|e| **x == *e) && b.as_int().is_some_and(|c| c <= 1)
            }
            _ => false,
        }
    }

    /// An expression `v` is known to be below: a variable's `below`, or the
    /// divisor of a remainder of non-negative parts.
    fn exclusive_bound<'a>(&'a self, v: &'a Expr) -> Option<&'a Expr> {
        match v {
            Expr::Var(v, _) => self.below.get(v),
            Expr::Bin(BinOp::Rem, x, e, _) if self.non_negative(x) && self.non_negative(e) => {
                Some(e)
            }
            _ => None,
        }
    }

    /// Whether `e` is never negative when the kernel runs: by its run-time
    /// range where that is known, else by signs, which need no upper bound
    /// (sums, products, quotients, remainders, shifts, minima and maxima of
    /// non-negative parts are non-negative; so is a value of an unsigned
    /// dtype). A difference is proven only against a variable's symbolic
    /// bound (`below`); a negation or a signed value read from memory is
    /// not.
    pub fn non_negative(&self, e: &Expr) -> bool {
        let t = e.dtype();
        if t.is_int() && !t.is_signed_int() {
            return true;
        }
        if self.run_time_range(e).is_some_and(|(lo, _)| lo >= 0) {
            return true;
        }
        let nn = |x: &Expr| self.non_negative(x);
        match e {
            Expr::Int(v, _) => *v >= 0,
            Expr::Thread => true,
            Expr::Var(v, _) => {
                let from = |m: &HashMap<VarId, (i64, i64)>| m.get(v).is_some_and(|r| r.0 >= 0);
                from(&self.ranges) || from(&self.limits) || self.lets.get(v).is_some_and(nn)
            }
            // A cast that keeps every value of its operand's dtype.
            Expr::Cast(t, a) => {
                let from = a.dtype();
                t.is_int() && from.is_int() && t.bytes() >= from.bytes() && nn(a)
            }
            Expr::Bin(op, a, b, _) => match op {
                BinOp::Add | BinOp::Mul | BinOp::Div | BinOp::Rem | BinOp::Min => nn(a) && nn(b),
                BinOp::Shr | BinOp::BitOr | BinOp::BitXor => nn(a) && nn(b),
                BinOp::Max | BinOp::BitAnd => nn(a) || nn(b),
                BinOp::Sub => self.difference_non_negative(a, b),
                _ => false,
            },
            Expr::Select(_, a, b, _) => nn(a) && nn(b),
            _ => false,
        }
    }

    /// The range of `e` at run time: [`Env::range`], falling back to
    /// `limits` and to the range of each value's dtype.
    pub fn run_time_range(&self, e: &Expr) -> Option<(i64, i64)> {
        self.range_in(e, true)
    }

    fn range_in(&self, e: &Expr, run_time: bool) -> Option<(i64, i64)> {
        let r = |x: &Expr| self.range_in(x, run_time);
        let known = match e {
            Expr::Int(v, _) => Some((*v, *v)),
            Expr::Var(v, _) => self
                .ranges
                .get(v)
                .copied()
                .or_else(|| self.lets.get(v).and_then(r))
                .or_else(|| run_time.then(|| self.limits.get(v).copied()).flatten()),
            Expr::Cast(t, a) if t.is_int() => {
                let inner = r(a);
                match (inner, type_range(*t)) {
                    (Some((lo, hi)), Some((tl, th))) if lo >= tl && hi <= th => inner,
                    _ => None,
                }
            }
            Expr::Thread if run_time => Some((0, 1023)),
            Expr::Bin(op, a, b, t) if t.is_int() => {
                let (al, ah) = r(a)?;
                let (mut bl, bh) = r(b)?;
                // A division by zero never runs (it is undefined): a
                // divisor known not to be negative is at least 1.
                if run_time && matches!(op, BinOp::Div | BinOp::Rem) && bl == 0 && bh > 0 {
                    bl = 1;
                }
                match op {
                    BinOp::Add => Some((al.checked_add(bl)?, ah.checked_add(bh)?)),
                    BinOp::Sub => Some((al.checked_sub(bh)?, ah.checked_sub(bl)?)),
                    BinOp::Mul => {
                        let c = [
                            al.checked_mul(bl)?,
                            al.checked_mul(bh)?,
                            ah.checked_mul(bl)?,
                            ah.checked_mul(bh)?,
                        ];
                        Some((*c.iter().min()?, *c.iter().max()?))
                    }
                    BinOp::Div if bl > 0 && al >= 0 => Some((al / bh, ah / bl)),
                    BinOp::Rem if bl > 0 && al >= 0 => Some((0, (bh - 1).min(ah))),
                    BinOp::Min => Some((al.min(bl), ah.min(bh))),
                    BinOp::Max => Some((al.max(bl), ah.max(bh))),
                    _ => None,
                }
            }
            _ => None,
        };
        match known {
            Some(k) => Some(k),
            None if run_time => type_range(e.dtype()),
            None => None,
        }
    }

    /// Whether every integer value `e` computes in 32 bits or fewer (it and
    /// each of its parts) fits in `int` at run time, so C's 32-bit
    /// arithmetic cannot overflow on the way.
    pub fn fits_i32(&self, e: &Expr) -> bool {
        let mut ok = true;
        e.visit(&mut |x| {
            let t = x.dtype();
            if ok && t.is_int() && t.bytes() <= 4 {
                ok = self
                    .run_time_range(x)
                    .is_some_and(|(lo, hi)| lo >= I32.0 && hi <= I32.1);
            }
        });
        ok
    }
}
