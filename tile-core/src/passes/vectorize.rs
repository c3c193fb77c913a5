//! Decides how each `T::parallel` nest is split over the block's threads
//! (CUDA) and records it in `PrimFunc::schedule` (`nests`, `fragments`).
//!
//! Nests are partitioned in contiguous chunks of `V` elements: element `e`
//! belongs to thread `(e / V) % threads`, in iteration `e / (V * threads)`.
//! For a nest over memory only, `V` is the widest power of two with
//! `V * elem_bytes <= 16` that divides the innermost extent and keeps every
//! contiguous access aligned. A nest with bounds guards keeps such a width
//! only where its guard is one `if` around the store that has the same value
//! for every lane of a chunk (`x + j < bound` with `x` and `bound` multiples
//! of `V`): the backend then tests it once per chunk, at the first lane, and
//! a ragged edge still moves whole vectors; otherwise it uses `V = 1` (the
//! lane-by-lane bounds-checked form). A nest whose accesses (and guard)
//! would be aligned at a wider width if some dynamic dims were multiples of
//! it also records that width: the backend tests the dims at run time and
//! runs the wider form when they are. For elements under 4 bytes a second
//! test of 4-byte words follows (the width whose dims are more often
//! multiples: rows at an even pitch off 16 bytes), before the narrow form.
//! A narrow (one-element) form of a nest that is one store over memory is
//! done in batches: each thread evaluates several iterations' values before
//! their stores, so their loads are in flight together (`NestPlan::batch`).
//!
//! Fragments are distributed with the same rule, so a fragment is only ever
//! touched by the thread that owns an element: every nest over a fragment uses
//! one `V`, the minimum any of them allows (found by a fixed point, since
//! nests share fragments). A nest that keeps several rows of a fragment per
//! thread (leading dims indexed by loops inside it) allows only a `V` that
//! divides its element count over the thread count. For these nests `V` is only the ownership: it comes
//! from the memory dtypes (registers have no width limit) and the extents,
//! never from guards or alignment. Each access is then a vector where it is
//! aligned at `V` (unconditionally, or under a run-time test of the dynamic
//! dims it needs, which picks between two forms with the same ownership), and
//! lane by lane where not, so a guarded edge and an unaligned shape keep the
//! fragment's layout.
//!
//! Runs last: it must see the final nests (`inject_bounds` splits some into
//! interior and edge, `insert_barriers` adds none inside them).

use crate::analysis::access::{accesses, aligned_dims, bufs_in, lets_in, uniform_in_chunk};
use crate::analysis::ownership::{has_thread_rows, inner_loops, thread_rows_access};
use crate::diag::Diagnostic;
use crate::ir::*;
use std::collections::{BTreeSet, HashMap};

pub fn run(mut f: PrimFunc) -> Result<PrimFunc, Diagnostic> {
    check_fragments(&f)?;
    f.schedule = plan(&f);
    Ok(f)
}

/// Each thread holds only its own elements of a register fragment, so every
/// nest over one (other than an accumulator's, which has its own layout)
/// must address it by the nest's own indices over its whole shape.
/// `demote_fragments` moved every fragment it could not prove so to shared
/// memory; what is left here is a user error.
fn check_fragments(f: &PrimFunc) -> Result<(), Diagnostic> {
    let mut nests = Vec::new();
    f.body.visit(&mut |s| {
        if let Some(n) = s.parallel_nest() {
            nests.push((s.loc(), n));
        }
    });
    // visit() also reaches the inner loops of a nest; check whole nests.
    let inner: BTreeSet<VarId> = nests
        .iter()
        .flat_map(|(_, n)| n.vars[1..].to_vec())
        .collect();
    let mut result = Ok(());
    for (loc, n) in nests.iter().filter(|(_, n)| !inner.contains(&n.vars[0])) {
        for (b, idx) in accesses(n.body) {
            let buf = f.buf(b);
            let shape = buf.const_shape().unwrap_or_default();
            // Accumulators and per-row fragments have layouts of their own
            // (`plan_mma` checked their accesses).
            let own_layout = buf
                .layout
                .is_some_and(|l| l.is_accumulator() || l.is_rows());
            let loops = inner_loops(n.body);
            if buf.scope != Scope::Fragment
                || own_layout
                || thread_rows_access(&shape, &idx, &n.vars, &n.extents, &loops, f.launch.threads)
                || result.is_err()
            {
                continue;
            }
            result = Err(Diagnostic::at(
                *loc,
                format!(
                    "kernel `{}`: fragment `{}` must be accessed as `{}[(i, j, ..)]` with the indices of a \
                     `T::parallel` over its whole shape {shape:?} (each thread holds only its own elements)",
                    f.name, buf.name, buf.name
                ),
            ));
        }
    }
    result
}

fn plan(f: &PrimFunc) -> Schedule {
    let mut nests = Vec::new();
    f.body.visit(&mut |s| {
        if let Some(n) = s.parallel_nest() {
            nests.push(n);
        }
    });
    // visit() also reaches inner loops of a nest; keep only outermost ones.
    let inner: BTreeSet<VarId> = nests.iter().flat_map(|n| n.vars[1..].to_vec()).collect();
    nests.retain(|n| !inner.contains(&n.vars[0]));

    struct Info {
        key: VarId,
        natural: i64,
        frags: Vec<BufId>,
        /// Over plain fragments only: `natural` is ownership, accesses vectorize where aligned.
        plain: bool,
    }
    let mut infos = Vec::new();
    let mut nest_cond: HashMap<VarId, (i64, Vec<VarId>)> = HashMap::new();
    let mut mid_cond: HashMap<VarId, (i64, Vec<VarId>)> = HashMap::new();
    // Words and batches cost registers and code; a GEMM-like kernel has
    // none to spare: its memory nests are epilogues and fallback copies
    // beside accumulators that fill the register budget (with either, ptxas
    // spilled in 18 of the examples' GEMM kernels). That is a kernel with a
    // tensor-core gemm, or with register fragments of 32 or more registers
    // a thread (a gemm lowered to loops: the sm_80 192-row tile, fp8 there).
    let (mut tensor_core, mut frag_regs) = (false, 0);
    f.body.visit(&mut |s| match s {
        Stmt::Gemm(_) => tensor_core = true,
        Stmt::Alloc { buf, .. } if f.buf(*buf).scope == Scope::Fragment => {
            let b = f.buf(*buf);
            let regs = b.const_elems() * (b.dtype.bytes() + 3) / 4;
            frag_regs += (regs + f.launch.threads - 1) / f.launch.threads;
        }
        _ => {}
    });
    let gemm_like = tensor_core || frag_regs >= 32;
    for n in &nests {
        let (bufs, guarded) = bufs_in(n.body);
        let frags: Vec<BufId> = bufs
            .iter()
            .copied()
            .filter(|&b| f.buf(b).scope == Scope::Fragment)
            .collect();
        // Accumulators and per-row fragments have their gemm's layout; their
        // nests keep the memory-nest rule (their epilogues print their own way).
        let plain = !frags.is_empty() && frags.iter().all(|&b| f.buf(b).layout.is_none());
        let max_bytes = bufs
            .iter()
            .filter(|&&b| !plain || f.buf(b).scope != Scope::Fragment)
            .map(|&b| f.buf(b).dtype.bytes())
            .max()
            .unwrap_or(2)
            .max(1);
        let mut v = (16 / max_bytes).max(1);
        let inner_ext = *n.extents.last().unwrap_or(&1);
        // Per-thread rows (a fragment's leading dims indexed inside the
        // nest) keep one owner per element only if `V * threads` divides the
        // nest's element count (`analysis::ownership`).
        let total: i64 = n.extents.iter().product();
        let rows = frags
            .iter()
            .any(|&b| has_thread_rows(&f.buf(b).const_shape().unwrap_or_default(), &n.extents));
        while v > 1 && (inner_ext % v != 0 || (rows && total % (v * f.launch.threads) != 0)) {
            v /= 2;
        }
        if plain {
            infos.push(Info {
                key: n.vars[0],
                natural: v,
                frags,
                plain,
            });
            continue;
        }
        // A bounds-guarded nest keeps a width only where its guard has one
        // value over each chunk (tested once, at the chunk's first lane).
        let guard = |w: i64| match guarded {
            false => Some(BTreeSet::new()),
            true => guard_dims(f, n, w),
        };
        let vmax = v;
        while v > 1 && !guard(v).is_some_and(|d| d.is_empty()) {
            v /= 2;
        }
        // Every contiguous access must stay aligned at the chosen width.
        let lets = lets_in(n.body);
        let inner_var = *n.vars.last().unwrap_or(&VarId(0));
        let memory: Vec<(BufId, Vec<Expr>)> = accesses(n.body)
            .into_iter()
            .filter(|(b, _)| matches!(f.buf(*b).scope, Scope::Global | Scope::Shared))
            .collect();
        // Unconditional width: every access that is contiguous at some width
        // stays aligned at this one.
        for (b, idx) in &memory {
            if aligned_dims(f, *b, idx, &lets, inner_var, 1).is_some_and(|d| d.is_empty()) {
                while v > 1
                    && !aligned_dims(f, *b, idx, &lets, inner_var, v).is_some_and(|d| d.is_empty())
                {
                    v /= 2;
                }
            }
        }
        // The dynamic dims that must be multiples of `w` for every access
        // contiguous in the inner loop to be aligned at `w` (and the guard
        // uniform over each chunk), if any choice of them can.
        let needs = |w: i64| -> Option<BTreeSet<VarId>> {
            let mut need = BTreeSet::new();
            for (b, idx) in &memory {
                if aligned_dims(f, *b, idx, &lets, inner_var, 1).is_none() {
                    continue; // not contiguous in the inner loop: lane by lane
                }
                need.extend(aligned_dims(f, *b, idx, &lets, inner_var, w)?);
            }
            need.extend(guard(w)?);
            Some(need)
        };
        // A wider width when dynamic row lengths are multiples of it.
        let mut wide = vmax;
        let mut need = BTreeSet::new();
        while wide > v {
            if let Some(d) = needs(wide) {
                need = d;
                break;
            }
            wide /= 2;
        }
        if wide > v && !need.is_empty() && frags.is_empty() {
            nest_cond.insert(n.vars[0], (wide, need.iter().copied().collect()));
            // Between them, 4-byte words for narrower elements: rows of
            // 2-byte elements at an even pitch off 16 bytes (a 1050-column
            // matrix) move two elements a load instead of one.
            let word = 4 / max_bytes;
            if word > v && word < wide && !gemm_like {
                if let Some(d) = needs(word).filter(|d| !d.is_empty()) {
                    mid_cond.insert(n.vars[0], (word, d.into_iter().collect()));
                }
            }
        }
        infos.push(Info {
            key: n.vars[0],
            natural: v,
            frags,
            plain,
        });
    }
    let mut frag_v: HashMap<BufId, i64> = HashMap::new();
    loop {
        let mut changed = false;
        for i in &infos {
            let v = i
                .frags
                .iter()
                .filter_map(|b| frag_v.get(b))
                .fold(i.natural, |a, &b| a.min(b));
            for b in &i.frags {
                if frag_v.get(b).is_none_or(|&x| x > v) {
                    frag_v.insert(*b, v);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let plans = infos
        .iter()
        .map(|i| {
            let vector = i
                .frags
                .iter()
                .filter_map(|b| frag_v.get(b))
                .fold(i.natural, |a, &b| a.min(b));
            let n = nests.iter().find(|n| n.vars[0] == i.key);
            let wide = match n {
                Some(n) if i.plain => same_width_test(f, n, vector),
                _ => nest_cond.remove(&i.key),
            };
            let none = BTreeSet::new();
            let vectorized = n.map_or(Vec::new(), |n| vector_accesses(f, n, vector, &none));
            let at = |tier: &Option<(i64, Vec<VarId>)>| match (tier, n) {
                (Some((w, dims)), Some(n)) => {
                    vector_accesses(f, n, *w, &dims.iter().copied().collect())
                }
                _ => Vec::new(),
            };
            let wide_vectorized = at(&wide);
            let mid = mid_cond.remove(&i.key);
            let mid_vectorized = at(&mid);
            (
                i.key,
                NestPlan {
                    vector,
                    wide,
                    vectorized,
                    wide_vectorized,
                    mid,
                    mid_vectorized,
                    pair_store_if: n.and_then(|n| pair_store_if(f, n)),
                    batch: match n {
                        Some(n) if vector == 1 && i.frags.is_empty() && !gemm_like => batch(f, n),
                        _ => 1,
                    },
                },
            )
        })
        .collect();
    Schedule {
        pipelines: f.schedule.pipelines.clone(),
        nests: plans,
        fragments: frag_v.into_iter().collect(),
    }
}

/// Iterations per batch of a one-element nest over memory whose body is one
/// store (`NestPlan::batch`): eight, or all of a thread's when fewer: eight
/// loads a thread in flight where a guarded store waiting for its own load
/// kept one (an odd-pitch pad ran at 0.42 of the copy bandwidth,
/// bench/RESULTS.md); their values and addresses take three registers each.
fn batch(f: &PrimFunc, n: &Nest<'_>) -> i64 {
    let Some(one) = n.one_store() else {
        return 1;
    };
    let Stmt::Store { buf, .. } = one.store else {
        return 1;
    };
    if !matches!(f.buf(*buf).scope, Scope::Global | Scope::Shared) {
        return 1;
    }
    let total: i64 = n.extents.iter().product();
    let iters = (total + f.launch.threads - 1) / f.launch.threads;
    iters.clamp(1, 8)
}

/// For a nest over fragments, chunked at `v`: the dynamic dims that, when
/// multiples of `v`, make more of its accesses vectors at `v` (tested at run
/// time; both forms own the same elements).
fn same_width_test(f: &PrimFunc, n: &Nest<'_>, v: i64) -> Option<(i64, Vec<VarId>)> {
    let (_, guarded) = bufs_in(n.body);
    if v == 1 {
        return None;
    }
    let lets = lets_in(n.body);
    let inner = *n.vars.last()?;
    // A bounds guard must have one value per chunk in the tested form too.
    let mut need = match guarded {
        false => BTreeSet::new(),
        true => guard_dims(f, n, v)?,
    };
    for (b, idx) in accesses(n.body) {
        if !matches!(f.buf(b).scope, Scope::Global | Scope::Shared)
            || f.buf(b).dtype.bytes() * v > 16
        {
            continue;
        }
        if let Some(d) = aligned_dims(f, b, &idx, &lets, inner, v) {
            need.extend(d);
        }
    }
    (!need.is_empty()).then(|| (v, need.into_iter().collect()))
}

/// For a nest whose body is one bounds-guarded store: the dynamic dims that
/// must be multiples of `w` for the guard to have one value over each chunk
/// of `w` lanes (`None`: it cannot be shown, or the body is another shape).
fn guard_dims(f: &PrimFunc, n: &Nest<'_>, w: i64) -> Option<BTreeSet<VarId>> {
    guard_dims_of(f, n, n.store_guard()?.0, w)
}

/// [`guard_dims`] of the guard `cond` of nest `n`.
fn guard_dims_of(f: &PrimFunc, n: &Nest<'_>, cond: &Expr, w: i64) -> Option<BTreeSet<VarId>> {
    let cond = cond.inline_lets(&lets_in(n.body));
    let inner = *n.vars.last()?;
    uniform_in_chunk(&cond, inner, w, &f.dims.iter().copied().collect())
}

/// The accesses of nest `n` done as vectors at width `v`, assuming the dims
/// in `assume` are multiples of `v`: in a nest of lets and one store (no
/// guards), every global or shared access contiguous along the innermost loop
/// and aligned to `v` elements.
fn vector_accesses(
    f: &PrimFunc,
    n: &Nest<'_>,
    v: i64,
    assume: &BTreeSet<VarId>,
) -> Vec<(BufId, Vec<Expr>)> {
    // Under a bounds guard (which `plan` kept only where it is uniform over
    // each chunk at width `v`), the statements it guards.
    let store_guard = n.store_guard();
    let items: Vec<&Stmt> = match (&store_guard, n.body) {
        (Some((_, pre, then)), _) => pre.iter().chain(then).copied().collect(),
        (None, Stmt::Seq(v)) => v.iter().collect(),
        (None, s) => vec![s],
    };
    let stores = items
        .iter()
        .filter(|s| matches!(s, Stmt::Store { .. }))
        .count();
    let simple = items
        .iter()
        .all(|s| matches!(s, Stmt::Let { .. } | Stmt::Store { .. }));
    // A guard must have one value per chunk under the same assumptions.
    let guard_ok = match &store_guard {
        Some((cond, _, _)) => guard_dims_of(f, n, cond, v).is_some_and(|d| d.is_subset(assume)),
        None => true,
    };
    if v == 1 || !simple || stores != 1 || !guard_ok {
        return Vec::new();
    }
    let lets = lets_in(n.body);
    let inner = *n.vars.last().unwrap_or(&VarId(0));
    let mut candidates = Vec::new();
    for s in &items {
        match s {
            Stmt::Store {
                buf, idx, value, ..
            } => {
                candidates.push((*buf, idx.clone()));
                value.visit(&mut |e| {
                    if let Expr::Load(b, i, _) = e {
                        candidates.push((*b, i.clone()));
                    }
                });
            }
            Stmt::Let { value, .. } => value.visit(&mut |e| {
                if let Expr::Load(b, i, _) = e {
                    candidates.push((*b, i.clone()));
                }
            }),
            _ => {}
        }
    }
    // A load under a select (`cond ? a[..] : 0`, a guarded read of a ragged
    // edge) is read lane by lane: as one vector it would read the whole
    // chunk, past the end of the tensor.
    let mut guarded = Vec::new();
    n.body.visit_exprs(&mut |e| {
        if let Expr::Select(_, a, b, _) = e {
            for branch in [a, b] {
                branch.visit(&mut |x| {
                    if let Expr::Load(b, i, _) = x {
                        guarded.push((*b, i.clone()));
                    }
                });
            }
        }
    });
    let mut out: Vec<(BufId, Vec<Expr>)> = Vec::new();
    for (b, idx) in candidates {
        if guarded.contains(&(b, idx.clone())) {
            continue;
        }
        // A chunk wider than 16 bytes (an f32 access in a nest chunked for
        // f16 fragments) stays lane by lane.
        let ok = matches!(f.buf(b).scope, Scope::Global | Scope::Shared)
            && f.buf(b).dtype.bytes() * v <= 16
            && aligned_dims(f, b, &idx, &lets, inner, v).is_some_and(|d| d.is_subset(assume));
        if ok && !out.iter().any(|(x, y)| *x == b && *y == idx) {
            out.push((b, idx));
        }
    }
    out
}

/// The dims to test for a nest over an accumulator whose body is one
/// (optionally bounds-guarded) store to global or shared memory contiguous in
/// the last nest variable, if it is.
fn pair_store_if(f: &PrimFunc, n: &Nest<'_>) -> Option<Vec<VarId>> {
    let over_accumulator = accesses(n.body)
        .iter()
        .any(|(b, _)| f.buf(*b).layout.is_some_and(Layout::is_accumulator));
    if !over_accumulator {
        return None;
    }
    let (_, store) = n.guarded_store()?;
    let (buf, idx) = match &store {
        Stmt::Store { buf, idx, .. } => (*buf, idx),
        // f32 atomic adds to global memory pair up too (one 8-byte vector
        // reduction on sm_90+, two scalar ones before).
        Stmt::AtomicAdd { buf, idx, .. }
            if f.buf(*buf).dtype == DType::F32 && f.buf(*buf).scope == Scope::Global =>
        {
            (*buf, idx)
        }
        _ => return None,
    };
    let b = f.buf(buf);
    // A swizzled tile permutes 16-byte chunks only: an element pair at an
    // even column stays contiguous.
    let layout_ok = match b.layout {
        None => true,
        Some(l) if l.is_swizzle() => b.dtype.bytes() == 2,
        Some(_) => false,
    };
    if !matches!(b.scope, Scope::Global | Scope::Shared) || !layout_ok {
        return None;
    }
    let inner = *n.vars.last()?;
    let dims = aligned_dims(f, buf, idx, &HashMap::new(), inner, 2)?;
    Some(dims.into_iter().collect())
}
