//! Row layouts: 1-D fragments that hold per-row values of a tensor-core
//! accumulator (a running maximum, a row sum, a rescale factor) follow the
//! accumulator's rows, so each thread holds exactly the rows its
//! accumulator registers cover (`Layout::MmaRows`, `Layout::WgmmaRows`).
//!
//! A 1-D fragment is tied to an accumulator when it is the destination of
//! the accumulator's row reduction, or is read as `m[i]` in a `T::parallel`
//! over the accumulator's shape (`i` the row variable). Fragments that share
//! a 1-D `T::parallel` over the row count, or a whole copy, form one class;
//! a class takes the row layout of its accumulators when every use of every
//! member is one the layout serves:
//! - read or written at `[i]` in a 1-D nest over the row count (each thread
//!   runs the rows it holds; stores to memory from such a nest are made by
//!   one thread per row);
//! - read at `[i]` in a nest over a tied accumulator's shape;
//! - filled or copied whole, or written by the accumulator's row reduction.
//!
//! A class with any other use keeps the plain fragment layout (and
//! `demote_fragments` moves it to shared memory, as before). A class tied
//! to accumulators whose rows sit in different threads is a compile error
//! naming both, unless one of them is on `wgmma`: then planning is retried
//! with that one on `mma.sync` (see [`Outcome::NoWgmma`]).

use crate::diag::Diagnostic;
use crate::ir::*;
use std::collections::{BTreeMap, BTreeSet};

pub(super) enum Outcome {
    Done,
    /// Plan again with this accumulator kept off `wgmma`.
    NoWgmma(BufId),
}

/// A tie of a 1-D fragment to an accumulator, and where it was made.
struct Tie {
    acc: BufId,
    loc: Loc,
}

pub(super) fn assign(f: &mut PrimFunc) -> Result<Outcome, Diagnostic> {
    let candidates: BTreeSet<BufId> = f
        .buffers
        .iter()
        .enumerate()
        .filter(|(_, b)| {
            b.scope == Scope::Fragment
                && b.layout.is_none()
                && b.const_shape().is_some_and(|s| s.len() == 1)
        })
        .map(|(i, _)| BufId(i as u32))
        .collect();
    if candidates.is_empty() {
        return Ok(Outcome::Done);
    }
    let mut classes = Classes::default();
    let mut ties: BTreeMap<BufId, Vec<Tie>> = BTreeMap::new();
    walk(f, &f.body, &candidates, &mut classes, &mut ties);
    // Members and ties per class root.
    let mut members: BTreeMap<BufId, Vec<BufId>> = BTreeMap::new();
    for &b in &candidates {
        members.entry(classes.root(b)).or_default().push(b);
    }
    let mut chosen = Vec::new();
    for (root, bufs) in &members {
        let tied: Vec<&Tie> = bufs
            .iter()
            .flat_map(|b| ties.get(b).into_iter().flatten())
            .collect();
        let Some(first) = tied.first() else {
            continue;
        };
        let layout_of = |t: &Tie| rows_layout(f, t.acc);
        let Some(want) = layout_of(first) else {
            continue;
        };
        if let Some(other) = tied.iter().find(|t| layout_of(t) != Some(want)) {
            for t in [first, other] {
                if matches!(f.buf(t.acc).layout, Some(Layout::Wgmma { .. })) {
                    return Ok(Outcome::NoWgmma(t.acc));
                }
            }
            return Err(Diagnostic::at(
                other.loc,
                format!(
                    "kernel `{}`: the per-row values `{}` follow the rows of both `{}` and `{}`, \
                     whose tensor-core layouts put rows in different threads ({} and {}); \
                     use one per-row fragment per accumulator, or give both the same shape and gemm arrangement",
                    f.name,
                    f.buf(*root).name,
                    f.buf(first.acc).name,
                    f.buf(other.acc).name,
                    describe(f.buf(first.acc).layout),
                    describe(f.buf(other.acc).layout),
                ),
            ));
        }
        let class: BTreeSet<BufId> = bufs.iter().copied().collect();
        if bufs.iter().all(|&b| rows_only(f, b, &f.body, &class)) {
            chosen.extend(bufs.iter().map(|&b| (b, want)));
        }
    }
    for (b, l) in chosen {
        f.buffers[b.0 as usize].layout = Some(l);
    }
    Ok(Outcome::Done)
}

fn describe(l: Option<Layout>) -> String {
    match l {
        Some(Layout::Mma { wm, wn }) => format!("mma.sync over {wm}x{wn} warps"),
        Some(Layout::Wgmma { wgs }) => format!("wgmma over {wgs} warpgroups"),
        _ => "none".to_string(),
    }
}

/// The row layout that follows accumulator `acc`. A `wgmma` accumulator
/// with one 64-row strip per warpgroup puts its rows where `mma.sync` over
/// all warps along M does (16 rows per warp, in warp order), so both get
/// the same layout and may share per-row values.
fn rows_layout(f: &PrimFunc, acc: BufId) -> Option<Layout> {
    let b = f.buf(acc);
    let m = b.const_shape()?.first().copied()?;
    match b.layout? {
        Layout::Wgmma { wgs } if m == 64 * wgs => Some(Layout::MmaRows { wm: 4 * wgs, wn: 1 }),
        l => l.rows_of(),
    }
}

fn is_acc(f: &PrimFunc, b: BufId) -> bool {
    f.buf(b).layout.is_some_and(Layout::is_accumulator)
}

fn rows(f: &PrimFunc, b: BufId) -> i64 {
    f.buf(b)
        .const_shape()
        .and_then(|s| s.first().copied())
        .unwrap_or(-1)
}

/// Union-find over candidate fragments.
#[derive(Default)]
struct Classes {
    parent: BTreeMap<BufId, BufId>,
}

impl Classes {
    fn root(&mut self, b: BufId) -> BufId {
        let p = *self.parent.get(&b).unwrap_or(&b);
        if p == b {
            return b;
        }
        let r = self.root(p);
        self.parent.insert(b, r);
        r
    }
    fn union(&mut self, a: BufId, b: BufId) {
        let (ra, rb) = (self.root(a), self.root(b));
        if ra != rb {
            self.parent.insert(ra, rb);
        }
    }
}

/// Fragment loads and stores in a nest body: (buffer, index, is a store).
fn fragment_accesses(f: &PrimFunc, body: &Stmt) -> Vec<(BufId, Vec<Expr>, bool)> {
    let mut v = Vec::new();
    body.visit_exprs(&mut |e| {
        if let Expr::Load(b, idx, _) = e {
            if f.buf(*b).scope == Scope::Fragment {
                v.push((*b, idx.clone(), false));
            }
        }
    });
    body.visit(&mut |s| {
        if let Stmt::Store { buf, idx, .. } = s {
            if f.buf(*buf).scope == Scope::Fragment {
                v.push((*buf, idx.clone(), true));
            }
        }
    });
    v
}

/// The tensor-core accumulator a nest runs over (its shape is the nest's).
fn nest_acc(f: &PrimFunc, n: &Nest<'_>) -> Option<BufId> {
    fragment_accesses(f, n.body)
        .into_iter()
        .map(|(b, _, _)| b)
        .find(|&b| is_acc(f, b) && f.buf(b).const_shape().as_deref() == Some(&n.extents[..]))
}

fn at_row(idx: &[Expr], n: &Nest<'_>) -> bool {
    matches!(idx, [Expr::Var(v, _)] if *v == n.vars[0])
}

/// Records the classes and the ties (see the module docs).
fn walk(
    f: &PrimFunc,
    s: &Stmt,
    cands: &BTreeSet<BufId>,
    classes: &mut Classes,
    ties: &mut BTreeMap<BufId, Vec<Tie>>,
) {
    if let Some(n) = s.parallel_nest() {
        let acc = nest_acc(f, &n);
        let mut row_vals = Vec::new();
        for (b, idx, store) in fragment_accesses(f, n.body) {
            if !cands.contains(&b) || rows(f, b) != n.extents[0] {
                continue;
            }
            match (n.extents.len(), acc) {
                (1, _) => row_vals.push(b),
                (2, Some(a)) if !store && at_row(&idx, &n) => {
                    ties.entry(b).or_default().push(Tie {
                        acc: a,
                        loc: s.loc(),
                    })
                }
                _ => {}
            }
        }
        for w in row_vals.windows(2) {
            classes.union(w[0], w[1]);
        }
        return;
    }
    match s {
        Stmt::Seq(v) => v.iter().for_each(|x| walk(f, x, cands, classes, ties)),
        Stmt::For { body, .. } => walk(f, body, cands, classes, ties),
        Stmt::If { then, els, .. } => {
            walk(f, then, cands, classes, ties);
            if let Some(e) = els {
                walk(f, e, cands, classes, ties);
            }
        }
        Stmt::Copy { src, dst, .. } if cands.contains(&src.buf) && cands.contains(&dst.buf) => {
            classes.union(src.buf, dst.buf)
        }
        Stmt::Reduce(r) if cands.contains(&r.dst) && is_acc(f, r.src) && r.dim == 1 => {
            if rows(f, r.dst) == rows(f, r.src) {
                ties.entry(r.dst).or_default().push(Tie {
                    acc: r.src,
                    loc: r.loc,
                });
            }
        }
        _ => {}
    }
}

/// Whether every use of `b` is one a row layout serves (module docs);
/// `class` holds the fragments taking the layout with it.
fn rows_only(f: &PrimFunc, b: BufId, s: &Stmt, class: &BTreeSet<BufId>) -> bool {
    let m = rows(f, b);
    let whole = |r: &Region| {
        r.buf != b
            || (r.origin.iter().all(|o| o.as_int() == Some(0))
                && r.extent.iter().map(Expr::as_int).collect::<Vec<_>>() == [Some(m)])
    };
    if let Some(n) = s.parallel_nest() {
        let row_nest = n.extents == [m];
        let acc_nest = n.extents.len() == 2 && n.extents[0] == m && nest_acc(f, &n).is_some();
        let mut ok = true;
        for (x, idx, store) in fragment_accesses(f, n.body) {
            if x == b {
                ok &= at_row(&idx, &n) && (row_nest || (acc_nest && !store));
            }
        }
        n.body.visit(&mut |x| match x {
            Stmt::Reduce(r) => ok &= r.src != b && r.dst != b,
            Stmt::AtomicAdd { buf, .. } => ok &= *buf != b,
            _ => {}
        });
        return ok;
    }
    match s {
        Stmt::Seq(v) => v.iter().all(|x| rows_only(f, b, x, class)),
        Stmt::For { body, .. } => rows_only(f, b, body, class),
        Stmt::If {
            cond, then, els, ..
        } => {
            !cond.visit_uses(b)
                && rows_only(f, b, then, class)
                && els.as_ref().is_none_or(|e| rows_only(f, b, e, class))
        }
        Stmt::Copy { src, dst, .. } => {
            let touches = src.buf == b || dst.buf == b;
            !touches
                || (whole(src)
                    && whole(dst)
                    && class.contains(&src.buf)
                    && class.contains(&dst.buf))
        }
        Stmt::Fill { dst, value, .. } => whole(dst) && !value.visit_uses(b),
        Stmt::Reduce(r) => r.src != b && (r.dst != b || (is_acc(f, r.src) && r.dim == 1)),
        Stmt::Gemm(g) => g.a != b && g.b != b && g.c != b,
        Stmt::AtomicAddTile { src, dst, .. } => src.buf != b && dst.buf != b,
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
