//! Chooses the tensor-core path for `T::gemm` (CUDA) and the layouts it
//! implies, before tile ops are lowered.
//!
//! A gemm qualifies when its operands are f16/bf16 tiles (B shared; A shared,
//! or a register fragment: converted from another accumulator, or loaded
//! whole, `plan_loaded_operands`) and its
//! accumulator an f32 fragment of a shape the instruction supports (for
//! `mma.sync`: 16 to 256 rows, a power of two, split in halves over the
//! warps, and 16 to 256 columns per warp in multiples of 16, as K is, so a
//! 48- or 176-wide score tile qualifies), and the
//! accumulator is only used whole (fill, copy, gemm), by its owner
//! (`T::parallel` over its shape, indexed by the loop variables), or reduced
//! along its rows. Then the accumulator gets `Layout::Mma` (registers as
//! `mma.sync` leaves them), shared operands `Layout::Swizzled`, and so does
//! every fragment of the same shape that shares a `T::parallel` nest or a
//! copy with the accumulator (its elements must sit in the same threads).
//! Otherwise the gemm stays on the portable path (a scalar dot product per
//! element). Several gemms may accumulate into one fragment: each one that
//! qualifies runs on tensor cores, the others stay portable over the same
//! register layout.
//!
//! An accumulator that is reduced along its rows, or kept beside per-row
//! values, takes the warps along M only when its rows allow ("full rows":
//! a row's registers then sit in one quad, and the reduction is two
//! shuffles); a converted accumulator used as a gemm's A operand needs it
//! (each warp must hold whole rows of A), and so does that gemm's
//! accumulator. The per-row fragments themselves get a row layout tied to
//! the accumulator (`rows`).
//!
//! On Hopper (`PrimFunc::arch` sm_90a) a gemm that `wgmma` can run takes it
//! instead: the accumulator gets `Layout::Wgmma` and the operands
//! `Layout::WgmmaOperand`, the layouts `wgmma`'s descriptors read. What rules
//! `wgmma` out (fewer than 64 rows per warpgroup, a block that is not whole
//! warpgroups, N over 256 or not a multiple of 8, shared operand rows that
//! are not whole 128-byte panels, an A operand in the registers of an
//! `mma.sync` accumulator) leaves the gemm on
//! `mma.sync` when that qualifies. Row fragments shared by a `wgmma` and an
//! `mma.sync` accumulator whose rows sit in different threads send the
//! `wgmma` one back to `mma.sync`.

mod rows;
mod why;

use why::{tensor_core_refusal, wgmma_refusal};

use crate::analysis::ownership::owner_access;
use crate::diag::Diagnostic;
use crate::ir::*;
use std::collections::BTreeSet;

/// Accumulators a planning round must leave alone (see [`run`]).
#[derive(Default)]
struct Avoid {
    /// Never on tensor cores.
    excluded: BTreeSet<BufId>,
    /// Not on `wgmma`.
    no_wgmma: BTreeSet<BufId>,
    /// Why an accumulator is in `excluded` or `no_wgmma` (for `Gemm::why`).
    why: std::collections::BTreeMap<BufId, String>,
}

impl Avoid {
    /// Adds `b` to `no_wgmma` (with `why`); whether it was new.
    fn no_wgmma(&mut self, b: BufId, why: String) -> bool {
        let new = self.no_wgmma.insert(b);
        if new {
            self.why.insert(b, why);
        }
        new
    }
}

pub fn run(f: PrimFunc) -> Result<PrimFunc, Diagnostic> {
    // Planning is retried with more accumulators left alone when a choice
    // turns out inconsistent; each retry grows a set, so it ends.
    let mut avoid = Avoid::default();
    loop {
        let mut g = f.clone();
        plan_accumulators(&mut g, &avoid);
        // A converted accumulator read as a gemm's A operand must feed a
        // tensor-core gemm: a portable one would read it across threads.
        let stranded = gemms(&g).into_iter().find(|x| {
            let a = g.buf(x.a);
            a.scope == Scope::Fragment
                && a.layout.is_some_and(Layout::is_accumulator)
                && !on_tensor_cores(&g, x)
        });
        if let Some(x) = stranded {
            // Off `wgmma` first (its order may not be the one `mma.sync`
            // reads A in), then off tensor cores.
            let (a, c) = (&g.buf(x.a).name, &g.buf(x.c).name);
            let why = format!(
                "`{a}` is the A operand in registers of a gemm into `{c}`, which cannot take wgmma"
            );
            if matches!(g.buf(x.a).layout, Some(Layout::Wgmma { .. })) && avoid.no_wgmma(x.a, why) {
                continue;
            }
            avoid.excluded.insert(x.a);
            avoid.why.insert(
                x.a,
                format!("`{a}` is the A operand in registers of a gemm into `{c}`, which cannot run on tensor cores"),
            );
            continue;
        }
        // A shared tile read by `wgmma` and by `mma.sync` would need two
        // layouts: the `wgmma` side moves to `mma.sync`.
        let (_, clash) = operand_layouts(&g);
        let off_wgmma: Vec<(BufId, BufId)> = gemms(&g)
            .iter()
            .filter(|x| matches!(g.buf(x.c).layout, Some(Layout::Wgmma { .. })))
            .filter_map(|x| {
                let t = [x.a, x.b].into_iter().find(|t| clash.contains(t))?;
                Some((x.c, t))
            })
            .collect();
        if off_wgmma.into_iter().fold(false, |new, (c, t)| {
            let why = format!(
                "shared tile `{}` is also read by an mma.sync gemm",
                g.buf(t).name
            );
            avoid.no_wgmma(c, why) | new
        }) {
            continue;
        }
        match rows::assign(&mut g)? {
            rows::Outcome::Done => {}
            rows::Outcome::NoWgmma(b) => {
                let why =
                    "its per-row fragments are tied to an mma.sync accumulator too".to_string();
                avoid.no_wgmma(b, why);
                continue;
            }
        }
        return Ok(finish(g, &avoid));
    }
}

fn gemms(f: &PrimFunc) -> Vec<Gemm> {
    let mut v = Vec::new();
    f.body.visit(&mut |s| {
        if let Stmt::Gemm(g) = s {
            v.push(g.clone());
        }
    });
    v
}

/// Gives each accumulator that qualifies (and its group) a tensor-core
/// layout. In rounds: a gemm whose A operand is a converted accumulator
/// waits until that accumulator is planned.
fn plan_accumulators(f: &mut PrimFunc, avoid: &Avoid) {
    plan_loaded_operands(f, avoid);
    let gemms = gemms(f);
    loop {
        let mut progress = false;
        for g in &gemms {
            if f.buf(g.c).layout.is_some() {
                continue;
            }
            let group = Group::of(f, g.c);
            if group.accs.iter().any(|b| avoid.excluded.contains(b)) || !group.valid(f) {
                continue;
            }
            let wgmma = group.accs.is_disjoint(&avoid.no_wgmma);
            let Some(acc_layout) = eligible(f, g, &group.policy(wgmma)) else {
                continue;
            };
            for &b in &group.accs {
                f.buffers[b.0 as usize].layout = Some(acc_layout);
            }
            progress = true;
        }
        if !progress {
            return;
        }
    }
}

/// A gemm's A operand in registers that no gemm accumulates into (a tile
/// loaded whole, `T::copy(q_s, q_f)`, then read by every iteration of a
/// loop) takes the register order that gemm reads A in: that of a `wgmma`
/// accumulator of its shape (one 64-row strip per warpgroup) where the gemm
/// can take `wgmma`, else that of an `mma.sync` one with full rows over the
/// warps. The copy into it then runs in that order, each thread loading the
/// elements it holds, and the gemm reads A from registers as it does a
/// converted accumulator (which leaves shared memory only B to read). Left
/// alone (no layout: the gemm stays portable) when anything else ties the
/// fragment to another one's layout.
fn plan_loaded_operands(f: &mut PrimFunc, avoid: &Avoid) {
    let all = gemms(f);
    let accs: BTreeSet<BufId> = all.iter().map(|g| g.c).collect();
    for g in &all {
        let a = f.buf(g.a);
        if a.scope != Scope::Fragment || a.layout.is_some() || accs.contains(&g.a) {
            continue;
        }
        let group = Group::of(f, g.a);
        let tied = group.accs.len() > 1 || !group.accs.is_disjoint(&avoid.excluded);
        if tied || !group.valid(f) {
            continue;
        }
        let wgmma = f.arch == CudaArch::Sm90a
            && !avoid.no_wgmma.contains(&g.a)
            && !avoid.no_wgmma.contains(&g.c)
            && !avoid.excluded.contains(&g.c);
        let layout = wgmma
            .then(|| wgmma_register_a_shape(f, g).map(|wgs| Layout::Wgmma { wgs }))
            .flatten()
            .or_else(|| {
                let warps = f.launch.threads / 32;
                register_a_shape(f, g).then_some(Layout::Mma { wm: warps, wn: 1 })
            });
        if let Some(l) = layout {
            f.buffers[g.a.0 as usize].layout = Some(l);
        }
    }
}

/// Every gemm that runs on tensor cores reads its shared operands in the
/// layout of its instruction; the choice is recorded on each gemm, with the
/// reason when it is not the fastest for the target (`Gemm::why`).
fn finish(mut f: PrimFunc, avoid: &Avoid) -> PrimFunc {
    // A gemm that does not qualify, or whose operand another tensor-core
    // gemm wants in another layout, but accumulates into a tensor-core
    // accumulator stays portable: its loop nest visits the accumulator's
    // registers.
    let (operand, clash) = operand_layouts(&f);
    for (&t, &l) in operand.iter().filter(|(t, _)| !clash.contains(*t)) {
        f.buffers[t.0 as usize].layout = Some(l);
    }
    // Decided on the whole function (a gemm's policy looks at its
    // accumulator's other uses), then written into the gemms; gemms that
    // agree in everything but their position get the same decision.
    let key = |g: &Gemm| (g.a, g.b, g.c, g.trans_a, g.trans_b, g.clear);
    let mut inst = std::collections::BTreeMap::new();
    for g in gemms(&f) {
        let clashes = clash.contains(&g.a) || clash.contains(&g.b);
        let chosen = match f.buf(g.c).layout {
            _ if clashes || !on_tensor_cores(&f, &g) => GemmInst::Loops,
            Some(Layout::Mma { wm, wn }) => GemmInst::MmaSync { wm, wn },
            Some(Layout::Wgmma { wgs }) => GemmInst::Wgmma { wgs },
            _ => GemmInst::Loops,
        };
        let why = match chosen {
            GemmInst::Wgmma { .. } => None,
            GemmInst::MmaSync { .. } if f.arch != CudaArch::Sm90a => None,
            GemmInst::MmaSync { .. } => avoid
                .why
                .get(&g.c)
                .cloned()
                .or_else(|| wgmma_refusal(&f, &g))
                .map(|w| format!("not wgmma: {w}")),
            GemmInst::Loops => Some(format!(
                "not on tensor cores: {}",
                if clashes {
                    "an operand is read by another tensor-core gemm in another layout".to_string()
                } else {
                    avoid
                        .why
                        .get(&g.c)
                        .cloned()
                        .or_else(|| tensor_core_refusal(&f, &g))
                        .or_else(|| no_warp_split(&f, &g))
                        .unwrap_or_else(|| {
                            format!(
                                "`{}` is used where its elements would have to move between threads",
                                f.buf(g.c).name
                            )
                        })
                }
            )),
        };
        inst.insert(key(&g), (chosen, why));
    }
    let body = std::mem::replace(&mut f.body, Stmt::Seq(Vec::new()));
    f.body = body.fold(&mut |s| match s {
        Stmt::Gemm(mut g) => {
            (g.inst, g.why) = inst.get(&key(&g)).cloned().unwrap_or_default();
            Stmt::Gemm(g)
        }
        s => s,
    });
    f
}

/// The layout each shared operand of a tensor-core gemm needs, and the
/// tiles two gemms want in different layouts.
fn operand_layouts(f: &PrimFunc) -> (std::collections::BTreeMap<BufId, Layout>, BTreeSet<BufId>) {
    let mut operand = std::collections::BTreeMap::new();
    let mut clash = BTreeSet::new();
    for g in gemms(f).iter().filter(|g| on_tensor_cores(f, g)) {
        let want = operand_layout(f.buf(g.c).layout);
        for t in [g.a, g.b] {
            if f.buf(t).scope != Scope::Shared {
                continue;
            }
            if *operand.entry(t).or_insert(want) != want {
                clash.insert(t);
            }
        }
    }
    (operand, clash)
}

/// An accumulator and the fragments that must share its register layout.
struct Group {
    /// Fragments of the accumulator's shape tied to it through nests and
    /// copies (the accumulator first).
    accs: BTreeSet<BufId>,
    /// The group is reduced along its rows, or its nests read 1-D
    /// fragments of its row count (per-row values).
    row_tied: bool,
    /// A member is a gemm's A operand in registers.
    feeds_register_a: bool,
    /// A gemm into the group reads its A operand from registers.
    reads_register_a: bool,
}

/// How a gemm may be arranged over the block's warps.
struct Policy {
    /// Warps along M only (see the module docs).
    full_rows: bool,
    /// Required: a gemm reads or feeds an A operand in registers.
    full_rows_required: bool,
    wgmma: bool,
}

impl Group {
    fn of(f: &PrimFunc, c: BufId) -> Group {
        let shape = f.buf(c).const_shape();
        let same = |b: BufId| f.buf(b).scope == Scope::Fragment && f.buf(b).const_shape() == shape;
        let rows = shape.as_ref().map_or(0, |s| s[0]);
        let per_row = |b: BufId| {
            let x = f.buf(b);
            x.scope == Scope::Fragment && x.const_shape() == Some(vec![rows])
        };
        let gemm_accs: BTreeSet<BufId> = gemms(f).iter().map(|g| g.c).collect();
        let mut accs = BTreeSet::from([c]);
        loop {
            let before = accs.len();
            // Per-row values of the group so far: reduced from a member, or
            // read beside one in a nest.
            let mut row_vals = BTreeSet::new();
            f.body.visit(&mut |s| {
                if let Stmt::Reduce(r) = s {
                    if accs.contains(&r.src) && per_row(r.dst) {
                        row_vals.insert(r.dst);
                    }
                }
            });
            for_each_nest(&f.body, &mut |n| {
                let used = fragments_in(f, n.body);
                if used.iter().any(|b| accs.contains(b)) {
                    row_vals.extend(used.iter().copied().filter(|&b| per_row(b)));
                }
            });
            // A fragment of the accumulator's shape in a nest with a member
            // must split like it; so must one in a nest with the group's
            // per-row values, unless a gemm of its own decides its layout
            // (`rows` then checks that both put rows in the same threads).
            for_each_nest(&f.body, &mut |n| {
                let used = fragments_in(f, n.body);
                let with_member = used.iter().any(|b| accs.contains(b));
                let with_rows = used.iter().any(|b| row_vals.contains(b));
                if with_member || with_rows {
                    let joins = |b: &BufId| same(*b) && (with_member || !gemm_accs.contains(b));
                    accs.extend(used.iter().copied().filter(joins));
                }
            });
            f.body.visit(&mut |s| {
                if let Stmt::Copy { src, dst, .. } = s {
                    let pair = [src.buf, dst.buf];
                    if pair.iter().any(|b| accs.contains(b)) && pair.iter().all(|&b| same(b)) {
                        accs.extend(pair);
                    }
                }
            });
            if accs.len() == before {
                break;
            }
        }
        let mut row_tied = false;
        let (mut feeds_register_a, mut reads_register_a) = (false, false);
        f.body.visit(&mut |s| match s {
            Stmt::Reduce(r) if accs.contains(&r.src) => row_tied = true,
            Stmt::Gemm(g) => {
                feeds_register_a |= accs.contains(&g.a);
                reads_register_a |= accs.contains(&g.c) && f.buf(g.a).scope == Scope::Fragment;
            }
            _ => {}
        });
        for_each_nest(&f.body, &mut |n| {
            let used = fragments_in(f, n.body);
            if used.iter().any(|b| accs.contains(b)) && used.iter().any(|&b| per_row(b)) {
                row_tied = true;
            }
        });
        Group {
            accs,
            row_tied,
            feeds_register_a,
            reads_register_a,
        }
    }

    /// Whether every member has the accumulator's shape, no layout yet, and
    /// only uses that keep it in its owners' registers.
    fn valid(&self, f: &PrimFunc) -> bool {
        let first = *self
            .accs
            .iter()
            .next()
            .expect("a group has its accumulator");
        let shape = f.buf(first).const_shape();
        shape.as_ref().is_some_and(|s| s.len() == 2)
            && self.accs.iter().all(|&b| {
                f.buf(b).const_shape() == shape
                    && f.buf(b).layout.is_none()
                    && owner_only(f, b, &f.body)
            })
    }

    fn policy(&self, wgmma: bool) -> Policy {
        let rs = self.feeds_register_a || self.reads_register_a;
        Policy {
            full_rows: self.row_tied || rs,
            full_rows_required: rs,
            wgmma,
        }
    }
}

/// Calls `visit` on every top-level `T::parallel` nest under `s` (not on the
/// inner loops of a nest).
pub(crate) fn for_each_nest<'a>(s: &'a Stmt, visit: &mut dyn FnMut(&Nest<'a>)) {
    if let Some(n) = s.parallel_nest() {
        visit(&n);
        return;
    }
    match s {
        Stmt::Seq(v) => v.iter().for_each(|x| for_each_nest(x, visit)),
        Stmt::For { body, .. } => for_each_nest(body, visit),
        Stmt::If { then, els, .. } => {
            for_each_nest(then, visit);
            if let Some(e) = els {
                for_each_nest(e, visit);
            }
        }
        _ => {}
    }
}

/// The operand layout the instruction behind an accumulator layout reads.
fn operand_layout(acc: Option<Layout>) -> Layout {
    match acc {
        Some(Layout::Wgmma { .. }) => Layout::WgmmaOperand,
        _ => Layout::Swizzled,
    }
}

/// Whether gemm `g` can run on tensor cores (after the layouts are chosen):
/// its accumulator got a tensor-core layout and it qualifies for that one.
fn on_tensor_cores(f: &PrimFunc, g: &Gemm) -> bool {
    let acc = f.buf(g.c).layout;
    if !acc.is_some_and(Layout::is_accumulator) {
        return false;
    }
    let wgmma = matches!(acc, Some(Layout::Wgmma { .. }));
    eligible(f, g, &Group::of(f, g.c).policy(wgmma)) == acc
}

fn fragments_in(f: &PrimFunc, s: &Stmt) -> Vec<BufId> {
    let mut v = Vec::new();
    s.visit_exprs(&mut |e| {
        if let Expr::Load(b, _, _) = e {
            v.push(*b);
        }
    });
    s.visit(&mut |x| {
        if let Stmt::Store { buf, .. } = x {
            v.push(*buf);
        }
    });
    v.retain(|&b| f.buf(b).scope == Scope::Fragment);
    v
}

/// The accumulator layout of a gemm on tensor cores, if it qualifies:
/// `wgmma`'s on Hopper when it can run it, else `mma.sync`'s.
fn eligible(f: &PrimFunc, g: &Gemm, policy: &Policy) -> Option<Layout> {
    let (a, b, c) = (f.buf(g.a), f.buf(g.b), f.buf(g.c));
    if a.dtype.is_f8() {
        // fp8 runs on `wgmma` only (sm_80 has no fp8 tensor cores): both
        // operands shared and K-major, one format, into f32.
        let free = |l: Option<Layout>| l.is_none_or(Layout::is_swizzle);
        let ok = f.arch == CudaArch::Sm90a
            && policy.wgmma
            && a.dtype == b.dtype
            && c.dtype == DType::F32
            && !g.clear
            && a.scope == Scope::Shared
            && b.scope == Scope::Shared
            && c.scope == Scope::Fragment
            && !g.trans_a
            && g.trans_b
            && free(a.layout)
            && free(b.layout);
        return if ok {
            wgmma_warpgroups(f, g).map(|wgs| Layout::Wgmma { wgs })
        } else {
            None
        };
    }
    let lowp = matches!(a.dtype, DType::F16 | DType::BF16);
    if !lowp || a.dtype != b.dtype || c.dtype != DType::F32 || g.clear {
        return None;
    }
    if b.scope != Scope::Shared || c.scope != Scope::Fragment {
        return None;
    }
    if a.scope == Scope::Fragment {
        if f.arch == CudaArch::Sm90a && policy.wgmma {
            if let Some(wgs) = wgmma_register_a(f, g) {
                return Some(Layout::Wgmma { wgs });
            }
        }
        return register_a(f, g).map(|wm| Layout::Mma { wm, wn: 1 });
    }
    if a.scope != Scope::Shared {
        return None;
    }
    // `T::annotate_layout(t, T::swizzled)` asks for the layout the gemm
    // reads without bank conflicts: on Hopper that is `wgmma`'s.
    let free = |l: Option<Layout>| l.is_none_or(Layout::is_swizzle);
    if !free(a.layout) || !free(b.layout) {
        return None;
    }
    if f.arch == CudaArch::Sm90a && policy.wgmma {
        // A converted accumulator with several 64-row strips per warpgroup
        // is read as A only by `wgmma` (one strip is also `mma.sync`'s
        // order); when the reading gemm cannot take `wgmma`, planning
        // retries with this accumulator off it (see [`run`]).
        if let Some(wgs) = wgmma_warpgroups(f, g) {
            return Some(Layout::Wgmma { wgs });
        }
    }
    mma_sync_warps(f, g, policy).map(|(wm, wn)| Layout::Mma { wm, wn })
}

/// The warps along M of a gemm whose A operand is a converted accumulator
/// in registers (`tl::gemm_rs`, `mma.sync`): A's registers are in the order
/// of `Mma { wm: warps, wn: 1 }`, or of a `wgmma` accumulator with one
/// 64-row strip per warpgroup (the same order), and the accumulator takes
/// the same full rows.
fn register_a(f: &PrimFunc, g: &Gemm) -> Option<i64> {
    let a = f.buf(g.a);
    let sa = a.const_shape()?;
    let warps = f.launch.threads / 32;
    let same_order = match a.layout? {
        Layout::Mma { wm, wn } => wm == warps && wn == 1,
        Layout::Wgmma { wgs } => sa[0] == 64 * wgs,
        _ => false,
    };
    (same_order && register_a_shape(f, g)).then_some(warps)
}

/// The warpgroups of a gemm whose A operand is a converted `wgmma`
/// accumulator in registers (`tl::wg::gemm_rs`): A's registers are those of
/// an m64 x K product per strip, which are exactly `wgmma`'s A operand
/// registers for its k16 steps, so A needs the same warpgroups and rows as
/// the accumulator, and B what any `wgmma` B operand needs.
fn wgmma_register_a(f: &PrimFunc, g: &Gemm) -> Option<i64> {
    let a = f.buf(g.a);
    let Some(Layout::Wgmma { wgs: a_wgs }) = a.layout else {
        return None;
    };
    let wgs = wgmma_register_a_shape(f, g)?;
    (wgs == a_wgs).then_some(wgs)
}

/// [`wgmma_register_a`] but for A's layout, which may not be chosen yet.
fn wgmma_register_a_shape(f: &PrimFunc, g: &Gemm) -> Option<i64> {
    let (a, b, c) = (f.buf(g.a), f.buf(g.b), f.buf(g.c));
    let (sa, sc) = (a.const_shape()?, c.const_shape()?);
    let lowp = matches!(a.dtype, DType::F16 | DType::BF16);
    let c_ok = c.scope == Scope::Fragment && c.dtype == DType::F32 && !g.clear;
    let ok = f.arch == CudaArch::Sm90a
        && a.scope == Scope::Fragment
        && lowp
        && c_ok
        && a.dtype == b.dtype
        && b.scope == Scope::Shared
        && !g.trans_a
        && sa.len() == 2
        && sc.len() == 2
        && sa[0] == sc[0];
    if !ok {
        return None;
    }
    wgmma_warpgroups(f, g)
}

/// [`register_a`] but for A's layout, which may not be chosen yet.
fn register_a_shape(f: &PrimFunc, g: &Gemm) -> bool {
    let (a, b, c) = (f.buf(g.a), f.buf(g.b), f.buf(g.c));
    let (Some(sa), Some(sb), Some(sc)) = (a.const_shape(), b.const_shape(), c.const_shape()) else {
        return false;
    };
    let lowp = matches!(a.dtype, DType::F16 | DType::BF16);
    let c_ok = c.scope == Scope::Fragment && c.dtype == DType::F32 && !g.clear;
    if sa.len() != 2 || sc.len() != 2 || a.scope != Scope::Fragment || !lowp || !c_ok {
        return false;
    }
    if a.dtype != b.dtype || b.scope != Scope::Shared {
        return false;
    }
    let (m, n, k) = (sc[0], sc[1], sa[1]);
    let b_rows = if g.trans_b { sb[1] } else { sb[0] };
    !g.trans_a
        && sa[0] == m
        && b_rows == k
        && swizzle_ok(&sb)
        && steps_of_16(k)
        && full_rows(f, m).is_some()
        && steps_of_16(n)
}

/// Whether reduction `r` of an accumulator runs over its rows into per-row
/// values: along the last dim, into a 1-D fragment or shared tile of the
/// row count.
fn rows_reducible(f: &PrimFunc, r: &Reduce) -> bool {
    let (src, dst) = (f.buf(r.src), f.buf(r.dst));
    let (Some(ss), Some(ds)) = (src.const_shape(), dst.const_shape()) else {
        return false;
    };
    ss.len() == 2
        && r.dim == 1
        && ds == [ss[0]]
        && matches!(dst.scope, Scope::Fragment | Scope::Shared)
        && dst.layout.is_none_or(Layout::is_rows)
}

fn pow2_at_least(x: i64, min: i64) -> bool {
    x >= min && x & (x - 1) == 0
}

/// Whether `x` is whole steps of 16 for `mma.sync`, at most 256: K in k16
/// steps, or a warp's accumulator columns in pairs of n8 fragments (one
/// `ldmatrix.x4` of B each). M stays a power of two (the warps split it in
/// halves); N and K need not (block_n = 176, say).
pub(super) fn steps_of_16(x: i64) -> bool {
    (16..=256).contains(&x) && x % 16 == 0
}

/// Whether a shared tile's rows suit `tl::smem_offset`'s swizzle for
/// `mma.sync`: whole 8-row groups of 16 to 256 2-byte elements.
fn swizzle_ok(s: &[i64]) -> bool {
    s.len() == 2 && s[0] % 8 == 0 && matches!(s[1], 16 | 32 | 64 | 128 | 256)
}

/// The warps along M when each warp takes whole rows of an `m`-row tile:
/// 16-row strips, a power of two per warp.
fn full_rows(f: &PrimFunc, m: i64) -> Option<i64> {
    let warps = f.launch.threads / 32;
    let ok = f.launch.threads % 32 == 0
        && warps >= 1
        && warps & (warps - 1) == 0
        && m % warps == 0
        && pow2_at_least(m / warps, 16);
    ok.then_some(warps)
}

/// The warpgroups of a gemm `wgmma` can run (sm_90a): the block is whole
/// warpgroups, each takes at least 64 of the accumulator's rows (one
/// m64nNk16 instruction per 64 rows, N a multiple of 8 up to 256), K is whole
/// k steps (16; 32 for fp8), and each operand tile's contiguous extent fits a
/// swizzle of the descriptors: rows of 32 or 64 bytes or whole 128-byte
/// panels, in 8-row groups.
fn wgmma_warpgroups(f: &PrimFunc, g: &Gemm) -> Option<i64> {
    let (a, b, c) = (f.buf(g.a), f.buf(g.b), f.buf(g.c));
    let (sa, sb, sc) = (a.const_shape()?, b.const_shape()?, c.const_shape()?);
    let threads = f.launch.threads;
    let (m, n) = (sc[0], sc[1]);
    let k = if g.trans_a { sa[0] } else { sa[1] };
    let wgs = threads / 128;
    let ok = threads % 128 == 0
        && wgs >= 1
        && m % (64 * wgs) == 0
        && n % 8 == 0
        && n <= 256
        && k % wgmma_k(a.dtype) == 0
        && wgmma_operand_fits(a, &sa)
        && wgmma_operand_fits(b, &sb);
    ok.then_some(wgs)
}

/// Whether operand tile `t` of shape `s` suits `wgmma`'s descriptors: whole
/// 8-row groups of rows with a swizzle ([`wgmma_cols`]). A in registers (a
/// converted accumulator) has no swizzle to fit.
pub(super) fn wgmma_operand_fits(t: &Buffer, s: &[i64]) -> bool {
    t.scope == Scope::Fragment || (s.len() == 2 && s[0] % 8 == 0 && wgmma_cols(s[1], t.dtype))
}

/// Whether a tile's contiguous extent of `cols` elements of `t` has a
/// `wgmma` swizzle (see `Layout::WgmmaOperand`): 32 or 64 bytes, or whole
/// 128-byte panels.
pub fn wgmma_cols(cols: i64, t: DType) -> bool {
    let bytes = cols * t.bytes();
    matches!(bytes, 32 | 64) || (bytes > 0 && bytes % 128 == 0)
}

/// The K of one `wgmma` instruction (32 bytes of each operand row).
pub fn wgmma_k(t: DType) -> i64 {
    32 / t.bytes()
}

/// The warp arrangement of a gemm `mma.sync` can run (`tl::gemm_ss`).
fn mma_sync_warps(f: &PrimFunc, g: &Gemm, policy: &Policy) -> Option<(i64, i64)> {
    // Whole warps only: every arrangement below counts warps.
    if f.launch.threads % 32 != 0 {
        return None;
    }
    let (a, b, c) = (f.buf(g.a), f.buf(g.b), f.buf(g.c));
    let (sa, sb, sc) = (a.const_shape()?, b.const_shape()?, c.const_shape()?);
    let (m, n) = (sc[0], sc[1]);
    let k = if g.trans_a { sa[0] } else { sa[1] };
    if !swizzle_ok(&sa) || !swizzle_ok(&sb) || !steps_of_16(k) {
        return None;
    }
    if !matches!(m, 16 | 32 | 64 | 128 | 256) || !steps_of_16(n) {
        return None;
    }
    if policy.full_rows {
        match full_rows(f, m) {
            Some(warps) => return Some((warps, 1)),
            None if policy.full_rows_required => return None,
            None => {
                // As many warps along M as 16-row strips allow, the rest
                // along N: chosen from M alone, so accumulators of one row
                // count that share per-row values split rows alike.
                let warps = f.launch.threads / 32;
                if warps == 0 {
                    return None;
                }
                let wm = (0..=warps.trailing_zeros())
                    .rev()
                    .map(|e| 1i64 << e)
                    .find(|&wm| m % wm == 0 && pow2_at_least(m / wm, 16))?;
                let wn = warps / wm;
                let ok = warps & (warps - 1) == 0 && n % wn == 0 && steps_of_16(n / wn);
                return ok.then_some((wm, wn));
            }
        }
    }
    let warps = f.launch.threads / 32;
    if warps == 0 || warps & (warps - 1) != 0 {
        return None;
    }
    let fits = |(wm, wn): (i64, i64)| {
        m % wm == 0 && pow2_at_least(m / wm, 16) && n % wn == 0 && steps_of_16(n / wn)
    };
    // The measured arrangements first: the table below, with short tiles
    // (16 or 32 rows, decode-sized M) moving warps from M to N until each
    // warp has a whole 16-row strip.
    let table = match warps {
        1 => Some((1, 1)),
        2 if m >= n => Some((2, 1)),
        2 => Some((1, 2)),
        4 => Some((2, 2)),
        8 if m >= n => Some((4, 2)),
        8 => Some((2, 4)),
        _ => None,
    };
    if let Some((mut wm, mut wn)) = table {
        while m / wm < 16 && wm > 1 {
            wm /= 2;
            wn *= 2;
        }
        if fits((wm, wn)) {
            return Some((wm, wn));
        }
    }
    // Otherwise (or for 16 or 32 warps) any split that fits (128 x 176
    // over 8 warps: 88 columns each are not 16-column steps, 16 rows each
    // by 176 are), the one
    // whose warp tile reads the least shared memory per k step (rows of A
    // plus columns of B), and of equals the one with more warps along M.
    (0..=warps.trailing_zeros())
        .rev()
        .map(|e| (1i64 << e, warps >> e))
        .filter(|&s| fits(s))
        .min_by_key(|&(wm, wn)| m / wm + n / wn)
}

/// Why `mma.sync` has no warp arrangement for gemm `g` even when its
/// accumulator's rows are free to split (so the refusal is not about how
/// the accumulator is used): e.g. 48 columns over two warps along N.
fn no_warp_split(f: &PrimFunc, g: &Gemm) -> Option<String> {
    let free = Policy {
        full_rows: false,
        full_rows_required: false,
        wgmma: false,
    };
    let shape = f.buf(g.c).const_shape()?;
    mma_sync_warps(f, g, &free).is_none().then(|| {
        format!(
            "no split of the block's {} warps over the {}x{} accumulator gives every warp 16-row strips (a power of two) and whole 16-column steps",
            f.launch.threads / 32,
            shape[0],
            shape[1]
        )
    })
}

/// Whether every use of fragment `b` keeps it in its owners' registers.
fn owner_only(f: &PrimFunc, b: BufId, s: &Stmt) -> bool {
    let shape = f.buf(b).const_shape().unwrap_or_default();
    let whole = |r: &Region| {
        r.buf != b
            || (r.origin.iter().all(|o| o.as_int() == Some(0))
                && r.extent
                    .iter()
                    .map(Expr::as_int)
                    .collect::<Option<Vec<_>>>()
                    .as_deref()
                    == Some(&shape[..]))
    };
    if let Some(Nest {
        vars,
        extents: ext,
        body,
    }) = s.parallel_nest()
    {
        let mut ok = true;
        body.visit_exprs(&mut |e| {
            if let Expr::Load(x, idx, _) = e {
                ok &= *x != b || owner_access(&shape, idx, &vars, &ext);
            }
        });
        body.visit(&mut |x| match x {
            Stmt::Store { buf, idx, .. } => {
                ok &= *buf != b || owner_access(&shape, idx, &vars, &ext)
            }
            Stmt::Reduce(r) => ok &= r.src != b && r.dst != b,
            _ => {}
        });
        return ok;
    }
    match s {
        Stmt::Seq(v) => v.iter().all(|x| owner_only(f, b, x)),
        Stmt::For { body, .. } => owner_only(f, b, body),
        Stmt::If {
            cond, then, els, ..
        } => {
            !cond.visit_uses(b)
                && owner_only(f, b, then)
                && els.as_ref().is_none_or(|e| owner_only(f, b, e))
        }
        Stmt::Copy { src, dst, .. } => whole(src) && whole(dst),
        Stmt::Fill { dst, value, .. } => whole(dst) && !value.visit_uses(b),
        // Read as A in registers by a gemm that can take it so.
        Stmt::Gemm(g) => {
            g.b != b
                && (g.a != b || register_a_shape(f, g) || wgmma_register_a_shape(f, g).is_some())
        }
        // Reduced along its rows into per-row values (`rows_reducible`).
        Stmt::Reduce(r) => r.dst != b && (r.src != b || rows_reducible(f, r)),
        // Added whole into memory: lowered like a copy, each element by its owner.
        Stmt::AtomicAddTile { src, dst, .. } => whole(src) && dst.buf != b,
        other => {
            let mut used = false;
            other.visit_exprs(&mut |e| used |= matches!(e, Expr::Load(x, _, _) if *x == b));
            if let Stmt::Store { buf, .. } | Stmt::AtomicAdd { buf, .. } = other {
                used |= *buf == b;
            }
            !used
        }
    }
}

#[cfg(test)]
mod tests;
