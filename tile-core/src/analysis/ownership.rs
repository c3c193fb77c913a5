//! Which thread owns which element of a register fragment.
//!
//! A fragment in the default layout is split like the nests over it: flat
//! element `e` belongs to thread `(e / V) % threads`, in register
//! `(e / (V * threads)) * V + e % V` (`vectorize` picks `V`). A nest over the
//! fragment's trailing dims reaches the same owner for every value of its
//! leading dims when the nest's element count `P` is a multiple of
//! `V * threads`: then flat element `l * P + e` is thread `(e / V) % threads`'s,
//! in register `l * P / threads` plus the nest element's own register. That
//! lets a thread keep several rows of a fragment (one per value of a serial
//! loop inside the nest) and reuse what it loaded once for all of them.

use crate::ir::*;
use std::collections::HashMap;

/// Whether `buf[idx]` inside a nest over `ext` (loop variables `vars`) is the
/// element the nest's partition gives to the accessing thread: the nest runs
/// over the buffer's shape (leading unit dims aside, indexed by 0) with the
/// nest's variables in order, so flat element numbers agree.
pub fn owner_access(shape: &[i64], idx: &[Expr], vars: &[VarId], ext: &[i64]) -> bool {
    let lead = shape.len().saturating_sub(ext.len());
    trailing_match(shape, idx, vars, ext)
        && shape[..lead].iter().all(|&d| d == 1)
        && idx[..lead].iter().all(|e| e.as_int() == Some(0))
}

/// [`owner_access`], or a per-thread-rows access: the nest runs over the
/// buffer's trailing dims (its variables in order), each leading dim is
/// indexed by a constant in range or by the variable of a loop inside the
/// nest (`loops`: variable → extent, each from 0) that stays in range, and
/// the nest's element count is a multiple of `threads` (`vectorize` then
/// keeps `V` a divisor of `P / threads`; see the module docs).
pub fn thread_rows_access(
    shape: &[i64],
    idx: &[Expr],
    vars: &[VarId],
    ext: &[i64],
    loops: &HashMap<VarId, i64>,
    threads: i64,
) -> bool {
    if owner_access(shape, idx, vars, ext) {
        return true;
    }
    let lead = shape.len().saturating_sub(ext.len());
    let in_range = |e: &Expr, d: i64| match e {
        Expr::Var(x, _) => loops.get(x).is_some_and(|&n| n <= d),
        e => e.as_int().is_some_and(|c| (0..d).contains(&c)),
    };
    let total: i64 = ext.iter().product();
    lead > 0
        && trailing_match(shape, idx, vars, ext)
        && idx[..lead].iter().zip(shape).all(|(e, &d)| in_range(e, d))
        && threads > 0
        && total % threads == 0
}

/// Whether a fragment of `shape` reached from a nest over `ext` has leading
/// dims beyond the nest's other than unit ones: its accesses there are the
/// per-thread-rows form of [`thread_rows_access`].
pub fn has_thread_rows(shape: &[i64], ext: &[i64]) -> bool {
    let lead = shape.len().saturating_sub(ext.len());
    shape[..lead].iter().any(|&d| d != 1)
}

/// Registers between consecutive leading-dim rows of a fragment in a nest
/// over `ext` (per-thread rows): the nest's elements per thread.
pub fn thread_row_stride(ext: &[i64], threads: i64) -> i64 {
    ext.iter().product::<i64>() / threads.max(1)
}

/// The loops inside a nest body with constant bounds from 0: variable → extent.
pub fn inner_loops(body: &Stmt) -> HashMap<VarId, i64> {
    let mut out = HashMap::new();
    body.visit(&mut |s| {
        if let Stmt::For {
            var, start, extent, ..
        } = s
        {
            if let (Some(0), Some(n)) = (start.as_int(), extent.as_int()) {
                out.insert(*var, n);
            }
        }
    });
    out
}

/// The nest covers the buffer's trailing dims with its variables in order.
fn trailing_match(shape: &[i64], idx: &[Expr], vars: &[VarId], ext: &[i64]) -> bool {
    let lead = shape.len().saturating_sub(ext.len());
    shape.len() == idx.len()
        && shape.len() >= ext.len()
        && shape[lead..] == *ext
        && idx[lead..]
            .iter()
            .zip(vars)
            .all(|(e, v)| matches!(e, Expr::Var(x, _) if x == v))
}
