//! Checks on a `PrimFunc`, run after the frontend and after every pass, so
//! that malformed IR never reaches a backend.
//!
//! Structure, at every stage: every handle is valid, every variable is
//! defined before use, on-chip buffers are allocated before use with
//! constant shapes, stores match their buffer's dtype and rank, names are
//! unique (the script and the reader rely on it).
//!
//! Then what the stage allows ([`Stage`]; `stage_rules` lists each rule
//! with the pass that establishes or relies on it).

use crate::diag::Diagnostic;
use crate::ir::*;
use crate::passes::PassId;
use crate::Target;
use proc_macro2::Span;
use std::collections::HashSet;

/// Where in the pipeline a function is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// As the frontend makes it, before any pass (for either target).
    Frontend,
    /// After a pass of the pipeline for a target.
    After(PassId, Target),
}

impl Stage {
    /// Whether pass `p` has run by this stage.
    pub fn ran(self, p: PassId) -> bool {
        match self {
            Stage::Frontend => false,
            Stage::After(q, t) => p <= q && p.runs_for(t),
        }
    }

    pub fn target(self) -> Option<Target> {
        match self {
            Stage::Frontend => None,
            Stage::After(_, t) => Some(t),
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stage::Frontend => f.write_str("from the frontend"),
            Stage::After(p, t) => write!(
                f,
                "after `{}` ({})",
                p.name(),
                crate::passes::target_name(*t)
            ),
        }
    }
}

/// The frontend's check: [`verify_at`] at [`Stage::Frontend`].
pub fn verify(f: &PrimFunc) -> Result<(), Diagnostic> {
    verify_at(f, Stage::Frontend)
}

/// Checks `f`'s structure and what `stage` allows.
pub fn verify_at(f: &PrimFunc, stage: Stage) -> Result<(), Diagnostic> {
    let fail = |msg: String| {
        Diagnostic::new(
            Span::call_site(),
            format!("internal error: invalid IR in `{}` {stage}: {msg}", f.name),
        )
    };
    if let Stage::After(p, t) = stage {
        if !p.runs_for(t) {
            return Err(fail(format!("`{}` does not run for this target", p.name())));
        }
    }
    structure(f).map_err(fail)?;
    stage_rules(f, stage).map_err(fail)
}

/// The stage-independent checks.
fn structure(f: &PrimFunc) -> Result<(), String> {
    let mut v = Verifier {
        f,
        defined: HashSet::new(),
        allocated: HashSet::new(),
    };
    let mut names = HashSet::new();
    for name in f
        .vars
        .iter()
        .map(|v| &v.name)
        .chain(f.buffers.iter().map(|b| &b.name))
    {
        if !names.insert(name) {
            return v.fail(format!("the name `{name}` is used twice"));
        }
    }
    for &d in f.dims.iter().chain(&f.scalars) {
        v.defined.insert(d);
    }
    for &b in &f.params {
        if f.buf(b).scope != Scope::Global {
            return v.fail(format!("parameter `{}` is not global", f.buf(b).name));
        }
        v.allocated.insert(b);
    }
    for g in &f.launch.grid {
        v.expr(g)?;
    }
    if f.launch.grid.is_empty()
        || f.launch.grid.len() > 3
        || f.launch.grid.len() != f.launch.block_vars.len()
    {
        return v.fail("the launch has 1 to 3 grid dims, one block variable each".into());
    }
    for &b in &f.launch.block_vars {
        v.defined.insert(b);
    }
    v.stmt(&f.body)
}

struct Verifier<'a> {
    f: &'a PrimFunc,
    defined: HashSet<VarId>,
    allocated: HashSet<BufId>,
}

impl Verifier<'_> {
    fn fail<T>(&self, msg: String) -> Result<T, String> {
        Err(msg)
    }

    fn buf(&self, b: BufId) -> Result<&Buffer, String> {
        if (b.0 as usize) >= self.f.buffers.len() {
            return self.fail(format!("buffer handle {} out of range", b.0));
        }
        if !self.allocated.contains(&b) {
            return self.fail(format!(
                "buffer `{}` used before allocation",
                self.f.buf(b).name
            ));
        }
        Ok(self.f.buf(b))
    }

    fn expr(&self, e: &Expr) -> Result<(), String> {
        let mut err = None;
        e.visit(&mut |x| {
            if err.is_some() {
                return;
            }
            match x {
                Expr::Var(v, t) => {
                    if (v.0 as usize) >= self.f.vars.len() || !self.defined.contains(v) {
                        err = Some(format!("variable #{} used before definition", v.0));
                    } else if self.f.var(*v).dtype != *t {
                        err = Some(format!(
                            "variable `{}` has dtype {} but is used as {t}",
                            self.f.var(*v).name,
                            self.f.var(*v).dtype
                        ));
                    }
                }
                Expr::Load(b, idx, t) => match self.buf(*b) {
                    Ok(buf) => {
                        if buf.shape.len() != idx.len() || buf.dtype != *t {
                            err = Some(format!(
                                "load from `{}` has the wrong rank or dtype",
                                buf.name
                            ));
                        }
                    }
                    Err(m) => err = Some(m),
                },
                _ => {}
            }
        });
        match err {
            Some(m) => self.fail(m),
            None => Ok(()),
        }
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), String> {
        match s {
            Stmt::Seq(v) => {
                let (d, a) = (self.defined.clone(), self.allocated.clone());
                for s in v {
                    self.stmt(s)?;
                }
                self.defined = d;
                self.allocated = a;
            }
            Stmt::Let { var, value } | Stmt::Local { var, init: value } => {
                self.expr(value)?;
                if self.f.var(*var).dtype != value.dtype() {
                    return self.fail(format!(
                        "`{}` is bound to a value of another dtype",
                        self.f.var(*var).name
                    ));
                }
                self.defined.insert(*var);
            }
            Stmt::Assign { var, value } => {
                self.expr(value)?;
                if !self.defined.contains(var) || self.f.var(*var).dtype != value.dtype() {
                    return self.fail(format!("bad assignment to `{}`", self.f.var(*var).name));
                }
            }
            Stmt::Store {
                buf, idx, value, ..
            } => {
                let b = self.buf(*buf)?;
                if b.shape.len() != idx.len() || b.dtype != value.dtype() {
                    return self.fail(format!("store to `{}` has the wrong rank or dtype", b.name));
                }
                for i in idx {
                    self.expr(i)?;
                }
                self.expr(value)?;
            }
            Stmt::For {
                var,
                start,
                extent,
                body,
                ..
            } => {
                self.expr(start)?;
                self.expr(extent)?;
                let had = self.defined.insert(*var);
                self.stmt(body)?;
                if had {
                    self.defined.remove(var);
                }
            }
            Stmt::If {
                cond, then, els, ..
            } => {
                self.expr(cond)?;
                if cond.dtype() != DType::Bool {
                    return self.fail("if condition is not bool".into());
                }
                self.stmt(then)?;
                if let Some(e) = els {
                    self.stmt(e)?;
                }
            }
            Stmt::Alloc { buf, .. } => {
                let b = self.f.buf(*buf);
                if b.scope == Scope::Global || b.const_shape().is_none() {
                    return self.fail(format!(
                        "allocation `{}` is global or has a dynamic shape",
                        b.name
                    ));
                }
                self.allocated.insert(*buf);
            }
            Stmt::Copy { src, dst, .. } | Stmt::AtomicAddTile { src, dst, .. } => {
                for r in [src, dst] {
                    let b = self.buf(r.buf)?;
                    if r.origin.len() != b.shape.len() || r.extent.len() != b.shape.len() {
                        return self
                            .fail(format!("copy region of `{}` has the wrong rank", b.name));
                    }
                    for e in r.origin.iter().chain(&r.extent) {
                        self.expr(e)?;
                    }
                }
            }
            Stmt::Fill { dst, value, .. } => {
                self.buf(dst.buf)?;
                self.expr(value)?;
            }
            Stmt::Gemm(g) => {
                self.buf(g.a)?;
                self.buf(g.b)?;
                self.buf(g.c)?;
            }
            Stmt::Reduce(r) => {
                let (src, dst) = (self.buf(r.src)?, self.buf(r.dst)?);
                let (ss, ds) = (src.const_shape(), dst.const_shape());
                let ok = match (ss, ds) {
                    (Some(ss), Some(ds)) if r.dim < ss.len() => {
                        let mut want: Vec<i64> = ss.clone();
                        want.remove(r.dim);
                        if want.is_empty() {
                            want.push(1);
                        }
                        want == ds
                    }
                    _ => false,
                };
                if !ok {
                    return self.fail(format!(
                        "reduction from `{}` into `{}` has mismatched shapes",
                        src.name, dst.name
                    ));
                }
            }
            Stmt::AtomicAdd {
                buf, idx, value, ..
            } => {
                let b = self.buf(*buf)?;
                if b.shape.len() != idx.len() || b.dtype != value.dtype() {
                    return self.fail(format!(
                        "atomic add to `{}` has the wrong rank or dtype",
                        b.name
                    ));
                }
                for i in idx {
                    self.expr(i)?;
                }
                self.expr(value)?;
            }
            Stmt::Print { value, .. } => self.expr(value)?,
            Stmt::Barrier => {}
        }
        Ok(())
    }
}

/// What `stage` allows beyond the structure; each rule says which pass it
/// follows from.
fn stage_rules(f: &PrimFunc, stage: Stage) -> Result<(), String> {
    let on_c = stage.target() == Some(Target::C);
    for b in &f.buffers {
        layout_rule(f, b, stage)?;
    }
    let mut thread = false;
    f.body
        .visit_exprs(&mut |e| thread |= matches!(e, Expr::Thread));
    if thread && (on_c || !f.cuda_only) {
        return Err("the thread index is used in a function built for the CPU".into());
    }
    // `inject_bounds` resolves every `padded` (the backends cannot print it).
    let mut padded = false;
    f.body
        .visit_exprs(&mut |e| padded |= matches!(e, Expr::Call(Intrin::Padded, ..)));
    if padded && stage.ran(PassId::InjectBounds) {
        return Err("a `padded` value after `inject_bounds`".into());
    }
    visit_units(&f.body, false, &mut |s, inside| match s {
        // `insert_barriers` (CUDA only) places every barrier, never where
        // only some threads would reach it.
        Stmt::Barrier if !stage.ran(PassId::InsertBarriers) => {
            Err("a barrier before `insert_barriers` placed any".into())
        }
        Stmt::Barrier if inside => Err("a barrier inside a `T.Parallel` loop or an `if`".into()),
        s if stage.ran(PassId::LowerTileOps) => lowered_rule(f, s, on_c),
        _ => Ok(()),
    })?;
    if stage.ran(PassId::DemoteFragments) {
        demoted_rule(f)?;
    }
    pool_rule(f, stage)
}

/// Layouts: `T::annotate_layout` and `plan_mma` swizzle 2-D shared tiles of
/// 2-byte elements; only `plan_mma` gives a fragment the tensor-core layout,
/// for the block's warps; global tensors keep theirs.
fn layout_rule(f: &PrimFunc, b: &Buffer, stage: Stage) -> Result<(), String> {
    let name = &b.name;
    match b.layout {
        None => Ok(()),
        Some(_) if b.scope == Scope::Global => Err(format!("global buffer `{name}` has a layout")),
        Some(Layout::Swizzled) => {
            if b.scope != Scope::Shared || b.shape.len() != 2 || b.dtype.bytes() != 2 {
                return Err(format!(
                    "`{name}` is swizzled but not a 2-D shared tile of 2-byte elements"
                ));
            }
            Ok(())
        }
        Some(Layout::Mma { wm, wn }) => {
            if !stage.ran(PassId::PlanMma) {
                return Err(format!(
                    "`{name}` has the tensor-core layout before `plan_mma` chose it"
                ));
            }
            if b.scope != Scope::Fragment || b.shape.len() != 2 {
                return Err(format!(
                    "`{name}` has the tensor-core layout but is not a 2-D fragment"
                ));
            }
            if wm * wn * 32 != f.launch.threads {
                return Err(format!(
                    "`{name}`'s tensor-core layout spreads over {wm}x{wn} warps, the block has {} threads",
                    f.launch.threads
                ));
            }
            Ok(())
        }
        Some(Layout::WgmmaOperand) => {
            let shape = b.const_shape().unwrap_or_default();
            let panels = shape.len() == 2
                && shape[0] % 8 == 0
                && crate::passes::plan_mma::wgmma_cols(shape[1], b.dtype);
            let elems = b.dtype.bytes() == 2 || b.dtype.is_f8();
            if b.scope != Scope::Shared || !elems || !panels {
                return Err(format!(
                    "`{name}` has wgmma's layout but is not a 2-D shared tile of 2-byte or fp8 elements with a wgmma swizzle"
                ));
            }
            Ok(())
        }
        Some(l @ (Layout::MmaRows { .. } | Layout::WgmmaRows { .. })) => {
            let warps = match l {
                Layout::MmaRows { wm, wn } => wm * wn,
                Layout::WgmmaRows { wgs } => wgs * 4,
                _ => unreachable!(),
            };
            if !stage.ran(PassId::PlanMma) {
                return Err(format!(
                    "`{name}` follows an accumulator's rows before `plan_mma` chose it"
                ));
            }
            if matches!(l, Layout::WgmmaRows { .. }) && f.arch != CudaArch::Sm90a {
                return Err(format!(
                    "`{name}` follows wgmma's rows outside a Hopper function"
                ));
            }
            if b.scope != Scope::Fragment || b.shape.len() != 1 || warps * 32 != f.launch.threads {
                return Err(format!(
                    "`{name}` follows an accumulator's rows but is not a 1-D fragment of a block of {} warps",
                    warps
                ));
            }
            Ok(())
        }
        Some(Layout::Wgmma { wgs }) => {
            if !stage.ran(PassId::PlanMma) || f.arch != CudaArch::Sm90a {
                return Err(format!(
                    "`{name}` has wgmma's layout outside a Hopper function planned by `plan_mma`"
                ));
            }
            if b.scope != Scope::Fragment || b.shape.len() != 2 || wgs * 128 != f.launch.threads {
                return Err(format!(
                    "`{name}`'s wgmma layout needs a 2-D fragment and {wgs} warpgroups, the block has {} threads",
                    f.launch.threads
                ));
            }
            Ok(())
        }
    }
}

/// After `lower_tile_ops`: the CPU keeps no tile op; CUDA keeps only the
/// gemms `plan_mma` put on tensor cores, the copies `lower_tile_ops` chose an
/// instruction for (each still a tile copy) and reductions.
fn lowered_rule(f: &PrimFunc, s: &Stmt, on_c: bool) -> Result<(), String> {
    let kept = match s {
        Stmt::Fill { .. } => Some("`T.fill`"),
        Stmt::AtomicAddTile { .. } => Some("`T.atomic_add` of a tile"),
        Stmt::Copy { .. } if on_c => Some("`T.copy`"),
        Stmt::Copy { inst, .. } if *inst == CopyInst::Loops => {
            Some("`T.copy` with no instruction chosen")
        }
        Stmt::Copy { src, dst, .. }
            if !crate::passes::lower_tile_ops::is_tile_copy(f, src, dst) =>
        {
            Some("`T.copy` that is not a tile copy")
        }
        Stmt::Gemm(_) if on_c => Some("`T.gemm`"),
        Stmt::Gemm(g) if g.inst == GemmInst::Loops => Some("`T.gemm` not on tensor cores"),
        Stmt::Reduce(_) if on_c => Some("`T.reduce_*`"),
        _ => None,
    };
    match kept {
        Some(what) => Err(format!("a {what} after `lower_tile_ops`")),
        None => Ok(()),
    }
}

/// After `demote_fragments`: every fragment left is touched only by the
/// threads holding its elements (running the pass again moves nothing), and
/// a reduction reads a fragment only in the form CUDA reduces in registers
/// and writes shared memory (or, from an accumulator, per-row registers).
fn demoted_rule(f: &PrimFunc) -> Result<(), String> {
    let mut bad = None;
    f.body.visit(&mut |s| {
        if let Stmt::Reduce(r) = s {
            let (src, dst) = (f.buf(r.src), f.buf(r.dst));
            // An accumulator reduced along its rows into per-row registers
            // or shared memory (`plan_mma`).
            let acc = src.layout.is_some_and(Layout::is_accumulator);
            let rows = dst.layout.is_some_and(Layout::is_rows);
            if (dst.scope == Scope::Fragment && !(acc && rows))
                || (src.scope == Scope::Fragment
                    && !acc
                    && !crate::passes::demote_fragments::register_reducible(f, r))
            {
                bad.get_or_insert(format!(
                    "the reduction of `{}` into `{}` uses a fragment that `demote_fragments` moves to shared memory",
                    src.name, dst.name
                ));
            }
        }
    });
    if let Some(m) = bad {
        return Err(m);
    }
    match crate::passes::demote_fragments::demoted(f).first() {
        Some(&b) => Err(format!(
            "fragment `{}` is touched by threads that do not hold its elements",
            f.buf(b).name
        )),
        None => Ok(()),
    }
}

/// The shared pool: empty until `merge_shared` (CUDA) places every shared
/// buffer in it, at aligned offsets, each with room for its tile, all
/// within the pool's size.
fn pool_rule(f: &PrimFunc, stage: Stage) -> Result<(), String> {
    if !stage.ran(PassId::MergeShared) {
        if f.smem != SharedPool::default() {
            return Err("shared memory is placed before `merge_shared`".into());
        }
        return Ok(());
    }
    let mut shared = std::collections::BTreeSet::new();
    f.body.visit(&mut |s| {
        if let Stmt::Alloc { buf, .. } = s {
            if f.buf(*buf).scope == Scope::Shared {
                shared.insert(*buf);
            }
        }
    });
    for b in &shared {
        if !f.smem.slots.contains_key(b) {
            return Err(format!(
                "shared buffer `{}` has no place in the pool",
                f.buf(*b).name
            ));
        }
    }
    let align = crate::passes::merge_shared::ALIGN;
    for (&b, &(off, bytes)) in &f.smem.slots {
        let buf = f.buf(b);
        if !shared.contains(&b) {
            return Err(format!(
                "`{}` has a place in the pool but is not an allocated shared buffer",
                buf.name
            ));
        }
        let tile = buf.const_bytes();
        if off < 0 || off % align != 0 || bytes < tile || off + bytes > f.smem.bytes {
            return Err(format!(
                "`{}` sits at bytes [{off}, {}) of a {}-byte pool: it needs {tile} bytes at a multiple of {align}, inside the pool",
                buf.name,
                off + bytes,
                f.smem.bytes
            ));
        }
    }
    Ok(())
}

/// Calls `check` on every statement with whether it sits inside a
/// `T.Parallel` loop or an `if`.
fn visit_units(
    s: &Stmt,
    inside: bool,
    check: &mut dyn FnMut(&Stmt, bool) -> Result<(), String>,
) -> Result<(), String> {
    check(s, inside)?;
    match s {
        Stmt::Seq(v) => v.iter().try_for_each(|x| visit_units(x, inside, check)),
        Stmt::For { kind, body, .. } => {
            visit_units(body, inside || *kind == ForKind::Parallel, check)
        }
        Stmt::If { then, els, .. } => {
            visit_units(then, true, check)?;
            els.iter().try_for_each(|e| visit_units(e, true, check))
        }
        _ => Ok(()),
    }
}
