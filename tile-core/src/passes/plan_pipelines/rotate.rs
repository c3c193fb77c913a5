//! The rotation of a warp-specialized pipeline whose consumers run two
//! `wgmma` gemms (`Pipeline::rotate`): attention's `S = Q·Kᵀ`, register
//! work on `S` (the online softmax), then `O += P·V` last. Run as written,
//! each warpgroup's tensor cores idle during the softmax and its CUDA cores
//! during both gemms. Rotated (FA3's intra-warpgroup overlap), iteration `i`
//! issues `S(i)`, then `O += P(i-1)·V(i-1)`, waits only for `S(i)` and runs
//! the softmax of `i` while `P·V` is still in flight.
//!
//! Legal when moving the last gemm (and the statements that touch its
//! accumulator, which move to just before it) past the next iteration's
//! statements up to its first gemm changes no value: those statements and
//! the first gemm neither read what the moved ones write nor write what they
//! read or write. Everything in the consumers other than the two gemms must
//! be register work (no shared or global memory, no barrier, no block-wide
//! reduction), and the moved statements name no scalar bound in the loop (in
//! the rotated loop they run in the next iteration's scope).

use crate::ir::*;
use std::collections::BTreeSet;

/// A buffer or a scalar that a statement reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Name {
    Buf(BufId),
    Var(VarId),
}

#[derive(Default)]
struct Rw {
    reads: BTreeSet<Name>,
    writes: BTreeSet<Name>,
}

impl Rw {
    fn of(s: &Stmt) -> Rw {
        let mut rw = Rw::default();
        s.visit_exprs(&mut |e| match e {
            Expr::Load(b, _, _) => {
                rw.reads.insert(Name::Buf(*b));
            }
            Expr::Var(v, _) => {
                rw.reads.insert(Name::Var(*v));
            }
            _ => {}
        });
        s.visit(&mut |x| match x {
            Stmt::Let { var, .. } | Stmt::Local { var, .. } | Stmt::Assign { var, .. } => {
                rw.writes.insert(Name::Var(*var));
            }
            Stmt::For { var, .. } => {
                rw.writes.insert(Name::Var(*var));
            }
            Stmt::Store { buf, .. } | Stmt::AtomicAdd { buf, .. } => {
                rw.writes.insert(Name::Buf(*buf));
            }
            Stmt::Gemm(g) => {
                rw.reads.extend([g.a, g.b, g.c].into_iter().map(Name::Buf));
                rw.writes.insert(Name::Buf(g.c));
            }
            Stmt::Reduce(r) => {
                rw.reads.extend([r.src, r.dst].into_iter().map(Name::Buf));
                rw.writes.insert(Name::Buf(r.dst));
            }
            Stmt::Copy { src, dst, .. } | Stmt::AtomicAddTile { src, dst, .. } => {
                rw.reads.insert(Name::Buf(src.buf));
                rw.writes.insert(Name::Buf(dst.buf));
            }
            Stmt::Fill { dst, .. } => {
                rw.writes.insert(Name::Buf(dst.buf));
            }
            _ => {}
        });
        rw
    }

    fn touches(&self, n: Name) -> bool {
        self.reads.contains(&n) || self.writes.contains(&n)
    }

    /// Whether running `self` and `other` in either order gives the same values.
    fn commutes(&self, other: &Rw) -> bool {
        self.writes.is_disjoint(&other.reads)
            && self.writes.is_disjoint(&other.writes)
            && other.writes.is_disjoint(&self.reads)
    }

    fn add(&mut self, other: &Rw) {
        self.reads.extend(other.reads.iter().copied());
        self.writes.extend(other.writes.iter().copied());
    }
}

/// Register work a consumer warpgroup runs alone: no memory but registers
/// (`registers_only`), or a reduction into per-row registers.
fn register_work(f: &PrimFunc, s: &Stmt) -> bool {
    match s {
        Stmt::Reduce(r) => super::in_registers(f, r),
        _ => super::registers_only(f, s),
    }
}

/// The rotation of the warp-specialized pipeline over `var`, if it
/// qualifies, with the loop body reordered for it (the statements that touch
/// the last gemm's accumulator moved to just before that gemm), and the
/// tiles that only the deferred gemm reads (`Pipeline::deferred_tiles`).
pub(super) fn rotate(f: &mut PrimFunc, var: VarId) -> Option<(Rotation, Vec<BufId>)> {
    let p = f.schedule.pipelines.get(&var)?;
    if !p.warp_specialized || p.stages < 2 {
        return None;
    }
    let (producers, stages) = (p.tiles.len(), p.stages);
    let tiles = p.tiles.clone();
    let mut plan = None;
    f.body.visit(&mut |s| {
        if let Stmt::For { var: v, body, .. } = s {
            if *v == var {
                plan = order(f, &tiles, var, body, producers);
            }
        }
    });
    let (order, rotation, deferred) = plan?;
    // The deferred gemm reads its stage until the middle of the next
    // iteration. With one full/empty pair a stage, the whole stage stays held
    // that long, so with two stages the producer could fetch the next one
    // only then: measured 5% slower than not rotating (attention D128 on the
    // H200), 2% faster with three. With the deferred gemm's tiles on a pair of
    // their own, the first gemm's tiles are free a whole iteration ahead:
    // attention at head dim 256 (two stages) ran 3-5% faster rotated so. With
    // three stages or more the second pair's wait and release cost more than
    // they give (D128 and D64 2-3% slower on an H100, bench/RESULTS.md), so
    // only two stages split.
    let deferred = if stages < 3 { deferred } else { Vec::new() };
    if deferred.is_empty() && stages < 3 {
        return None;
    }
    let body = std::mem::replace(&mut f.body, Stmt::Seq(Vec::new()));
    f.body = reorder(body, var, producers, &order);
    Some((rotation, deferred))
}

/// The new order of the consumer statements (indices into them), the
/// rotation and the deferred gemm's own tiles, when the body qualifies.
fn order(
    f: &PrimFunc,
    tiles: &[BufId],
    var: VarId,
    body: &Stmt,
    producers: usize,
) -> Option<(Vec<usize>, Rotation, Vec<BufId>)> {
    let Stmt::Seq(items) = body else {
        return None;
    };
    let cons = items.get(producers..)?;
    let gemms: Vec<usize> = (0..cons.len())
        .filter(|&i| matches!(cons[i], Stmt::Gemm(_)))
        .collect();
    let [first, last] = gemms[..] else {
        return None;
    };
    let (Stmt::Gemm(g1), Stmt::Gemm(g2)) = (&cons[first], &cons[last]) else {
        return None;
    };
    let whole_block =
        |g: &Gemm| matches!(g.inst, GemmInst::Wgmma { wgs } if wgs * 128 == f.launch.threads);
    let scope = |b: BufId| f.buf(b).scope;
    // The first reads shared tiles; the last takes A from registers and B
    // from a stage; neither clears (both only accumulate when asynchronous).
    let shapes_ok = whole_block(g1)
        && whole_block(g2)
        && !g1.clear
        && !g2.clear
        && scope(g1.a) == Scope::Shared
        && scope(g1.b) == Scope::Shared
        && scope(g2.a) == Scope::Fragment
        && tiles.contains(&g2.b)
        && g1.c != g2.c
        && g1.c != g2.a
        && last == cons.len() - 1;
    if !shapes_ok {
        return None;
    }
    if !cons
        .iter()
        .enumerate()
        .all(|(i, s)| i == first || i == last || register_work(f, s))
    {
        return None;
    }
    let rw: Vec<Rw> = cons.iter().map(Rw::of).collect();
    let acc = Name::Buf(g2.c);
    // Between the gemms: the statements touching the last gemm's
    // accumulator move to just before it, past the later ones.
    let between: Vec<usize> = (first + 1..last).collect();
    let (late, early): (Vec<usize>, Vec<usize>) =
        between.iter().partition(|&&i| rw[i].touches(acc));
    for &l in &late {
        if early.iter().any(|&e| e > l && !rw[l].commutes(&rw[e])) {
            return None;
        }
    }
    // What runs in the next iteration (the late statements, then the last
    // gemm) moves past the statements up to and including the first gemm,
    // and names no scalar of the loop.
    let mut moved = Rw::default();
    for &i in late.iter().chain([&last]) {
        moved.add(&rw[i]);
    }
    let mut ahead = Rw::default();
    for r in &rw[..=first] {
        ahead.add(r);
    }
    if !moved.commutes(&ahead) {
        return None;
    }
    // (Scalars the moved statements bind themselves, their loops' variables,
    // move with them.)
    let mut bound = BTreeSet::from([Name::Var(var)]);
    for (i, r) in rw.iter().enumerate() {
        if i != last && !late.contains(&i) {
            bound.extend(r.writes.iter().filter(|n| matches!(n, Name::Var(_))));
        }
    }
    if !moved.reads.is_disjoint(&bound) {
        return None;
    }
    // The register work of the next iteration runs while the last gemm is
    // in flight until the first statement that writes its A operand.
    let operand = Name::Buf(g2.a);
    let order: Vec<usize> = (0..=first)
        .chain(early.iter().copied())
        .chain(late.iter().copied())
        .chain([last])
        .collect();
    let wait = early
        .iter()
        .position(|&i| rw[i].writes.contains(&operand))
        .map_or(last - late.len(), |at| first + 1 + at);
    // Two warpgroups of one block run the same loop on their own rows; left
    // alone they reach each gemm together and then run their softmaxes
    // together while the tensor cores wait. Taking turns staggers them by
    // half an iteration. (With one there is no one to take turns with;
    // three would need the turn to rotate through three barriers, which
    // `tl::tma::pingpong_*` does not do: not built, as no kernel here has
    // three consumer warpgroups.)
    let pingpong = matches!(g1.inst, GemmInst::Wgmma { wgs: 2 });
    // The deferred gemm's B tile is read by nothing else in the loop (the
    // rest is register work): it can take a barrier pair of its own, provided
    // the first gemm's tiles are left to the other pair.
    let deferred = if g1.a != g2.b && g1.b != g2.b && tiles.len() > 1 {
        vec![g2.b]
    } else {
        Vec::new()
    };
    Some((
        order,
        Rotation {
            first,
            late: late.len(),
            wait,
            pingpong,
        },
        deferred,
    ))
}

/// Reorders the consumer statements of the loop over `var` to `order`.
fn reorder(s: Stmt, var: VarId, producers: usize, order: &[usize]) -> Stmt {
    s.fold(&mut |x| match x {
        Stmt::For {
            loc,
            var: v,
            start,
            extent,
            kind,
            body,
        } if v == var => {
            let body = match *body {
                Stmt::Seq(mut items) => {
                    let mut cons: Vec<Option<Stmt>> = items.drain(producers..).map(Some).collect();
                    items.extend(order.iter().filter_map(|&i| cons[i].take()));
                    Stmt::Seq(items)
                }
                b => b,
            };
            Stmt::For {
                loc,
                var: v,
                start,
                extent,
                kind,
                body: Box::new(body),
            }
        }
        x => x,
    })
}
