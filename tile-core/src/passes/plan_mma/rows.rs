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
//! A tied class with any other use is a compile error naming the fragment,
//! the accumulator and the use: moving per-row values to shared memory
//! behind the user's back would hide a slow kernel. So is a class tied to
//! accumulators whose rows sit in different threads, unless one of them is
//! on `wgmma`: then planning is retried with that one on `mma.sync` (see
//! [`Outcome::NoWgmma`]). Untied 1-D fragments keep the plain layout.

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
        if let Some((loc, why)) = bufs.iter().find_map(|&b| bad_use(f, b, &f.body, &class)) {
            return Err(Diagnostic::at(
                loc,
                format!(
                    "kernel `{}`: `{}` holds per-row values of the tensor-core accumulator `{}`, so each thread \
                     keeps the rows of its accumulator registers; here {why}. Use a shared tile for this use \
                     (copy the values into it first), or make it a `T::parallel` over the accumulator's rows",
                    f.name,
                    f.buf(*root).name,
                    f.buf(first.acc).name
                ),
            ));
        }
        chosen.extend(bufs.iter().map(|&b| (b, want)));
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
        Stmt::Reduce(r)
            if cands.contains(&r.dst)
                && is_acc(f, r.src)
                && r.dim == 1
                && rows(f, r.dst) == rows(f, r.src) =>
        {
            ties.entry(r.dst).or_default().push(Tie {
                acc: r.src,
                loc: r.loc,
            });
        }
        _ => {}
    }
}

/// The first use of `b` a row layout cannot serve (module docs), with
/// what is wrong with it; `class` holds the fragments taking the layout
/// with it.
fn bad_use(f: &PrimFunc, b: BufId, s: &Stmt, class: &BTreeSet<BufId>) -> Option<(Loc, String)> {
    let m = rows(f, b);
    let name = &f.buf(b).name;
    let whole = |r: &Region| {
        r.buf != b
            || (r.origin.iter().all(|o| o.as_int() == Some(0))
                && r.extent.iter().map(Expr::as_int).collect::<Vec<_>>() == [Some(m)])
    };
    let here = |why: String| Some((s.loc(), why));
    if let Some(n) = s.parallel_nest() {
        let row_nest = n.extents == [m];
        let acc = nest_acc(f, &n);
        let acc_nest = n.extents.len() == 2 && n.extents[0] == m && acc.is_some();
        for (x, idx, store) in fragment_accesses(f, n.body) {
            if x != b {
                continue;
            }
            if !at_row(&idx, &n) {
                return here(format!(
                    "`{name}` is indexed by something other than the nest's row variable"
                ));
            }
            if acc_nest && store {
                return here(format!(
                    "`{name}` is written inside a `T::parallel` over the accumulator `{}` (each row would be written by every column)",
                    f.buf(acc.expect("an accumulator nest")).name
                ));
            }
            if !row_nest && !acc_nest {
                let other = fragment_accesses(f, n.body)
                    .into_iter()
                    .map(|(y, _, _)| y)
                    .find(|&y| y != b && !class.contains(&y));
                return here(match other {
                    Some(y) => format!(
                        "`{name}` is read in a `T::parallel` over `{}`, whose elements are not split over threads like the accumulator's rows",
                        f.buf(y).name
                    ),
                    None => format!("`{name}` is read in a `T::parallel` that does not run over its rows"),
                });
            }
        }
        let mut bad = None;
        n.body.visit(&mut |x| match x {
            Stmt::Reduce(r) if r.src == b || r.dst == b => {
                bad.get_or_insert(format!("`{name}` is reduced inside a `T::parallel`"));
            }
            Stmt::AtomicAdd { buf, .. } if *buf == b => {
                bad.get_or_insert(format!("`{name}` is the target of an atomic add"));
            }
            _ => {}
        });
        return bad.and_then(here);
    }
    match s {
        Stmt::Seq(v) => v.iter().find_map(|x| bad_use(f, b, x, class)),
        Stmt::For { body, .. } => bad_use(f, b, body, class),
        Stmt::If {
            cond, then, els, ..
        } => {
            if cond.visit_uses(b) {
                return here(format!(
                    "`{name}` is read in an `if` condition (serial code)"
                ));
            }
            bad_use(f, b, then, class)
                .or_else(|| els.as_ref().and_then(|e| bad_use(f, b, e, class)))
        }
        Stmt::Copy { src, dst, .. } => {
            let touches = src.buf == b || dst.buf == b;
            let ok = !touches
                || (whole(src)
                    && whole(dst)
                    && class.contains(&src.buf)
                    && class.contains(&dst.buf));
            (!ok).then(|| (s.loc(), format!(
                "`{name}` is copied to or from `{}`, which does not hold per-row values the same way",
                f.buf(if src.buf == b { dst.buf } else { src.buf }).name
            )))
        }
        Stmt::Fill { dst, value, .. } => (!whole(dst) || value.visit_uses(b))
            .then(|| (s.loc(), format!("`{name}` is filled in part"))),
        Stmt::Reduce(r) => {
            let ok = r.src != b && (r.dst != b || (is_acc(f, r.src) && r.dim == 1));
            (!ok).then(|| (s.loc(), format!(
                "`{name}` is reduced from `{}`, which is not a tensor-core accumulator reduced along its rows",
                f.buf(r.src).name
            )))
        }
        Stmt::Gemm(g) => (g.a == b || g.b == b || g.c == b)
            .then(|| (s.loc(), format!("`{name}` is a gemm operand"))),
        Stmt::AtomicAddTile { src, dst, .. } => (src.buf == b || dst.buf == b)
            .then(|| (s.loc(), format!("`{name}` is used by a tile atomic add"))),
        other => {
            let mut used = false;
            other.visit_exprs(&mut |e| used |= matches!(e, Expr::Load(x, _, _) if *x == b));
            if let Stmt::Store { buf, .. } | Stmt::AtomicAdd { buf, .. } = other {
                used |= *buf == b;
            }
            used.then(|| (s.loc(), format!("`{name}` is used in serial code")))
        }
    }
}
