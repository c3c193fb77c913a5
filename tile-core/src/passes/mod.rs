//! The pass pipeline: one straight line, one pass a line.
//!
//! Order matters:
//! 0. `plan_mma` (CUDA) sees the tile ops themselves: whether a gemm can use
//!    tensor cores depends on how its accumulator is used, and the layouts it
//!    picks decide how step 1 lowers (a tensor-core gemm stays a tile op).
//! 1. `lower_tile_ops` first: copies, fills and gemms become `T::parallel`
//!    loop nests, so later passes only see loads, stores and loops, plus the
//!    two tile ops CUDA keeps whole: tensor-core gemms and the tile copies
//!    that feed them (`insert_barriers::accesses` knows both).
//! 2. `demote_fragments` (CUDA) next: it decides which fragments stay in
//!    registers by looking at those nests; `inject_bounds` must know the
//!    final scopes (it never splits nests over register fragments).
//! 3. `inject_bounds` after it: the nests made by step 1 contain global
//!    accesses that may run past a ragged edge and need guards too.
//! 4. `merge_shared` (CUDA) next: it places the final set of shared buffers
//!    (step 2 adds some), giving buffers with disjoint live ranges the same
//!    bytes.
//! 5. `insert_barriers` (CUDA only) last: it must see every shared-memory
//!    access, including those created by steps 1-2, and the placement of
//!    step 4 (a buffer reusing another's bytes needs a barrier after the
//!    other's last access).

pub mod demote_fragments;
pub mod inject_bounds;
pub mod insert_barriers;
pub mod lower_tile_ops;
pub mod merge_shared;
pub mod plan_mma;
pub mod plan_pipelines;
pub mod vectorize;

use crate::diag::Diagnostic;
use crate::ir::PrimFunc;
use crate::Target;

pub fn run(f: PrimFunc, target: Target) -> Result<PrimFunc, Diagnostic> {
    let f = match target {
        Target::Cuda => check(plan_mma::run(f)?)?,
        Target::C => f,
    };
    let f = check(lower_tile_ops::run(f, target)?)?;
    let f = match target {
        Target::Cuda => check(demote_fragments::run(f)?)?,
        Target::C => f,
    };
    let f = check(inject_bounds::run(f)?)?;
    let f = match target {
        Target::Cuda => check(plan_pipelines::run(f)?)?,
        Target::C => f,
    };
    let f = match target {
        Target::Cuda => check(merge_shared::run(f)?)?,
        Target::C => f,
    };
    let f = match target {
        Target::Cuda => check(insert_barriers::run(f)?)?,
        Target::C => f,
    };
    let f = match target {
        Target::Cuda => check(vectorize::run(f)?)?,
        Target::C => f,
    };
    Ok(f)
}

/// Verifies the output of a pass (always: it is cheap next to codegen).
fn check(f: PrimFunc) -> Result<PrimFunc, Diagnostic> {
    crate::verify::verify(&f)?;
    Ok(f)
}
