//! The pass pipeline: one straight line, one pass a line of [`PASSES`].
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
//! 4. `plan_pipelines` (CUDA) next: it sees the final producer nests (step 3
//!    splits some into interior and edge) and decides which tiles get one
//!    buffer per stage, which step 5 must reserve.
//! 5. `merge_shared` (CUDA) next: it places the final set of shared buffers
//!    (step 2 adds some), giving buffers with disjoint live ranges the same
//!    bytes.
//! 6. `insert_barriers` (CUDA only): it must see every shared-memory
//!    access, including those created by steps 1-2, and the placement of
//!    step 5 (a buffer reusing another's bytes needs a barrier after the
//!    other's last access); a pipeline of step 4 ends with a barrier of its
//!    own.
//! 7. `vectorize` (CUDA) last: it splits the final nests over threads (none
//!    is added or split after it).
//!
//! After each pass `verify` checks the function at that pass's stage
//! ([`Stage`]). `TILE_DUMP_IR=dir` writes the script after every step to
//! `dir/<kernel>.<target>[-<arch>].<nn>-<step>.ir` (`00-frontend`, `01-plan_mma`, ..,
//! numbered per target); `tile inspect --emit passes` prints the same.

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
use crate::verify::{verify_at, Stage};
use crate::Target;
use proc_macro2::Span;

/// A pass of the pipeline; ordered as they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PassId {
    PlanMma,
    LowerTileOps,
    DemoteFragments,
    InjectBounds,
    PlanPipelines,
    MergeShared,
    InsertBarriers,
    Vectorize,
}

/// One line of the pipeline.
pub struct Pass {
    pub id: PassId,
    pub name: &'static str,
    /// The targets whose pipeline runs it.
    pub targets: &'static [Target],
    pub run: fn(PrimFunc, Target) -> Result<PrimFunc, Diagnostic>,
}

const CUDA: &[Target] = &[Target::Cuda];
const BOTH: &[Target] = &[Target::C, Target::Cuda];

const fn pass(
    id: PassId,
    name: &'static str,
    targets: &'static [Target],
    run: fn(PrimFunc, Target) -> Result<PrimFunc, Diagnostic>,
) -> Pass {
    Pass {
        id,
        name,
        targets,
        run,
    }
}

/// The pipeline, in order (the module docs say why this order).
pub const PASSES: [Pass; 8] = [
    pass(PassId::PlanMma, "plan_mma", CUDA, |f, _| plan_mma::run(f)),
    pass(
        PassId::LowerTileOps,
        "lower_tile_ops",
        BOTH,
        lower_tile_ops::run,
    ),
    pass(PassId::DemoteFragments, "demote_fragments", CUDA, |f, _| {
        demote_fragments::run(f)
    }),
    pass(PassId::InjectBounds, "inject_bounds", BOTH, |f, _| {
        inject_bounds::run(f)
    }),
    pass(PassId::PlanPipelines, "plan_pipelines", CUDA, |f, _| {
        plan_pipelines::run(f)
    }),
    pass(PassId::MergeShared, "merge_shared", CUDA, |f, _| {
        merge_shared::run(f)
    }),
    pass(PassId::InsertBarriers, "insert_barriers", CUDA, |f, _| {
        insert_barriers::run(f)
    }),
    pass(PassId::Vectorize, "vectorize", CUDA, |f, _| {
        vectorize::run(f)
    }),
];

impl PassId {
    pub fn pass(self) -> &'static Pass {
        &PASSES[self as usize]
    }
    pub fn name(self) -> &'static str {
        self.pass().name
    }
    pub fn runs_for(self, target: Target) -> bool {
        self.pass().targets.contains(&target)
    }
}

/// The target's name in dumps and messages (`c`, `cuda`), as in cache keys.
pub fn target_name(t: Target) -> &'static str {
    match t {
        Target::C => "c",
        Target::Cuda => "cuda",
    }
}

/// Runs the pipeline for `target`, verifying after every pass (always: it
/// is cheap next to codegen), and with `TILE_DUMP_IR` set, dumping every step.
pub fn run(f: PrimFunc, target: Target) -> Result<PrimFunc, Diagnostic> {
    match std::env::var_os("TILE_DUMP_IR").filter(|d| !d.is_empty()) {
        Some(dir) => {
            let dir = std::path::PathBuf::from(dir);
            run_observed(f, target, &mut |step, name, f| {
                dump(&dir, target, step, name, f)
            })
        }
        None => run_observed(f, target, &mut |_, _, _| Ok(())),
    }
}

/// [`run`], showing `observe` each step: `(0, "frontend", input)`, then
/// `(n, pass, output)` after the n-th pass that runs for `target`, before
/// the output is verified (so a dump shows what failed verification).
pub fn run_observed(
    mut f: PrimFunc,
    target: Target,
    observe: &mut dyn FnMut(usize, &str, &PrimFunc) -> Result<(), Diagnostic>,
) -> Result<PrimFunc, Diagnostic> {
    observe(0, "frontend", &f)?;
    let passes = PASSES.iter().filter(|p| p.targets.contains(&target));
    for (n, p) in passes.enumerate() {
        f = (p.run)(f, target)?;
        observe(n + 1, p.name, &f)?;
        verify_at(&f, Stage::After(p.id, target))?;
    }
    Ok(f)
}

/// Runs the pass named `name` alone (for tests and tools) and verifies its
/// output at its stage.
pub fn run_one(name: &str, f: PrimFunc, target: Target) -> Result<PrimFunc, Diagnostic> {
    let err = |m: String| Diagnostic::new(Span::call_site(), m);
    let Some(p) = PASSES.iter().find(|p| p.name == name) else {
        let names: Vec<&str> = PASSES.iter().map(|p| p.name).collect();
        return Err(err(format!(
            "no pass named `{name}` (the passes: {})",
            names.join(", ")
        )));
    };
    if !p.targets.contains(&target) {
        return Err(err(format!(
            "`{name}` does not run for the {} target",
            target_name(target)
        )));
    }
    let f = (p.run)(f, target)?;
    verify_at(&f, Stage::After(p.id, target))?;
    Ok(f)
}

/// Writes step `step` (named `name`) of `f`'s pipeline for `target` into `dir`.
fn dump(
    dir: &std::path::Path,
    target: Target,
    step: usize,
    name: &str,
    f: &PrimFunc,
) -> Result<(), Diagnostic> {
    // A specialization gets files of its own (`k.cuda-sm_90a.03-..`).
    let arch = match f.arch {
        crate::ir::CudaArch::Any => String::new(),
        a => format!("-{}", a.name()),
    };
    let path = dir.join(format!(
        "{}.{}{arch}.{step:02}-{name}.ir",
        f.name,
        target_name(target)
    ));
    std::fs::create_dir_all(dir)
        .and_then(|_| std::fs::write(&path, f.script()))
        .map_err(|e| {
            Diagnostic::new(
                Span::call_site(),
                format!("TILE_DUMP_IR: cannot write {}: {e}", path.display()),
            )
        })
}
