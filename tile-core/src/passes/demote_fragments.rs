//! Moves fragments that threads cannot keep in their own registers into
//! shared memory (CUDA only).
//!
//! A fragment lives in registers, split over the block's threads by the same
//! rule as the `T::parallel` nests that touch it. That only works if every
//! access is by the owning thread: inside a top-level `T::parallel` nest that
//! runs over exactly the fragment's shape, indexed by the nest's variables
//! in order, or over its trailing dims with the leading ones indexed by loops
//! inside the nest (per-thread rows, `ownership::thread_rows_access`). A fragment read any other way (broadcast `row_max[i]` in a 2-D
//! nest, a reduction, a scan, serial code) is demoted to shared memory, where
//! every thread can read every element; `insert_barriers` then orders the
//! accesses. This keeps every program correct; register-resident layouts for
//! more patterns (reductions over gemm accumulators) replace it case by case.
//!
//! One such case already: a reduction along the last dim of a fragment whose
//! row length and the thread count are powers of two stays in registers
//! (`register_reducible`); the CUDA backend combines each thread's registers
//! and then the threads sharing a row. Its destination is still demoted.
//!
//! Tensor-core accumulators and the per-row fragments tied to them
//! (`plan_mma`) stay in registers: `plan_mma` gave them layouts only where
//! every use is by a thread that holds the value.

use crate::analysis::ownership::{inner_loops, thread_rows_access};
use crate::diag::Diagnostic;
use crate::ir::*;
use std::collections::BTreeSet;

pub fn run(mut f: PrimFunc) -> Result<PrimFunc, Diagnostic> {
    for b in demoted(&f) {
        f.buffers[b.0 as usize].scope = Scope::Shared;
    }
    Ok(f)
}

/// The fragments the pass moves to shared memory (none once it ran).
pub fn demoted(f: &PrimFunc) -> BTreeSet<BufId> {
    let mut bad = BTreeSet::new();
    if f.buffers.iter().any(|b| b.scope == Scope::Fragment) {
        scan(f, &f.body, &mut bad);
    }
    bad
}

/// A fragment in the default layout (split over threads like the nests
/// that touch it). Row layouts (`plan_mma`) already hold each value where
/// its readers run, and tensor-core accumulators are only used by their
/// owners: neither is ever demoted.
fn is_fragment(f: &PrimFunc, b: BufId) -> bool {
    let x = f.buf(b);
    x.scope == Scope::Fragment && !x.layout.is_some_and(Layout::is_rows)
}

/// Whether the CUDA backend reduces `r.src` in registers (see the module docs).
pub fn register_reducible(f: &PrimFunc, r: &Reduce) -> bool {
    let shape = f.buf(r.src).const_shape().unwrap_or_default();
    let pow2 = |x: i64| x > 0 && x & (x - 1) == 0;
    is_fragment(f, r.src)
        && r.dim + 1 == shape.len()
        && pow2(shape[r.dim])
        && pow2(f.launch.threads)
}

/// The buffers of a reduction that must leave registers.
fn reduce_demotes(f: &PrimFunc, r: &Reduce) -> Vec<BufId> {
    let mut v = vec![r.dst];
    // An accumulator's row reduction runs in its registers (`plan_mma`).
    let acc = f.buf(r.src).layout.is_some_and(Layout::is_accumulator);
    if !acc && !register_reducible(f, r) {
        v.push(r.src);
    }
    v.into_iter().filter(|&b| is_fragment(f, b)).collect()
}

/// Marks fragments accessed outside the owner-only pattern.
fn scan(f: &PrimFunc, s: &Stmt, bad: &mut BTreeSet<BufId>) {
    if let Some(Nest {
        vars,
        extents: ext,
        body,
    }) = s.parallel_nest()
    {
        let loops = inner_loops(body);
        let identity = |b: BufId, idx: &[Expr]| {
            thread_rows_access(
                &f.buf(b).const_shape().unwrap_or_default(),
                idx,
                &vars,
                &ext,
                &loops,
                f.launch.threads,
            )
        };
        body.visit_exprs(&mut |e| {
            if let Expr::Load(b, idx, _) = e {
                if is_fragment(f, *b) && !identity(*b, idx) {
                    bad.insert(*b);
                }
            }
        });
        body.visit(&mut |x| match x {
            Stmt::Store { buf, idx, .. } if is_fragment(f, *buf) && !identity(*buf, idx) => {
                bad.insert(*buf);
            }
            Stmt::Reduce(r) => bad.extend(reduce_demotes(f, r)),
            _ => {}
        });
        return;
    }
    match s {
        Stmt::Seq(v) => v.iter().for_each(|x| scan(f, x, bad)),
        Stmt::For { body, .. } => scan(f, body, bad),
        Stmt::If { then, els, .. } => {
            scan(f, then, bad);
            if let Some(e) = els {
                scan(f, e, bad);
            }
        }
        Stmt::Reduce(r) => bad.extend(reduce_demotes(f, r)),
        other => {
            // Serial code: any fragment it touches must be shared.
            other.visit_exprs(&mut |e| {
                if let Expr::Load(b, _, _) = e {
                    if is_fragment(f, *b) {
                        bad.insert(*b);
                    }
                }
            });
            if let Stmt::Store { buf, .. } | Stmt::AtomicAdd { buf, .. } = other {
                if is_fragment(f, *buf) {
                    bad.insert(*buf);
                }
            }
        }
    }
}
