//! Which buffers and elements a piece of IR touches, and whether an access
//! is contiguous and aligned along a loop (what vectorization needs).

use crate::ir::*;
use std::collections::{BTreeSet, HashMap};

/// Whether `buf[idx]` is contiguous in `inner` and aligned to `v` elements
/// for every chunk, assuming the returned dynamic dims are multiples of `v`
/// (empty: unconditionally). `None`: not vectorizable at width `v`.
pub fn aligned_dims(
    f: &PrimFunc,
    b: BufId,
    idx: &[Expr],
    lets: &HashMap<VarId, Expr>,
    inner: VarId,
    v: i64,
) -> Option<BTreeSet<VarId>> {
    let buf = f.buf(b);
    let flat = flatten(&buf.shape, idx).inline_lets(lets);
    let dims: BTreeSet<VarId> = f.dims.iter().copied().collect();
    inner_plus_multiple(&flat, inner, v, &dims)
}

/// Whether `e` is `inner + x` with `x` a multiple of `v`, assuming the
/// returned dynamic dims are multiples of `v` (`None`: it cannot be shown).
/// (Integer casts are looked through: indices are non-negative and fit.)
fn inner_plus_multiple(
    e: &Expr,
    inner: VarId,
    v: i64,
    dims: &BTreeSet<VarId>,
) -> Option<BTreeSet<VarId>> {
    let mut terms = Vec::new();
    sum_terms(e, 1, &mut terms);
    let mut need = BTreeSet::new();
    let mut inner_seen = 0;
    for (sign, t) in terms {
        if t.uses_var(inner) {
            let bare = matches!(&t, Expr::Var(x, _) if *x == inner);
            if !bare || sign != 1 {
                return None;
            }
            inner_seen += 1;
        } else {
            need.extend(zero_mod(&t, v, dims)?);
        }
    }
    (inner_seen == 1).then_some(need)
}

/// Whether the bounds guard `cond` has one value over every chunk of `v`
/// lanes along `inner` (chunks start at multiples of `v`), assuming the
/// returned dynamic dims are multiples of `v`. It holds for conjunctions
/// and disjunctions of terms that do not use `inner` and of comparisons
/// `x + inner < bound` (or `bound > x + inner`) with `x` and `bound`
/// multiples of `v`: then `x + base < bound` implies `x + base + v - 1 <
/// bound`, so the chunk's first lane decides for all of them.
pub fn uniform_in_chunk(
    cond: &Expr,
    inner: VarId,
    v: i64,
    dims: &BTreeSet<VarId>,
) -> Option<BTreeSet<VarId>> {
    if v == 1 || !cond.uses_var(inner) {
        return Some(BTreeSet::new());
    }
    let below = |lhs: &Expr, bound: &Expr| -> Option<BTreeSet<VarId>> {
        if bound.uses_var(inner) {
            return None;
        }
        let mut need = zero_mod(bound, v, dims)?;
        need.extend(inner_plus_multiple(lhs, inner, v, dims)?);
        Some(need)
    };
    match cond {
        Expr::Bin(BinOp::And | BinOp::Or, a, b, _) => {
            let mut need = uniform_in_chunk(a, inner, v, dims)?;
            need.extend(uniform_in_chunk(b, inner, v, dims)?);
            Some(need)
        }
        Expr::Bin(BinOp::Lt, a, b, _) => below(a, b),
        Expr::Bin(BinOp::Gt, a, b, _) => below(b, a),
        _ => None,
    }
}

/// The terms of a sum, with their signs.
fn sum_terms(e: &Expr, sign: i64, out: &mut Vec<(i64, Expr)>) {
    match e {
        Expr::Bin(BinOp::Add, a, b, _) => {
            sum_terms(a, sign, out);
            sum_terms(b, sign, out);
        }
        Expr::Bin(BinOp::Sub, a, b, _) => {
            sum_terms(a, sign, out);
            sum_terms(b, -sign, out);
        }
        Expr::Cast(t, a) if t.is_int() => sum_terms(a, sign, out),
        e => out.push((sign, e.clone())),
    }
}

/// The dynamic dims that must be multiples of `v` for `e` to be one (`None`:
/// it cannot be shown).
pub fn zero_mod(e: &Expr, v: i64, dims: &BTreeSet<VarId>) -> Option<BTreeSet<VarId>> {
    if v == 1 {
        return Some(BTreeSet::new());
    }
    match e {
        Expr::Int(c, _) => (c % v == 0).then(BTreeSet::new),
        Expr::Var(x, _) if dims.contains(x) => Some(BTreeSet::from([*x])),
        Expr::Cast(t, a) if t.is_int() => zero_mod(a, v, dims),
        Expr::Bin(BinOp::Add | BinOp::Sub, a, b, _) => {
            let mut s = zero_mod(a, v, dims)?;
            s.extend(zero_mod(b, v, dims)?);
            Some(s)
        }
        Expr::Bin(BinOp::Mul, a, b, _) => match (a.as_int(), b.as_int()) {
            (Some(k), _) if k % v == 0 => Some(BTreeSet::new()),
            (_, Some(k)) if k % v == 0 => Some(BTreeSet::new()),
            _ => zero_mod(a, v, dims).or_else(|| zero_mod(b, v, dims)),
        },
        _ => None,
    }
}

/// The buffers `s` reads or writes, and whether any access is guarded (an
/// `if` or a select).
pub fn bufs_in(s: &Stmt) -> (BTreeSet<BufId>, bool) {
    let mut bufs = BTreeSet::new();
    let mut guarded = false;
    s.visit_exprs(&mut |e| match e {
        Expr::Load(b, _, _) => {
            bufs.insert(*b);
        }
        Expr::Select(..) => guarded = true,
        _ => {}
    });
    s.visit(&mut |x| match x {
        Stmt::Store { buf, .. } => {
            bufs.insert(*buf);
        }
        Stmt::If { .. } => guarded = true,
        _ => {}
    });
    (bufs, guarded)
}

/// The let-bound values inside `s` (for inlining into indices).
pub fn lets_in(s: &Stmt) -> HashMap<VarId, Expr> {
    let mut m = HashMap::new();
    s.visit(&mut |x| {
        if let Stmt::Let { var, value } = x {
            m.insert(*var, value.clone());
        }
    });
    m
}

/// Every (buffer, index) loaded or stored within `s`.
pub fn accesses(s: &Stmt) -> Vec<(BufId, Vec<Expr>)> {
    let mut v = Vec::new();
    s.visit_exprs(&mut |e| {
        if let Expr::Load(b, idx, _) = e {
            v.push((*b, idx.clone()));
        }
    });
    s.visit(&mut |x| {
        if let Stmt::Store { buf, idx, .. } = x {
            v.push((*buf, idx.clone()));
        }
    });
    v
}
