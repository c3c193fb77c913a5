//! The kernel body: the one `T::kernel(grid, threads, |bx, ..| { .. })`
//! launch (grid, block size, block indices) and the `T::use_swizzle`
//! prologue that may open it.

use super::builtins::{self, Call, Lower};
use super::{expr, limits, stmt, Ctx, Sym};
use crate::diag::{range, At, SpanRange as Span};
use crate::ir::*;

const BODY: &str =
    "a kernel body is exactly one `T::kernel(grid, threads, |bx, ..| { .. })` launch";

/// Lowers the body of the kernel function: its one `T::kernel` launch.
pub(super) fn parse_body(cx: &mut Ctx, item: &syn::ItemFn) {
    let stmts = &item.block.stmts;
    let launch = stmts.iter().find_map(|s| match s {
        syn::Stmt::Expr(syn::Expr::Call(c), _) => builtins::builtin_of(c)
            .filter(|b| matches!(b.lower, Lower::Kernel(_)))
            .map(|b| (c, b)),
        _ => None,
    });
    for s in stmts {
        let is_launch = matches!(s, syn::Stmt::Expr(syn::Expr::Call(c), _) if launch.is_some_and(|(l, _)| std::ptr::eq(l, c)));
        if !is_launch {
            cx.err(crate::diag::stmt_range(s), BODY);
        }
    }
    let Some((c, b)) = launch else {
        if stmts.is_empty() {
            cx.err(range(&item.block), BODY);
        }
        return;
    };
    let call = Call::new(b, c);
    if let Lower::Kernel(lower) = b.lower {
        if builtins::check_arity(cx, &call) {
            lower(cx, &call);
        }
    }
}

/// `T::kernel(grid, threads, |bx, ..| { .. })`: the launch shape and the
/// block body.
pub(super) fn launch(cx: &mut Ctx, k: &Call) {
    let (usage, args) = (k.usage(), &k.args);
    let grid_exprs = expr::elems(args[0]);
    if grid_exprs.is_empty() || grid_exprs.len() > 3 {
        cx.err(
            range(&args[0]),
            format!("the grid has 1 to 3 dims: {usage}"),
        );
        return;
    }
    for g in &grid_exprs {
        let e = expr::lower(cx, g);
        if !e.dtype().is_int() {
            cx.err(range(&g), "grid extents are integers");
        }
        // The runtime evaluates the grid from the tensors' shapes alone.
        let mut ok = true;
        let scalars = &cx.f.scalars;
        e.visit(&mut |x| {
            ok &=
                !matches!(x, Expr::Load(..)) && !matches!(x, Expr::Var(v, _) if scalars.contains(v))
        });
        if !ok {
            cx.err(
                range(&g),
                "grid extents depend only on compile-time parameters and dims",
            );
        }
        if let Some(v) = e.as_int() {
            if v < 0 {
                cx.err(range(&g), format!("grid extents are not negative, got {v}"));
            } else {
                limits::index_fits(cx, At::Expr(g), v, "the grid extent");
            }
        }
        cx.f.launch.grid.push(e.cast(DType::I32));
    }
    let threads_arg = match args[1] {
        syn::Expr::Assign(a) => &*a.right,
        e => e,
    };
    match expr::lower(cx, threads_arg).as_int() {
        Some(t) if (1..=1024).contains(&t) => cx.f.launch.threads = t,
        Some(t) => cx.err(
            range(&threads_arg),
            format!("threads must be in 1..=1024, got {t}"),
        ),
        None => cx.err(
            range(&threads_arg),
            "threads must be a compile-time constant",
        ),
    }
    let syn::Expr::Closure(clo) = args[2] else {
        cx.err(
            range(&args[2]),
            format!("the third argument is the block body closure: {usage}"),
        );
        return;
    };
    if clo.inputs.len() != grid_exprs.len() {
        // `||` has no inputs to point at: point at the bars.
        let span = match clo.inputs.is_empty() {
            true => Span {
                start: clo.or1_token.span,
                end: clo.or2_token.span,
            },
            false => range(&clo.inputs),
        };
        cx.err(
            span,
            format!(
                "the grid has {} dims, so the closure takes {} block indices",
                grid_exprs.len(),
                grid_exprs.len()
            ),
        );
        return;
    }
    cx.push();
    for p in &clo.inputs {
        let name = match p {
            syn::Pat::Ident(pi) => cx.def_name(&pi.ident),
            syn::Pat::Wild(_) => "_".to_string(),
            _ => {
                cx.err(range(&p), "block indices are plain names");
                "_".to_string()
            }
        };
        let v =
            cx.f.new_var(if name == "_" { "b" } else { &name }, DType::I32);
        cx.f.launch.block_vars.push(v);
        if name != "_" {
            cx.bind(&name, Sym::Var(v));
        }
    }
    let body = match &*clo.body {
        syn::Expr::Block(b) => {
            // `T::use_cluster(n)` and `T::use_swizzle(panel)` open the body
            // (the swizzle rebinds the block indices). The swizzle is lowered
            // last, whatever the order: it depends on the cluster's shape.
            let mut prologue = Vec::new();
            let mut calls = Vec::new();
            while let Some(syn::Stmt::Expr(syn::Expr::Call(c), _)) = b.block.stmts.get(calls.len())
            {
                let Some(b) = builtins::builtin_of(c) else {
                    break;
                };
                let Lower::Prologue(lower) = b.lower else {
                    break;
                };
                calls.push((b, c, lower));
            }
            let skip = calls.len();
            calls.sort_by_key(|(b, ..)| b.name == "use_swizzle");
            for (b, c, lower) in calls {
                let call = Call::new(b, c);
                let outer = std::mem::replace(&mut cx.loc, call.span().into());
                if builtins::check_arity(cx, &call) {
                    prologue.extend(lower(cx, &call));
                }
                cx.loc = outer;
            }
            prologue.extend(stmt::lower_stmts(cx, &b.block.stmts[skip..]));
            prologue
        }
        e => {
            cx.err(range(&e), "the block body is a `{ .. }` block");
            Vec::new()
        }
    };
    cx.pop();
    cx.f.body = Stmt::Seq(body);
}

/// `T::use_cluster(n)`: on Hopper the blocks `nk .. nk + n - 1` along x may
/// run as one cluster of `n` (1, 2, 4 or 8: the portable cluster sizes that
/// divide a 128-row tile into whole swizzle atoms) and share the pipelined
/// tile copies that are the same in all of them (`plan_pipelines` decides
/// which; elsewhere nothing changes). `T::use_cluster(nx, ny)`: clusters of
/// `nx` blocks along x by `ny` along y (at most 8 in all) on a 2-D or 3-D
/// grid, whose rows share the tiles that read no x block index and whose
/// columns those that read no y block index: a GEMM's A and B. Then
/// `T::use_swizzle` is left out (the blocks of a swizzled grid would not
/// form such rows and columns; the hardware places whole clusters). Only
/// recorded here.
pub(super) fn cluster(cx: &mut Ctx, k: &Call) -> Vec<Stmt> {
    let Some(nx) = cluster_blocks(cx, k, 0, "cluster size") else {
        return Vec::new();
    };
    let ny = match k.args.len() {
        1 => 1,
        _ => match cluster_blocks(cx, k, 1, "cluster height") {
            Some(ny) => ny,
            None => return Vec::new(),
        },
    };
    if nx * ny > 8 {
        cx.err(
            k.span(),
            format!(
                "{}: a cluster has at most 8 blocks (the portable limit), not {nx} x {ny}",
                k.usage()
            ),
        );
        return Vec::new();
    }
    if ny > 1 && cx.f.launch.block_vars.len() < 2 {
        cx.err(
            k.span(),
            format!(
                "{}: clusters along y need a grid of two or three dims",
                k.usage()
            ),
        );
        return Vec::new();
    }
    cx.f.launch.cluster = nx;
    cx.f.launch.cluster_y = ny;
    not_both(cx, k);
    Vec::new()
}

/// `T::use_split_k(n)`: on Hopper the kernel's warp-specialized pipelined
/// loop may run its iterations over `n` blocks (1, 2, 4 or 8) launched as
/// one cluster, each a contiguous range, with the accumulators its gemms
/// add into summed into the cluster's first block, which alone runs the
/// statements after the loop (`plan_pipelines` decides and says why not;
/// elsewhere, and on the CPU, nothing changes). For grids of output tiles
/// that fill the GPU less than once (few rows, or `M x N` near the tile
/// count): the same work on `n` times the multiprocessors. Only recorded
/// here.
pub(super) fn split_k(cx: &mut Ctx, k: &Call) -> Vec<Stmt> {
    if let Some(n) = cluster_blocks(cx, k, 0, "number of blocks") {
        cx.f.launch.split_k = n;
        not_both(cx, k);
    }
    Vec::new()
}

/// The blocks of a cluster a prologue call's argument `i` names: 1, 2, 4 or
/// 8, known at compile time (the portable cluster sizes), or an error at
/// the call.
fn cluster_blocks(cx: &mut Ctx, k: &Call, i: usize, what: &str) -> Option<i64> {
    match expr::lower(cx, k.args[i]).as_int() {
        Some(n @ (1 | 2 | 4 | 8)) => Some(n),
        _ => {
            cx.err(
                k.span(),
                format!("{} takes a compile-time {what} of 1, 2, 4 or 8", k.usage()),
            );
            None
        }
    }
}

/// A cluster's blocks either share tile copies (`T::use_cluster`) or split
/// a loop's iterations (`T::use_split_k`), not both: the launcher runs one
/// cluster shape.
fn not_both(cx: &mut Ctx, k: &Call) {
    if cx.f.launch.cluster * cx.f.launch.cluster_y > 1 && cx.f.launch.split_k > 1 {
        cx.err(
            k.span(),
            "`T::use_cluster(n)` with n > 1 and `T::use_split_k(n)` with n > 1 cannot both \
             open a kernel: a cluster's blocks either share their tile copies or split the \
             loop's iterations (choose one per variant, e.g. with a `filter`)",
        );
    }
}

/// `T::use_swizzle(panel)`: block rasterization for L2 reuse. Consecutive
/// blocks walk down a panel of `panel` grid columns before moving right, so
/// the blocks running at once share the operand tiles they read. Binds the
/// block index names to the swizzled indices.
pub(super) fn swizzle(cx: &mut Ctx, k: &Call) -> Vec<Stmt> {
    let panel = expr::lower(cx, k.args[0]).as_int();
    let Some(panel) = panel.filter(|&p| p > 0 && p <= limits::MAX_INDEX) else {
        cx.err(
            k.span(),
            format!("{} takes a positive compile-time panel width", k.usage()),
        );
        return Vec::new();
    };
    if cx.f.launch.block_vars.len() != 2 {
        cx.err(k.span(), "`T::use_swizzle` needs a 2-D grid `[gx, gy]`");
        return Vec::new();
    }
    if cx.f.launch.cluster_y > 1 {
        // Clusters along y: left out (`cluster`).
        return Vec::new();
    }
    let i32v = |v: VarId| Expr::Var(v, DType::I32);
    let (bx, by) = (cx.f.launch.block_vars[0], cx.f.launch.block_vars[1]);
    let (gx, gy) = (cx.f.launch.grid[0].clone(), cx.f.launch.grid[1].clone());
    let mut out = Vec::new();
    let mut let_ = |cx: &mut Ctx, name: &str, value: Expr| -> VarId {
        let v = cx.f.new_var(name, DType::I32);
        out.push(Stmt::Let { var: v, value });
        v
    };
    let id = let_(
        cx,
        "tl_id",
        Expr::add(Expr::mul(i32v(by), gx.clone()), i32v(bx)),
    );
    let group = let_(cx, "tl_group", Expr::mul(Expr::int(panel), gy));
    let first = let_(
        cx,
        "tl_first",
        Expr::mul(
            Expr::bin(BinOp::Div, i32v(id), i32v(group)),
            Expr::int(panel),
        ),
    );
    let width = let_(
        cx,
        "tl_width",
        super::loops::panel_width(gx, i32v(first), panel),
    );
    let local = let_(cx, "tl_local", Expr::bin(BinOp::Rem, i32v(id), i32v(group)));
    let sbx = let_(
        cx,
        "bx_swizzled",
        Expr::add(i32v(first), Expr::bin(BinOp::Rem, i32v(local), i32v(width))),
    );
    let sby = let_(
        cx,
        "by_swizzled",
        Expr::bin(BinOp::Div, i32v(local), i32v(width)),
    );
    // The closure's names now mean the swizzled indices.
    let names: Vec<(String, VarId)> = cx
        .scopes
        .last()
        .map(|sc| {
            sc.iter()
                .filter_map(|(n, s)| match s {
                    Sym::Var(v) if *v == bx => Some((n.clone(), sbx)),
                    Sym::Var(v) if *v == by => Some((n.clone(), sby)),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    for (n, v) in names {
        cx.bind(&n, Sym::Var(v));
    }
    out
}
