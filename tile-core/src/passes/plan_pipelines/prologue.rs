//! Which tiles copied before a warp-specialized pipeline its producer issues
//! (`Pipeline::prologue`).
//!
//! Attention copies its Q tile once, then loops over K and V. Run by the
//! consumers, that copy completes before the block splits into its roles,
//! so the producer's first K and V copies start one memory latency late, in
//! every block. Issued by the producer thread as a bulk tensor copy right
//! before the first stage's, on a barrier of its own that the consumers wait
//! on before the loop, the three loads are in flight together.
//!
//! A copy qualifies when it stands before the loop in the loop's own
//! sequence (the kernel's top level, or the body of a persistent loop), is a
//! bulk tensor copy (`CopyInst::Tma`) of a global tile into a whole shared
//! tile, and nothing else in the kernel writes that tile (the consumers then
//! only read it, after the barrier). In a persistent loop the producer
//! issues it again for each tile, once the consumers have released the
//! last one's (a second barrier). Not in clusters (the pipeline's barriers
//! are then the cluster's) nor split.

use super::consumer_tile_copy;
use crate::ir::*;
use crate::passes::insert_barriers::accesses;

/// The shared tiles whose copies before pipeline `var` its producer issues.
pub(super) fn prologue(f: &PrimFunc, var: VarId) -> Vec<BufId> {
    let Some(p) = f.schedule.pipelines.get(&var) else {
        return Vec::new();
    };
    if !p.warp_specialized || f.launch.cluster > 1 || p.split.is_some() {
        return Vec::new();
    }
    let Some((items, at)) = loop_sequence(f, var) else {
        return Vec::new();
    };
    (0..at)
        .filter(|&i| ahead(f, items[i]))
        .filter_map(|i| match items[i] {
            Stmt::Copy { dst, .. } => Some(dst.buf),
            _ => None,
        })
        .collect()
}

/// The sequence that holds pipeline `var` (the kernel's top level, or the
/// body of a top-level loop around it) and the loop's place in it. The
/// backend finds the prologue's copies there too (`WsPlan`).
pub fn loop_sequence(f: &PrimFunc, var: VarId) -> Option<(Vec<&Stmt>, usize)> {
    let is_pipe = |s: &Stmt| matches!(s, Stmt::For { var: v, .. } if *v == var);
    let top = f.body.items();
    if let Some(at) = top.iter().position(|s| is_pipe(s)) {
        return Some((top, at));
    }
    top.iter().find_map(|s| match s {
        Stmt::For { body, .. } => {
            let items = body.items();
            let at = items.iter().position(|x| is_pipe(x))?;
            Some((items, at))
        }
        _ => None,
    })
}

/// A bulk tensor copy of a global tile into a whole shared tile that no
/// other statement of the kernel writes: one a warp-specialized producer can
/// issue ahead of its stages.
pub(super) fn ahead(f: &PrimFunc, s: &Stmt) -> bool {
    let Stmt::Copy {
        dst,
        inst: CopyInst::Tma { .. },
        ..
    } = s
    else {
        return false;
    };
    let mut others = 0;
    f.body.visit(&mut |x| {
        let leaf = !matches!(x, Stmt::Seq(_) | Stmt::For { .. } | Stmt::If { .. });
        if leaf && !std::ptr::eq(x, s) && accesses(f, x).writes.contains(&dst.buf) {
            others += 1;
        }
    });
    consumer_tile_copy(f, s) && others == 0
}
