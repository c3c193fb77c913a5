//! Loops: `for` over a range `a..b` or over a loop builtin (`T::parallel`,
//! `T::serial`, `T::unroll`, `T::pipelined`, `T::persistent`). Each builtin
//! turns its arguments into the loop's kind and ranges, and `emit` builds
//! the loop nest over the body; `T::persistent` builds its own loop.

use super::builtins::{self, Call, Lower, Position};
use super::layout_conflicts::NestInfo;
use super::stmt::{lower_block, lower_stmt};
use super::{expr, limits, Ctx, Sym};
use crate::diag::{range, At, SpanRange as Span};
use crate::ir::*;

/// A `for` loop whose iterator a loop builtin lowers.
pub(super) struct ForSite<'a> {
    pub f: &'a syn::ExprForLoop,
    /// The names the loop binds (`_` for a wildcard), with their spans.
    pub names: Vec<(String, Span)>,
}

/// A loop's ranges, one `(start, extent)` a dim, outermost first.
type Ranges = Vec<(Expr, Expr)>;

pub(super) fn for_loop(cx: &mut Ctx, f: &syn::ExprForLoop, out: &mut Vec<Stmt>) {
    let names: Vec<(String, Span)> = match &*f.pat {
        syn::Pat::Ident(pi) => vec![(cx.def_name(&pi.ident), range(&pi))],
        syn::Pat::Wild(w) => vec![("_".into(), range(&w))],
        syn::Pat::Tuple(t) => t
            .elems
            .iter()
            .map(|p| match p {
                syn::Pat::Ident(pi) => (cx.def_name(&pi.ident), range(&pi)),
                other => ("_".into(), range(&other)),
            })
            .collect(),
        other => {
            cx.err(
                range(&other),
                "loop variables are a name or a tuple of names",
            );
            return;
        }
    };
    let site = ForSite { f, names };
    match &*f.expr {
        syn::Expr::Range(r) => {
            let (Some(a), Some(b)) = (&r.start, &r.end) else {
                cx.err(
                    range(&r),
                    "ranges in `for` need a start and an end (`a..b`)",
                );
                return;
            };
            if matches!(r.limits, syn::RangeLimits::Closed(_)) {
                cx.err(range(&r), "use a half-open range `a..b`");
            }
            let ranges = vec![start_end(cx, a, b)];
            emit(cx, &site, ForKind::Serial, ranges, out);
        }
        syn::Expr::Call(c) if expr::t_fn_name(&c.func).is_some() => {
            let Some(k) = builtins::resolve(cx, c) else {
                return;
            };
            match k.builtin.lower {
                Lower::Loop(lower) => {
                    if builtins::check_arity(cx, &k) {
                        lower(cx, &k, &site, out);
                    }
                }
                _ => builtins::misplaced(cx, &k, Position::Loop),
            }
        }
        other => cx.err(
            range(&other),
            format!("loops iterate over {}", builtins::loop_list(Some("`a..b`"))),
        ),
    }
}

/// `(a, b - a)` for a loop from `a` to `b`.
fn start_end(cx: &mut Ctx, a: &syn::Expr, b: &syn::Expr) -> (Expr, Expr) {
    let (a, b) = (expr::lower(cx, a), expr::lower(cx, b));
    (a.clone(), Expr::bin(BinOp::Sub, b, a))
}

/// `for i in T::parallel(n)`, `for (i, j) in T::parallel([m, n])`.
pub(super) fn parallel(cx: &mut Ctx, k: &Call, site: &ForSite, out: &mut Vec<Stmt>) {
    let exts = match k.args.as_slice() {
        [one] => expr::elems(one),
        a => a.to_vec(),
    };
    if exts.is_empty() {
        cx.err(
            k.span(),
            format!("`T::parallel` takes the tile's extents: {}", k.usage()),
        );
        return;
    }
    let mut r = Vec::new();
    let mut sizes = Vec::new();
    for e in exts {
        let v = expr::lower(cx, e);
        match v.as_int() {
            None => {
                cx.err(
                    range(&e),
                    "`T::parallel` extents are compile-time constants (tile sizes)",
                );
                return;
            }
            Some(n) if n <= 0 => {
                cx.err(
                    range(&e),
                    format!("`T::parallel` extents are positive, got {n}"),
                );
                return;
            }
            Some(n) => sizes.push(n),
        }
        r.push((Expr::int(0), v));
    }
    if limits::product_within(&sizes, limits::MAX_TILE_ELEMS).is_none() {
        cx.err(
            k.span(),
            format!(
                "`T::parallel` over {sizes:?} has more than {} elements; it covers a tile",
                limits::MAX_TILE_ELEMS
            ),
        );
        return;
    }
    emit(cx, site, ForKind::Parallel, r, out);
}

/// `T::serial(n)` / `T::serial(start, end)`, and `T::unroll` alike.
pub(super) fn counted(cx: &mut Ctx, k: &Call, site: &ForSite, kind: ForKind, out: &mut Vec<Stmt>) {
    let r = match k.args.as_slice() {
        [n] => (Expr::int(0), expr::lower(cx, n)),
        [a, b] => start_end(cx, a, b),
        _ => return,
    };
    emit(cx, site, kind, vec![r], out);
}

/// `for k in T::pipelined(n, num_stages)` (`num_stages = s` also reads).
pub(super) fn pipelined(cx: &mut Ctx, k: &Call, site: &ForSite, out: &mut Vec<Stmt>) {
    let (n, stages) = match k.args.as_slice() {
        [n] => (*n, None),
        [n, s] => (*n, Some(*s)),
        _ => return,
    };
    let st = match stages {
        Some(s) => {
            let s_expr = match s {
                syn::Expr::Assign(a) => &*a.right,
                e => e,
            };
            match expr::lower(cx, s_expr).as_int() {
                Some(v) if (0..=limits::MAX_STAGES).contains(&v) => v,
                _ => {
                    cx.err(
                        range(&s),
                        format!(
                            "`num_stages` is a compile-time constant from 0 to {}",
                            limits::MAX_STAGES
                        ),
                    );
                    return;
                }
            }
        }
        None => 0,
    };
    let r = (Expr::int(0), expr::lower(cx, n));
    emit(cx, site, ForKind::Pipelined { stages: st }, vec![r], out);
}

/// `for (bx, by) in T::persistent([gx, gy], wave_size, index) { .. }`: the tiles of a
/// `gx x gy` domain handed out to a fixed number of blocks (a persistent kernel, as
/// TileLang's `T.Persistent`). The block with index `index` (of `wave_size` blocks, the
/// grid) takes tiles `index`, `index + wave_size`, `index + 2 * wave_size`, .. of the
/// domain, so each wave covers `wave_size` consecutive tiles: in row-major order with
/// the first dim fastest (as block indices run) for 1-D and 3-D domains, in groups of
/// 8 columns for 2-D ones ([`grouped_coords`]). Lowered here, to a serial loop over
/// this block's tiles that binds the names to the tile's coordinates: the passes and
/// backends see an ordinary loop.
pub(super) fn persistent(cx: &mut Ctx, k: &Call, site: &ForSite, out: &mut Vec<Stmt>) {
    let [domain, wave_arg, index] = k.args[..] else {
        return;
    };
    let dims = expr::elems(domain);
    if dims.is_empty() || dims.len() > 3 {
        cx.err(
            range(domain),
            "the domain of `T::persistent` has 1 to 3 dims",
        );
        return;
    }
    if site.names.len() != dims.len() {
        cx.err(
            range(&site.f.pat),
            format!(
                "the domain has {} dim(s) but the loop binds {} name(s)",
                dims.len(),
                site.names.len()
            ),
        );
        return;
    }
    let mut ints = Vec::new();
    for e in dims.iter().chain([&wave_arg, &index]) {
        let v = expr::lower(cx, e);
        if !v.dtype().is_int() {
            cx.err(
                range(e),
                "`T::persistent` takes integer extents, wave size and index",
            );
            return;
        }
        if let Some(c) = v.as_int() {
            if !limits::index_fits(cx, At::Expr(e), c, "the value") {
                return;
            }
        }
        ints.push(v.cast(DType::I32));
    }
    let index = ints.pop().expect("three");
    let wave = ints.pop().expect("three");
    let extents = ints;
    if wave.as_int().is_some_and(|w| w <= 0) {
        cx.err(
            range(wave_arg),
            "the wave size of `T::persistent` is positive",
        );
        return;
    }
    let total = extents
        .iter()
        .cloned()
        .reduce(Expr::mul)
        .expect("at least one dim");
    // This block's tiles: ceil((total - index) / wave); none when index >= total.
    let count = Expr::bin(
        BinOp::Div,
        Expr::add(
            Expr::bin(BinOp::Sub, total, index.clone()),
            Expr::bin(BinOp::Sub, wave.clone(), Expr::int(1)),
        ),
        wave.clone(),
    );
    let w = cx.f.new_var("tl_wave", DType::I32);
    let tile = cx.f.new_var("tl_tile", DType::I32);
    let tile_v = Expr::Var(tile, DType::I32);
    let mut body = vec![Stmt::Let {
        var: tile,
        value: Expr::add(index, Expr::mul(Expr::Var(w, DType::I32), wave)),
    }];
    cx.push();
    if extents.len() == 2 {
        grouped_coords(cx, site, &tile_v, &extents, &mut body);
        body.extend(lower_block(cx, &site.f.body));
        cx.pop();
        out.push(Stmt::For {
            loc: cx.loc,
            var: w,
            start: Expr::int(0),
            extent: count,
            kind: ForKind::Serial,
            body: Box::new(Stmt::Seq(body)),
        });
        return;
    }
    // Coordinate d: (tile / (extent_0 * .. * extent_{d-1})) % extent_d (no `%` on the last).
    let mut stride: Option<Expr> = None;
    for (d, (name, _)) in site.names.iter().enumerate() {
        let q = match &stride {
            None => tile_v.clone(),
            Some(s) => Expr::bin(BinOp::Div, tile_v.clone(), s.clone()),
        };
        let value = if d + 1 < extents.len() {
            Expr::bin(BinOp::Rem, q, extents[d].clone())
        } else {
            q
        };
        let v = loop_var(cx, name);
        body.push(Stmt::Let { var: v, value });
        stride = Some(match stride {
            None => extents[d].clone(),
            Some(s) => Expr::mul(s, extents[d].clone()),
        });
    }
    body.extend(lower_block(cx, &site.f.body));
    cx.pop();
    out.push(Stmt::For {
        loc: cx.loc,
        var: w,
        start: Expr::int(0),
        extent: count,
        kind: ForKind::Serial,
        body: Box::new(Stmt::Seq(body)),
    });
}

/// Columns of a group in the order of a 2-D persistent domain.
const PERSISTENT_GROUP: i64 = 8;

/// The coordinates of tile `t` of a 2-D persistent domain `[gx, gy]` in
/// grouped order (as `T::use_swizzle` orders a grid): groups of
/// `PERSISTENT_GROUP` columns (dim 0), each walked row by row (dim 1), so
/// the tiles that run at the same time share a few column panels and a few
/// row panels (a GEMM's B and A stay in L2) instead of one row across every
/// column. Every tile is still visited once.
fn grouped_coords(cx: &mut Ctx, site: &ForSite, t: &Expr, ext: &[Expr], body: &mut Vec<Stmt>) {
    let g = Expr::int(PERSISTENT_GROUP);
    let (gx, gy) = (ext[0].clone(), ext[1].clone());
    let mut bind = |name: &str, value: Expr, body: &mut Vec<Stmt>| {
        let v = cx.f.new_var(name, DType::I32);
        body.push(Stmt::Let { var: v, value });
        Expr::Var(v, DType::I32)
    };
    let per_group = Expr::mul(g.clone(), gy);
    let first = bind(
        "tl_first",
        Expr::mul(
            Expr::bin(BinOp::Div, t.clone(), per_group.clone()),
            g.clone(),
        ),
        body,
    );
    let width = bind(
        "tl_width",
        panel_width(gx, first.clone(), PERSISTENT_GROUP),
        body,
    );
    let local = bind(
        "tl_local",
        Expr::bin(BinOp::Rem, t.clone(), per_group),
        body,
    );
    let x = Expr::add(first, Expr::bin(BinOp::Rem, local.clone(), width.clone()));
    let y = Expr::bin(BinOp::Div, local, width);
    for ((name, _), value) in site.names.iter().zip([x, y]) {
        let v = loop_var(cx, name);
        body.push(Stmt::Let { var: v, value });
    }
}

/// The columns of the group of panels that starts at column `first` of a
/// grid `gx` wide: `min(gx - first, panel)`, written with a floor of 1
/// (`first < gx` always) so the bounds pass proves the coordinates derived
/// from it non-negative, which a difference alone is not. Shared by
/// `T::use_swizzle` and 2-D `T::persistent` domains.
pub(super) fn panel_width(gx: Expr, first: Expr, panel: i64) -> Expr {
    let rest = Expr::bin(BinOp::Max, Expr::bin(BinOp::Sub, gx, first), Expr::int(1));
    Expr::bin(BinOp::Min, rest, Expr::int(panel))
}

/// A new loop variable named `name`, bound in the current scope (`_` binds
/// nothing; the variable is named `it`).
fn loop_var(cx: &mut Ctx, name: &str) -> VarId {
    let v =
        cx.f.new_var(if name == "_" { "it" } else { name }, DType::I32);
    if name != "_" {
        cx.bind(name, Sym::Var(v));
    }
    v
}

/// The loop nest of `kind` over `ranges`, one loop a name, around the body.
fn emit(cx: &mut Ctx, site: &ForSite, kind: ForKind, ranges: Ranges, out: &mut Vec<Stmt>) {
    if site.names.len() != ranges.len() {
        cx.err(
            range(&site.f.pat),
            format!(
                "the loop has {} dim(s) but binds {} name(s)",
                ranges.len(),
                site.names.len()
            ),
        );
        return;
    }
    for (s, e) in &ranges {
        if !s.dtype().is_int() || !e.dtype().is_int() {
            cx.err(range(&site.f.expr), "loop bounds are integers");
            return;
        }
        // The loop counts in `int` up to start + extent.
        let end = match (s.as_int(), e.as_int()) {
            (Some(a), Some(n)) => Some(a.saturating_add(n.max(0))),
            (Some(a), None) => Some(a),
            (None, Some(n)) => Some(n),
            (None, None) => None,
        };
        let bounds = [s.as_int(), e.as_int(), end];
        if !bounds
            .into_iter()
            .flatten()
            .all(|v| limits::index_fits(cx, At::Expr(&site.f.expr), v, "the loop bound"))
        {
            return;
        }
    }
    if kind == ForKind::Parallel && cx.parallel_depth > 0 {
        cx.err(
            range(&site.f.expr),
            "`T::parallel` loops cannot be nested; write one `T::parallel([m, n])` over all dims",
        );
    }
    cx.push();
    let mut vars = Vec::new();
    for (n, _) in &site.names {
        vars.push(loop_var(cx, n));
    }
    if kind == ForKind::Parallel {
        cx.parallel_depth += 1;
        let header = Span {
            start: site.f.for_token.span,
            end: range(&site.f.expr).end,
        };
        let names = site.names.iter().map(|(n, _)| n.clone()).collect();
        cx.nests.insert(
            vars[0],
            NestInfo {
                header,
                names,
                stmts: Vec::new(),
            },
        );
    }
    let body = if kind == ForKind::Parallel {
        // As `lower_block`, noting which statements each source statement
        // became (layout diagnostics point at the statement).
        cx.push();
        let mut out = Vec::new();
        let mut stmts = Vec::new();
        for s in &site.f.body.stmts {
            stmts.push((out.len(), crate::diag::stmt_range(s)));
            lower_stmt(cx, s, &mut out);
        }
        cx.pop();
        if let Some(n) = cx.nests.get_mut(&vars[0]) {
            n.stmts = stmts;
        }
        out
    } else {
        lower_block(cx, &site.f.body)
    };
    if kind == ForKind::Parallel {
        cx.parallel_depth -= 1;
    }
    cx.pop();
    let mut s = Stmt::Seq(body);
    for (v, (start, ext)) in vars.into_iter().zip(ranges).rev() {
        s = Stmt::For {
            loc: cx.loc,
            var: v,
            start: start.cast(DType::I32),
            extent: ext.cast(DType::I32),
            kind,
            body: Box::new(s),
        };
    }
    out.push(s);
}
