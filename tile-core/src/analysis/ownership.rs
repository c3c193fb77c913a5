//! Which thread owns which element of a register fragment.

use crate::ir::*;

/// Whether `buf[idx]` inside a nest over `ext` (loop variables `vars`) is the
/// element the nest's partition gives to the accessing thread: the nest runs
/// over the buffer's shape (leading unit dims aside, indexed by 0) with the
/// nest's variables in order, so flat element numbers agree.
pub fn owner_access(shape: &[i64], idx: &[Expr], vars: &[VarId], ext: &[i64]) -> bool {
    let lead = shape.len().saturating_sub(ext.len());
    shape.len() == idx.len()
        && shape[..lead].iter().all(|&d| d == 1)
        && idx[..lead].iter().all(|e| e.as_int() == Some(0))
        && shape[lead..] == *ext
        && idx[lead..]
            .iter()
            .zip(vars)
            .all(|(e, v)| matches!(e, Expr::Var(x, _) if x == v))
}
