//! Which tiles copied before a warp-specialized pipeline its producer issues
//! (`Pipeline::prologue`).
//!
//! Attention copies its Q tile once, at the top of the kernel, then loops
//! over K and V. Run by the consumers, that copy completes before the block
//! splits into its roles, so the producer's first K and V copies start one
//! memory latency late, in every block. Issued by the producer thread as a
//! bulk tensor copy right before the first stage's, on a barrier of its own
//! that the consumers wait on before the loop, the three loads are in flight
//! together.
//!
//! A copy qualifies when it stands in the kernel's top-level sequence before
//! the loop, is a bulk tensor copy (`CopyInst::Tma`) of a global tile into a
//! whole shared tile, and nothing else in the kernel writes that tile (the
//! consumers then only read it, after the barrier). Not in a persistent loop
//! (each tile would need the copy again) nor in clusters (the pipeline's
//! barriers are then the cluster's).

use super::consumer_tile_copy;
use crate::ir::*;
use crate::passes::insert_barriers::accesses;

/// The shared tiles whose copies before pipeline `var` its producer issues.
pub(super) fn prologue(f: &PrimFunc, var: VarId) -> Vec<BufId> {
    let Some(p) = f.schedule.pipelines.get(&var) else {
        return Vec::new();
    };
    if !p.warp_specialized || p.persistent || f.launch.cluster > 1 || p.split.is_some() {
        return Vec::new();
    }
    let top = f.body.items();
    let Some(at) = top
        .iter()
        .position(|s| matches!(s, Stmt::For { var: v, .. } if *v == var))
    else {
        return Vec::new();
    };
    let mut tiles = Vec::new();
    for (i, s) in top[..at].iter().enumerate() {
        let Stmt::Copy {
            dst,
            inst: CopyInst::Tma { .. },
            ..
        } = s
        else {
            continue;
        };
        // Written by this copy alone: every other statement of the kernel
        // (the rest of the top level, and the loop with everything after,
        // whose producers fill the stage tiles) only reads it.
        let alone = top
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .all(|(_, x)| !accesses(f, x).writes.contains(&dst.buf));
        if consumer_tile_copy(f, s) && alone {
            tiles.push(dst.buf);
        }
    }
    tiles
}
