//! Statements of a block body: allocations, lets, stores, loops, `if`, and the
//! tile ops (`T::copy`, `T::clear`, `T::fill`, `T::gemm`).

use super::expr::{self, t_fn_name, t_fn_turbofish, ALL_FNS};
use super::layout_conflicts::NestInfo;
use super::{Ctx, Sym};
use crate::diag::{range, SpanRange as Span};
use crate::ir::*;

pub fn lower_block(cx: &mut Ctx, b: &syn::Block) -> Vec<Stmt> {
    cx.push();
    let mut out = Vec::new();
    for s in &b.stmts {
        lower_stmt(cx, s, &mut out);
    }
    cx.pop();
    out
}

fn lower_stmt(cx: &mut Ctx, s: &syn::Stmt, out: &mut Vec<Stmt>) {
    let outer = std::mem::replace(&mut cx.loc, range(s).into());
    lower_stmt_at(cx, s, out);
    cx.loc = outer;
}

fn lower_stmt_at(cx: &mut Ctx, s: &syn::Stmt, out: &mut Vec<Stmt>) {
    match s {
        syn::Stmt::Local(l) => local(cx, l, out),
        syn::Stmt::Expr(e, _) => stmt_expr(cx, e, out),
        syn::Stmt::Item(i) => cx.err(
            range(&i),
            "items (fn, struct, use, ..) cannot be declared inside a kernel",
        ),
        syn::Stmt::Macro(m) => cx.err(range(&m), "macros are not supported inside kernels"),
    }
}

fn local(cx: &mut Ctx, l: &syn::Local, out: &mut Vec<Stmt>) {
    let (ident, mutable, ty) = match &l.pat {
        syn::Pat::Ident(pi) => (pi.ident.clone(), pi.mutability.is_some(), None),
        syn::Pat::Type(pt) => match &*pt.pat {
            syn::Pat::Ident(pi) => (pi.ident.clone(), pi.mutability.is_some(), Some(&*pt.ty)),
            p => {
                cx.err(range(&p), "`let` binds one plain name");
                return;
            }
        },
        p => {
            cx.err(range(&p), "`let` binds one plain name");
            return;
        }
    };
    let Some(init) = &l.init else {
        cx.err(range(&l), "`let` needs a value");
        return;
    };
    if init.diverge.is_some() {
        cx.err(range(&l), "`let .. else` is not supported in kernels");
        return;
    }
    let name = ident.to_string();
    if let syn::Expr::Call(c) = &*init.expr {
        if let Some(f) = t_fn_name(&c.func) {
            let scope = match f.as_str() {
                "alloc_shared" => Some(Scope::Shared),
                "alloc_fragment" => Some(Scope::Fragment),
                "alloc_local" => Some(Scope::Local),
                _ => None,
            };
            if f == "alloc_var" {
                // A mutable scalar: `T::alloc_var::<f32>()` (zero) or `(init)`.
                let t = match t_fn_turbofish(&c.func) {
                    Some(t) => expr::dtype_of_type(t),
                    None => None,
                };
                let Some(t) = t else {
                    cx.err(range(c), "`T::alloc_var::<dtype>(init)` needs a dtype");
                    return;
                };
                let init = match c.args.first() {
                    Some(e) if c.args.len() == 1 => {
                        let v = expr::lower(cx, e);
                        expr::convert_for_store(cx, range(e), v, t, &format!("`{name}`"))
                    }
                    None => Expr::Int(0, DType::I32).cast(t),
                    Some(_) => {
                        cx.err(range(c), "`T::alloc_var` takes at most one initial value");
                        return;
                    }
                };
                let var = cx.f.new_var(&name, t);
                out.push(Stmt::Local { var, init });
                cx.bind(&name, Sym::Mut(var));
                return;
            }
            if let Some(scope) = scope {
                if let Some(b) = alloc(cx, c, &name, scope) {
                    out.push(Stmt::Alloc {
                        loc: cx.loc,
                        buf: b,
                    });
                    cx.bind(&name, Sym::Buf(b));
                }
                return;
            }
        }
    }
    let mut v = expr::lower(cx, &init.expr);
    if let Some(ty) = ty {
        match expr::dtype_of_type(ty) {
            Some(t) => {
                v = expr::convert_for_store(cx, range(&init.expr), v, t, &format!("`{name}`"))
            }
            None => cx.err(range(&ty), "unknown scalar type"),
        }
    }
    let var = cx.f.new_var(&name, v.dtype());
    if mutable {
        out.push(Stmt::Local { var, init: v });
        cx.bind(&name, Sym::Mut(var));
    } else {
        out.push(Stmt::Let { var, value: v });
        cx.bind(&name, Sym::Var(var));
    }
}

/// `T::alloc_shared::<f16>([m, k])` or `T::alloc_shared([m, k], f16)`.
fn alloc(cx: &mut Ctx, c: &syn::ExprCall, name: &str, scope: Scope) -> Option<BufId> {
    let fname = t_fn_name(&c.func).unwrap_or_default();
    let usage = format!("`T::{fname}::<dtype>([d0, d1, ..])` or `T::{fname}([d0, ..], dtype)`");
    let args: Vec<&syn::Expr> = c.args.iter().collect();
    let (shape_arg, dtype) = match (t_fn_turbofish(&c.func), args.as_slice()) {
        (Some(t), [s]) => (*s, expr::dtype_of_type(t)),
        (None, [s, syn::Expr::Path(p)]) => (
            *s,
            p.path
                .get_ident()
                .and_then(|i| DType::from_rust_name(&i.to_string())),
        ),
        _ => {
            cx.err(
                range(&c),
                format!("`T::{fname}` takes a shape and a dtype: {usage}"),
            );
            return None;
        }
    };
    let Some(dtype) = dtype else {
        cx.err(
            range(&c),
            format!("unknown element type in `T::{fname}`: {usage}"),
        );
        return None;
    };
    let dims: Vec<&syn::Expr> = match shape_arg {
        syn::Expr::Array(a) => a.elems.iter().collect(),
        syn::Expr::Tuple(t) => t.elems.iter().collect(),
        e => vec![e],
    };
    if dims.is_empty() {
        cx.err(range(&shape_arg), "a buffer has at least one dim");
        return None;
    }
    let mut shape = Vec::new();
    for d in dims {
        let e = expr::lower(cx, d);
        match e.as_int() {
            Some(v) if v > 0 => shape.push(Expr::int(v)),
            Some(v) => {
                cx.err(range(&d), format!("buffer dims are positive, got {v}"));
                return None;
            }
            None => {
                cx.err(
                    range(&d),
                    format!(
                        "`{name}` is a {} allocation and needs a compile-time shape; this dim depends on \
                         a dynamic value (use a compile-time parameter)",
                        scope.name()
                    ),
                );
                return None;
            }
        }
    }
    Some(cx.f.new_buf(Buffer {
        layout: None,
        name: name.to_string(),
        dtype,
        shape,
        scope,
        mutable: true,
    }))
}

fn stmt_expr(cx: &mut Ctx, e: &syn::Expr, out: &mut Vec<Stmt>) {
    match e {
        syn::Expr::Assign(a) => assign(cx, &a.left, None, &a.right, range(&a), out),
        syn::Expr::Binary(b) => {
            use syn::BinOp as B;
            let op = match b.op {
                B::AddAssign(_) => BinOp::Add,
                B::SubAssign(_) => BinOp::Sub,
                B::MulAssign(_) => BinOp::Mul,
                B::DivAssign(_) => BinOp::Div,
                B::RemAssign(_) => BinOp::Rem,
                _ => {
                    cx.err(range(&e), "this expression has no effect; statements are stores, loops, `if`, `let` or `T::` tile ops");
                    return;
                }
            };
            assign(cx, &b.left, Some(op), &b.right, range(&b), out)
        }
        syn::Expr::ForLoop(f) => for_loop(cx, f, out),
        syn::Expr::If(i) => out.push(if_stmt(cx, i)),
        syn::Expr::Block(b) => out.push(Stmt::Seq(lower_block(cx, &b.block))),
        syn::Expr::Call(c) => tile_op(cx, c, out),
        other => cx.err(
            range(&other),
            format!(
                "unsupported statement in a kernel: {}",
                expr::describe(other)
            ),
        ),
    }
}

fn if_stmt(cx: &mut Ctx, i: &syn::ExprIf) -> Stmt {
    let cond = expr::lower(cx, &i.cond);
    if cond.dtype() != DType::Bool {
        cx.err(
            range(&i.cond),
            format!("`if` conditions are bool, got {}", cond.dtype()),
        );
    }
    let then = Stmt::Seq(lower_block(cx, &i.then_branch));
    let els = i.else_branch.as_ref().map(|(_, e)| {
        Box::new(match &**e {
            syn::Expr::Block(b) => Stmt::Seq(lower_block(cx, &b.block)),
            syn::Expr::If(i) => if_stmt(cx, i),
            other => {
                cx.err(range(&other), "expected a block after `else`");
                Stmt::Seq(Vec::new())
            }
        })
    });
    Stmt::If {
        loc: cx.loc,
        cond,
        then: Box::new(then),
        els,
    }
}

fn assign(
    cx: &mut Ctx,
    lhs: &syn::Expr,
    op: Option<BinOp>,
    rhs: &syn::Expr,
    span: Span,
    out: &mut Vec<Stmt>,
) {
    match lhs {
        syn::Expr::Index(ix) => {
            let (buf, idx) = expr::index(cx, ix);
            let rhs_v = expr::lower(cx, rhs);
            let Some(b) = buf else { return };
            let (bname, dtype, scope, mutable) = {
                let bb = cx.f.buf(b);
                (bb.name.clone(), bb.dtype, bb.scope, bb.mutable)
            };
            if scope == Scope::Global && !mutable {
                cx.err(
                    range(&ix.expr),
                    format!(
                        "`{bname}` is an input (`Tensor`); declare it `TensorMut` to write to it"
                    ),
                );
                return;
            }
            let value = match op {
                Some(op) => {
                    let cur = Expr::Load(b, idx.clone(), dtype);
                    expr::arith(cx, span, op, cur, rhs_v)
                }
                None => rhs_v,
            };
            let value = expr::convert_for_store(
                cx,
                range(&rhs),
                value,
                dtype,
                &format!("buffer `{bname}`"),
            );
            out.push(Stmt::Store {
                loc: cx.loc,
                buf: b,
                idx,
                value,
            });
        }
        syn::Expr::Path(p) if p.path.get_ident().is_some() => {
            let n = p
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            let rhs_v = expr::lower(cx, rhs);
            match cx.lookup(&n) {
                Some(Sym::Mut(v)) => {
                    let t = cx.f.var(v).dtype;
                    let value = match op {
                        Some(op) => expr::arith(cx, span, op, Expr::Var(v, t), rhs_v),
                        None => rhs_v,
                    };
                    let value = expr::convert_for_store(cx, range(&rhs), value, t, &format!("`{n}`"));
                    out.push(Stmt::Assign { var: v, value });
                }
                Some(Sym::Buf(_)) => cx.err(range(&lhs), format!("`{n}` is a buffer; assign to elements (`{n}[i] = ..`) or use `T::copy`/`T::fill`")),
                Some(_) => cx.err(range(&lhs), format!("`{n}` is immutable; declare it with `let mut`")),
                None => cx.err(range(&lhs), format!("cannot find `{n}` in this kernel")),
            }
        }
        other => cx.err(
            range(&other),
            "assignments target `buffer[index]` or a `let mut` name",
        ),
    }
}

/// `for (bx, by) in T::persistent([gx, gy], wave_size, index) { .. }`: the tiles of a
/// `gx x gy` domain handed out to a fixed number of blocks (a persistent kernel, as
/// TileLang's `T.Persistent`). The block with index `index` (of `wave_size` blocks, the
/// grid) takes tiles `index`, `index + wave_size`, `index + 2 * wave_size`, .. of the
/// domain in row-major order with the first dim fastest (as block indices run), so
/// each wave covers `wave_size` consecutive tiles. Lowered here, to a serial loop over
/// this block's tiles that binds the names to the tile's coordinates: the passes and
/// backends see an ordinary loop.
fn persistent(
    cx: &mut Ctx,
    f: &syn::ExprForLoop,
    c: &syn::ExprCall,
    names: &[(String, Span)],
    out: &mut Vec<Stmt>,
) {
    let args: Vec<&syn::Expr> = c.args.iter().collect();
    let [domain, wave, index] = args.as_slice() else {
        cx.err(
            range(c),
            format!(
                "`T::persistent` takes `(domain, wave_size, index)`, e.g. `T::persistent([gx, gy], num_blocks, bx)`, got {} arguments",
                args.len()
            ),
        );
        return;
    };
    let dims: Vec<&syn::Expr> = match domain {
        syn::Expr::Array(a) => a.elems.iter().collect(),
        syn::Expr::Tuple(t) => t.elems.iter().collect(),
        e => vec![*e],
    };
    if dims.is_empty() || dims.len() > 3 {
        cx.err(
            range(domain),
            "the domain of `T::persistent` has 1 to 3 dims",
        );
        return;
    }
    if names.len() != dims.len() {
        cx.err(
            range(&f.pat),
            format!(
                "the domain has {} dim(s) but the loop binds {} name(s)",
                dims.len(),
                names.len()
            ),
        );
        return;
    }
    let mut ints = Vec::new();
    for e in dims.iter().chain([wave, index]) {
        let v = expr::lower(cx, e);
        if !v.dtype().is_int() {
            cx.err(
                range(e),
                "`T::persistent` takes integer extents, wave size and index",
            );
            return;
        }
        ints.push(v.cast(DType::I32));
    }
    let index = ints.pop().expect("three");
    let wave = ints.pop().expect("three");
    let extents = ints;
    if wave.as_int().is_some_and(|w| w <= 0) {
        cx.err(
            range(&args[1]),
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
    // Coordinate d: (tile / (extent_0 * .. * extent_{d-1})) % extent_d (no `%` on the last).
    let mut stride: Option<Expr> = None;
    for (d, (name, _)) in names.iter().enumerate() {
        let q = match &stride {
            None => tile_v.clone(),
            Some(s) => Expr::bin(BinOp::Div, tile_v.clone(), s.clone()),
        };
        let value = if d + 1 < extents.len() {
            Expr::bin(BinOp::Rem, q, extents[d].clone())
        } else {
            q
        };
        let v =
            cx.f.new_var(if name == "_" { "it" } else { name }, DType::I32);
        if name != "_" {
            cx.bind(name, Sym::Var(v));
        }
        body.push(Stmt::Let { var: v, value });
        stride = Some(match stride {
            None => extents[d].clone(),
            Some(s) => Expr::mul(s, extents[d].clone()),
        });
    }
    body.extend(lower_block(cx, &f.body));
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

fn for_loop(cx: &mut Ctx, f: &syn::ExprForLoop, out: &mut Vec<Stmt>) {
    let names: Vec<(String, Span)> = match &*f.pat {
        syn::Pat::Ident(pi) => vec![(pi.ident.to_string(), range(&pi))],
        syn::Pat::Wild(w) => vec![("_".into(), range(&w))],
        syn::Pat::Tuple(t) => t
            .elems
            .iter()
            .map(|p| match p {
                syn::Pat::Ident(pi) => (pi.ident.to_string(), range(&pi)),
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
    // (kind, [(start, extent)])
    let (kind, ranges): (ForKind, Vec<(Expr, Expr)>) = match &*f.expr {
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
            let (a, b) = (expr::lower(cx, a), expr::lower(cx, b));
            let ext = Expr::bin(BinOp::Sub, b, a.clone());
            (ForKind::Serial, vec![(a, ext)])
        }
        syn::Expr::Call(c) => {
            let Some(fname) = t_fn_name(&c.func) else {
                cx.err(range(&f.expr), "loops iterate over `T::parallel`, `T::serial`, `T::unroll`, `T::pipelined` or `a..b`");
                return;
            };
            let args: Vec<&syn::Expr> = c.args.iter().collect();
            match fname.as_str() {
                "parallel" => {
                    let exts: Vec<&syn::Expr> = match args.as_slice() {
                        [syn::Expr::Array(a)] => a.elems.iter().collect(),
                        [syn::Expr::Tuple(t)] => t.elems.iter().collect(),
                        a => a.to_vec(),
                    };
                    if exts.is_empty() {
                        cx.err(range(&c), "`T::parallel` takes the tile's extents: `T::parallel(n)` or `T::parallel([m, n])`");
                        return;
                    }
                    let mut r = Vec::new();
                    for e in exts {
                        let v = expr::lower(cx, e);
                        if v.as_int().is_none() {
                            cx.err(
                                range(&e),
                                "`T::parallel` extents are compile-time constants (tile sizes)",
                            );
                            return;
                        }
                        r.push((Expr::int(0), v));
                    }
                    (ForKind::Parallel, r)
                }
                "serial" | "unroll" => {
                    let kind = if fname == "serial" {
                        ForKind::Serial
                    } else {
                        ForKind::Unrolled
                    };
                    match args.as_slice() {
                        [n] => (kind, vec![(Expr::int(0), expr::lower(cx, n))]),
                        [a, b] => {
                            let (a, b) = (expr::lower(cx, a), expr::lower(cx, b));
                            (kind, vec![(a.clone(), Expr::bin(BinOp::Sub, b, a))])
                        }
                        _ => {
                            cx.err(
                                range(&c),
                                format!(
                                    "`T::{fname}` takes `(n)` or `(start, end)`, got {} arguments",
                                    args.len()
                                ),
                            );
                            return;
                        }
                    }
                }
                "persistent" => {
                    persistent(cx, f, c, &names, out);
                    return;
                }
                "pipelined" => {
                    let (n, stages) = match args.as_slice() {
                        [n] => (*n, None),
                        [n, s] => (*n, Some(*s)),
                        _ => {
                            cx.err(
                                range(&c),
                                format!(
                                    "`T::pipelined` takes `(n, num_stages)`, got {} arguments",
                                    args.len()
                                ),
                            );
                            return;
                        }
                    };
                    let st = match stages {
                        Some(s) => {
                            let s_expr = match s {
                                syn::Expr::Assign(a) => &*a.right,
                                e => e,
                            };
                            match expr::lower(cx, s_expr).as_int() {
                                Some(v) if v >= 0 => v,
                                _ => {
                                    cx.err(
                                        range(&s),
                                        "`num_stages` is a non-negative compile-time constant",
                                    );
                                    return;
                                }
                            }
                        }
                        None => 0,
                    };
                    (
                        ForKind::Pipelined { stages: st },
                        vec![(Expr::int(0), expr::lower(cx, n))],
                    )
                }
                other => {
                    cx.err(range(&c.func), format!("`T::{other}` is not a loop; loops iterate over `T::parallel`, `T::serial`, `T::unroll`, `T::pipelined` or `T::persistent`"));
                    return;
                }
            }
        }
        other => {
            cx.err(range(&other), "loops iterate over `T::parallel`, `T::serial`, `T::unroll`, `T::pipelined` or `a..b`");
            return;
        }
    };
    if names.len() != ranges.len() {
        cx.err(
            range(&f.pat),
            format!(
                "the loop has {} dim(s) but binds {} name(s)",
                ranges.len(),
                names.len()
            ),
        );
        return;
    }
    for (s, e) in &ranges {
        if !s.dtype().is_int() || !e.dtype().is_int() {
            cx.err(range(&f.expr), "loop bounds are integers");
            return;
        }
    }
    if kind == ForKind::Parallel && cx.parallel_depth > 0 {
        cx.err(
            range(&f.expr),
            "`T::parallel` loops cannot be nested; write one `T::parallel([m, n])` over all dims",
        );
    }
    cx.push();
    let mut vars = Vec::new();
    for (n, _) in &names {
        let v = cx.f.new_var(if n == "_" { "it" } else { n }, DType::I32);
        if n != "_" {
            cx.bind(n, Sym::Var(v));
        }
        vars.push(v);
    }
    if kind == ForKind::Parallel {
        cx.parallel_depth += 1;
        let header = Span {
            start: f.for_token.span,
            end: range(&f.expr).end,
        };
        let names = names.iter().map(|(n, _)| n.clone()).collect();
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
        for s in &f.body.stmts {
            stmts.push((out.len(), range(s)));
            lower_stmt(cx, s, &mut out);
        }
        cx.pop();
        if let Some(n) = cx.nests.get_mut(&vars[0]) {
            n.stmts = stmts;
        }
        out
    } else {
        lower_block(cx, &f.body)
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

/// The source or destination of `T::copy` before its extent is known.
struct RegionRef {
    buf: BufId,
    /// `Some` for `buf.at([..])`; `None` for the whole buffer.
    origin: Option<Vec<Expr>>,
    span: Span,
}

fn region_ref(cx: &mut Ctx, e: &syn::Expr) -> Option<RegionRef> {
    match e {
        syn::Expr::MethodCall(m) if m.method == "at" => {
            let buf = expr::buffer_ref(cx, &m.receiver)?;
            let parts: Vec<&syn::Expr> = match m.args.iter().collect::<Vec<_>>().as_slice() {
                [syn::Expr::Array(a)] => a.elems.iter().collect(),
                [syn::Expr::Tuple(t)] => t.elems.iter().collect(),
                a => a.to_vec(),
            };
            let origin: Vec<Expr> = parts
                .iter()
                .map(|p| {
                    let v = expr::lower(cx, p);
                    if !v.dtype().is_int() {
                        cx.err(range(&p), "tile origins are integers");
                    }
                    v.cast(DType::I32)
                })
                .collect();
            let rank = cx.f.buf(buf).shape.len();
            if origin.len() != rank {
                let n = cx.f.buf(buf).name.clone();
                cx.err(
                    range(&m),
                    format!(
                        "`{n}` has {rank} dim(s) but `.at()` gives {} coordinate(s)",
                        origin.len()
                    ),
                );
                return None;
            }
            Some(RegionRef {
                buf,
                origin: Some(origin),
                span: range(&e),
            })
        }
        syn::Expr::MethodCall(m) => {
            cx.err(
                range(&m.method),
                format!(
                    "unknown method `.{}()`; a tile is `buffer` or `buffer.at([origin..])`",
                    m.method
                ),
            );
            None
        }
        _ => {
            let buf = expr::buffer_ref(cx, e)?;
            Some(RegionRef {
                buf,
                origin: None,
                span: range(&e),
            })
        }
    }
}

fn tile_op(cx: &mut Ctx, c: &syn::ExprCall, out: &mut Vec<Stmt>) {
    let Some(f) = t_fn_name(&c.func) else {
        cx.err(
            range(&c.func),
            format!("only `T::` functions can be called in a kernel ({ALL_FNS})"),
        );
        return;
    };
    let args: Vec<&syn::Expr> = c.args.iter().collect();
    let arity = |cx: &mut Ctx, n: std::ops::RangeInclusive<usize>, usage: &str| -> bool {
        if n.contains(&args.len()) {
            true
        } else {
            cx.err(
                range(&c),
                format!("`T::{f}` takes {usage}, got {} argument(s)", args.len()),
            );
            false
        }
    };
    match f.as_str() {
        "copy" => {
            if !arity(cx, 2..=2, "2 arguments `(src, dst)`") {
                return;
            }
            let (Some(src), Some(dst)) = (region_ref(cx, args[0]), region_ref(cx, args[1])) else {
                return;
            };
            if let Some(s) = copy(cx, src, dst, range(&c)) {
                out.push(s);
            }
        }
        "clear" | "fill" => {
            let (n, usage) = if f == "clear" {
                (1, "1 argument `(buffer)`")
            } else {
                (2, "2 arguments `(buffer, value)`")
            };
            if !arity(cx, n..=n, usage) {
                return;
            }
            let Some(r) = region_ref(cx, args[0]) else {
                return;
            };
            let b = cx.f.buf(r.buf).clone();
            if r.origin.is_some() {
                cx.err(r.span, format!("`T::{f}` takes a whole buffer"));
                return;
            }
            if b.scope == Scope::Global && !b.mutable {
                cx.err(
                    r.span,
                    format!(
                        "`{}` is an input (`Tensor`); declare it `TensorMut` to write to it",
                        b.name
                    ),
                );
                return;
            }
            let value = if f == "clear" {
                Expr::Int(0, DType::I32).cast(b.dtype)
            } else {
                let v = expr::lower(cx, args[1]);
                expr::convert_for_store(
                    cx,
                    range(&args[1]),
                    v,
                    b.dtype,
                    &format!("buffer `{}`", b.name),
                )
            };
            let origin = vec![Expr::int(0); b.shape.len()];
            out.push(Stmt::Fill {
                loc: cx.loc,
                dst: Region {
                    buf: r.buf,
                    origin,
                    extent: b.shape.clone(),
                },
                value,
            });
        }
        "gemm" => {
            if !arity(cx, 3..=6, "`(a, b, c)` plus optional `transpose_a = ..`, `transpose_b = ..`, `clear_accum = ..`") {
                return;
            }
            let bufs: Vec<Option<BufId>> =
                args[..3].iter().map(|a| expr::buffer_ref(cx, a)).collect();
            let mut g = Gemm {
                loc: cx.loc,
                inst: GemmInst::Loops,
                a: BufId(0),
                b: BufId(0),
                c: BufId(0),
                trans_a: false,
                trans_b: false,
                clear: false,
            };
            for kw in &args[3..] {
                let syn::Expr::Assign(a) = kw else {
                    cx.err(range(&kw), "optional `T::gemm` arguments are `transpose_a = bool`, `transpose_b = bool`, `clear_accum = bool`");
                    continue;
                };
                let key = match &*a.left {
                    syn::Expr::Path(p) => p
                        .path
                        .get_ident()
                        .map(|i| i.to_string())
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                let val = match expr::lower(cx, &a.right) {
                    Expr::Bool(v) => v,
                    _ => {
                        cx.err(range(&a.right), "gemm flags are compile-time bools");
                        continue;
                    }
                };
                match key.as_str() {
                    "transpose_a" => g.trans_a = val,
                    "transpose_b" => g.trans_b = val,
                    "clear_accum" => g.clear = val,
                    _ => cx.err(range(&a.left), format!("unknown `T::gemm` option `{key}`; options are transpose_a, transpose_b, clear_accum")),
                }
            }
            let [Some(a), Some(b), Some(cc)] = bufs[..] else {
                return;
            };
            g.a = a;
            g.b = b;
            g.c = cc;
            if let Some(s) = gemm_check(cx, g, range(&c)) {
                out.push(s);
            }
        }
        "reduce_sum" | "reduce_max" | "reduce_min" | "reduce_abssum" => {
            if let Some(r) = reduce(cx, c, &f) {
                out.push(Stmt::Reduce(r));
            }
        }
        "cumsum" => cumsum(cx, c, out),
        "atomic_add" => atomic_add(cx, c, out),
        "print" => print(cx, c, out),
        "annotate_layout" => annotate_layout(cx, c),
        "use_swizzle" => cx.err(
            range(c),
            "`T::use_swizzle(panel)` must be the first statement of the kernel body",
        ),
        "kernel" => cx.err(
            range(&c),
            "`T::kernel` is the whole kernel body and cannot be nested",
        ),
        n if n.starts_with("alloc_") => cx.err(
            range(&c),
            format!("bind the allocation to a name: `let buf = T::{n}(..);`"),
        ),
        n if expr::EXPR_FNS.contains(&n) => {
            cx.err(range(&c), format!("the value of `T::{n}` is unused"))
        }
        "parallel" | "serial" | "unroll" | "pipelined" | "persistent" => cx.err(
            range(&c),
            format!("`T::{f}` is a loop: `for i in T::{f}(..) {{ .. }}`"),
        ),
        n => cx.err(
            range(&c.func),
            format!("unknown function `T::{n}`; the tile language has {ALL_FNS}"),
        ),
    }
}

fn gemm_check(cx: &mut Ctx, g: Gemm, span: Span) -> Option<Stmt> {
    let (a, b, c) = (
        cx.f.buf(g.a).clone(),
        cx.f.buf(g.b).clone(),
        cx.f.buf(g.c).clone(),
    );
    let shapes = (a.const_shape(), b.const_shape(), c.const_shape());
    let (Some(sa), Some(sb), Some(sc)) = shapes else {
        cx.err(
            span,
            "`T::gemm` operands are on-chip tiles (shared or fragment buffers)",
        );
        return None;
    };
    if [&a, &b, &c].iter().any(|x| x.scope == Scope::Global) {
        cx.err(
            span,
            "`T::gemm` operands are on-chip tiles: copy global tiles into shared memory first",
        );
        return None;
    }
    if sa.len() != 2 || sb.len() != 2 || sc.len() != 2 {
        cx.err(span, "`T::gemm` takes 2-D tiles");
        return None;
    }
    let (m, ka) = if g.trans_a {
        (sa[1], sa[0])
    } else {
        (sa[0], sa[1])
    };
    let (kb, n) = if g.trans_b {
        (sb[1], sb[0])
    } else {
        (sb[0], sb[1])
    };
    if ka != kb || sc[0] != m || sc[1] != n {
        cx.err(
            span,
            format!(
                "`T::gemm` shapes do not agree: {} is {:?}, {} is {:?}, {} is {:?} (want [M, K] x [K, N] -> [M, N])",
                a.name, sa, b.name, sb, c.name, sc
            ),
        );
        return None;
    }
    if c.scope != Scope::Fragment {
        cx.err(
            span,
            format!(
                "the `T::gemm` accumulator `{}` is a fragment (`T::alloc_fragment`)",
                c.name
            ),
        );
        return None;
    }
    let ok = (a.dtype == b.dtype)
        && matches!(
            (a.dtype, c.dtype),
            (DType::F16 | DType::BF16, DType::F32)
                | (DType::F16, DType::F16)
                | (DType::F32, DType::F32)
                | (DType::F64, DType::F64)
                | (DType::I8 | DType::U8, DType::I32)
        );
    if !ok {
        cx.err(
            span,
            format!(
                "`T::gemm` supports f16/bf16 -> f32, f16 -> f16, f32 -> f32, f64 -> f64 and i8 -> i32; got {} x {} -> {}",
                a.dtype, b.dtype, c.dtype
            ),
        );
        return None;
    }
    Some(Stmt::Gemm(g))
}

/// Resolves the extents of `T::copy`: the side given as a whole buffer gives
/// the shape; `.at([..])` gives only an origin. Leading unit dims align a
/// lower-rank tile with a higher-rank region (e.g. a row of a matrix).
fn copy(cx: &mut Ctx, src: RegionRef, dst: RegionRef, span: Span) -> Option<Stmt> {
    let sb = cx.f.buf(src.buf).clone();
    let db = cx.f.buf(dst.buf).clone();
    if db.scope == Scope::Global && !db.mutable {
        cx.err(
            dst.span,
            format!(
                "`{}` is an input (`Tensor`); declare it `TensorMut` to write to it",
                db.name
            ),
        );
        return None;
    }
    let shape_of = |r: &RegionRef, b: &Buffer| {
        if r.origin.is_none() {
            Some(b.shape.clone())
        } else {
            None
        }
    };
    let tile = match (shape_of(&dst, &db), shape_of(&src, &sb)) {
        (Some(d), Some(s)) => {
            let (dc, sc) = (db.const_shape(), sb.const_shape());
            let squeeze = |v: &[i64]| {
                v.iter()
                    .copied()
                    .skip_while(|&x| x == 1)
                    .collect::<Vec<_>>()
            };
            match (dc, sc) {
                (Some(dc), Some(sc)) if squeeze(&dc) != squeeze(&sc) => {
                    cx.err(
                        span,
                        format!(
                            "`T::copy` between incompatible tiles: `{}` is {:?} but `{}` is {:?}",
                            sb.name, sc, db.name, dc
                        ),
                    );
                    return None;
                }
                (Some(dc), Some(_)) => {
                    let sq = squeeze(&dc);
                    if sq.is_empty() {
                        vec![Expr::int(1)]
                    } else {
                        sq.into_iter().map(Expr::int).collect()
                    }
                }
                _ if d == s => d,
                _ => {
                    cx.err(span, format!("`T::copy` between `{}` and `{}`: shapes cannot be shown equal; give one side as `.at([..])`", sb.name, db.name));
                    return None;
                }
            }
        }
        (Some(d), None) => d,
        (None, Some(s)) => s,
        (None, None) => {
            cx.err(
                span,
                "`T::copy` needs one side as a whole tile to give the shape; both are `.at([..])`",
            );
            return None;
        }
    };
    let make = |cx: &mut Ctx, r: RegionRef, b: &Buffer| -> Option<Region> {
        let rank = b.shape.len();
        if tile.len() > rank {
            cx.err(
                r.span,
                format!("`T::copy` between incompatible tiles: the tile has {} dims but `{}` has {rank}", tile.len(), b.name),
            );
            return None;
        }
        let mut extent = vec![Expr::int(1); rank - tile.len()];
        extent.extend(tile.iter().cloned());
        let origin = r.origin.unwrap_or_else(|| vec![Expr::int(0); rank]);
        if let Some(bs) = b.const_shape() {
            for (d, (o, e)) in origin.iter().zip(&extent).enumerate() {
                if let (Some(o), Some(e)) = (o.as_int(), e.as_int()) {
                    if o + e > bs[d] || e > bs[d] {
                        cx.err(
                            r.span,
                            format!("`T::copy` between incompatible tiles: the tile does not fit in `{}` (dim {d}: {o}+{e} > {})", b.name, bs[d]),
                        );
                        return None;
                    }
                }
            }
        }
        Some(Region {
            buf: r.buf,
            origin,
            extent,
        })
    };
    let s = make(cx, src, &sb)?;
    let d = make(cx, dst, &db)?;
    Some(Stmt::Copy {
        inst: CopyInst::Loops,
        loc: cx.loc,
        src: s,
        dst: d,
    })
}

/// Positional arguments and `name = value` keyword arguments of a call.
fn split_args(args: &[&syn::Expr]) -> (Vec<syn::Expr>, Vec<(String, syn::Expr)>) {
    let (mut pos, mut kw) = (Vec::new(), Vec::new());
    for a in args {
        match a {
            syn::Expr::Assign(x) => {
                let key = match &*x.left {
                    syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
                    _ => None,
                };
                kw.push((key.unwrap_or_default(), (*x.right).clone()));
            }
            e => pos.push((*e).clone()),
        }
    }
    (pos, kw)
}

/// A compile-time integer or bool option: positional slot `i`, or `name = ..`.
fn opt_const(
    cx: &mut Ctx,
    pos: &[syn::Expr],
    kw: &[(String, syn::Expr)],
    i: usize,
    name: &str,
) -> Option<Expr> {
    let e = kw
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, e)| e)
        .or(pos.get(i))?;
    let v = expr::lower(cx, e);
    if v.as_int().is_none() && !matches!(v, Expr::Bool(_)) {
        cx.err(range(e), format!("`{name}` is a compile-time constant"));
        return None;
    }
    Some(v)
}

/// `T::reduce_<op>(src, dst, dim = -1, clear = true)`.
fn reduce(cx: &mut Ctx, c: &syn::ExprCall, f: &str) -> Option<Reduce> {
    let args: Vec<&syn::Expr> = c.args.iter().collect();
    let (pos, kw) = split_args(&args);
    if pos.len() < 2 || pos.len() > 4 || kw.iter().any(|(k, _)| k != "dim" && k != "clear") {
        cx.err(
            range(c),
            format!("`T::{f}` takes `(src, dst)` plus optional `dim` and `clear`"),
        );
        return None;
    }
    let src = expr::buffer_ref(cx, &pos[0])?;
    let dst = expr::buffer_ref(cx, &pos[1])?;
    let (sb, db) = (cx.f.buf(src).clone(), cx.f.buf(dst).clone());
    let (Some(ss), Some(ds)) = (sb.const_shape(), db.const_shape()) else {
        cx.err(
            range(c),
            format!("`T::{f}` reduces on-chip tiles (shared, fragment or local buffers)"),
        );
        return None;
    };
    if sb.scope == Scope::Global || db.scope == Scope::Global || ss.len() > 2 {
        cx.err(
            range(c),
            format!("`T::{f}` reduces a 1-D or 2-D on-chip tile into an on-chip tile"),
        );
        return None;
    }
    let rank = ss.len() as i64;
    let dim = match opt_const(cx, &pos, &kw, 2, "dim") {
        Some(Expr::Int(d, _)) => d,
        Some(_) => return None,
        None => -1,
    };
    let d = if dim < 0 { dim + rank } else { dim };
    if d < 0 || d >= rank {
        cx.err(
            range(c),
            format!(
                "`dim` {dim} is out of range for the {rank}-D tile `{}`",
                sb.name
            ),
        );
        return None;
    }
    let clear = match opt_const(cx, &pos, &kw, 3, "clear") {
        Some(Expr::Bool(b)) => b,
        Some(_) => {
            cx.err(range(c), "`clear` is a bool");
            return None;
        }
        None => true,
    };
    let mut want = ss.clone();
    want.remove(d as usize);
    if want.is_empty() {
        want.push(1);
    }
    if want != ds {
        cx.err(
            range(c),
            format!(
                "`T::{f}` over dim {d} of `{}` {:?} gives {:?}, but `{}` is {:?}",
                sb.name, ss, want, db.name, ds
            ),
        );
        return None;
    }
    if !(sb.dtype.is_float() || sb.dtype.is_int()) || (sb.dtype.is_float() != db.dtype.is_float()) {
        cx.err(
            range(c),
            format!(
                "`T::{f}` from {} into {}: both float or both integer",
                sb.dtype, db.dtype
            ),
        );
        return None;
    }
    let op = match f {
        "reduce_sum" => ReduceOp::Sum,
        "reduce_max" => ReduceOp::Max,
        "reduce_min" => ReduceOp::Min,
        _ => ReduceOp::AbsSum,
    };
    Some(Reduce {
        loc: cx.loc,
        src,
        dst,
        dim: d as usize,
        op,
        clear,
    })
}

/// `T::cumsum(src, dst, dim = 0, reverse = false)`: an inclusive prefix sum
/// along `dim`, lowered here to a parallel loop over the other dim and a
/// serial scan.
fn cumsum(cx: &mut Ctx, c: &syn::ExprCall, out: &mut Vec<Stmt>) {
    let args: Vec<&syn::Expr> = c.args.iter().collect();
    let (pos, kw) = split_args(&args);
    if pos.len() < 2 || pos.len() > 4 || kw.iter().any(|(k, _)| k != "dim" && k != "reverse") {
        cx.err(
            range(c),
            "`T::cumsum` takes `(src, dst)` plus optional `dim` and `reverse`",
        );
        return;
    }
    let (Some(src), Some(dst)) = (expr::buffer_ref(cx, &pos[0]), expr::buffer_ref(cx, &pos[1]))
    else {
        return;
    };
    let (sb, db) = (cx.f.buf(src).clone(), cx.f.buf(dst).clone());
    let (Some(ss), Some(ds)) = (sb.const_shape(), db.const_shape()) else {
        cx.err(range(c), "`T::cumsum` scans on-chip tiles");
        return;
    };
    if ss != ds || ss.len() > 2 || sb.scope == Scope::Global || db.scope == Scope::Global {
        cx.err(
            range(c),
            format!(
                "`T::cumsum` takes two on-chip tiles of one 1-D or 2-D shape; got {:?} and {:?}",
                ss, ds
            ),
        );
        return;
    }
    let rank = ss.len() as i64;
    let dim = match opt_const(cx, &pos, &kw, 2, "dim") {
        Some(Expr::Int(d, _)) => {
            if d < 0 {
                d + rank
            } else {
                d
            }
        }
        Some(_) => return,
        None => 0,
    };
    if dim < 0 || dim >= rank {
        cx.err(
            range(c),
            format!("`dim` is out of range for the {rank}-D tile `{}`", sb.name),
        );
        return;
    }
    let reverse = match opt_const(cx, &pos, &kw, 3, "reverse") {
        Some(Expr::Bool(b)) => b,
        Some(_) => return,
        None => false,
    };
    let t = db.dtype;
    let acc = cx.f.new_var("acc", t);
    let k = cx.f.new_var("k", DType::I32);
    let len = ss[dim as usize];
    let kk = if reverse {
        Expr::bin(BinOp::Sub, Expr::int(len - 1), Expr::Var(k, DType::I32))
    } else {
        Expr::Var(k, DType::I32)
    };
    let (outer, idx): (Option<VarId>, Vec<Expr>) = if rank == 1 {
        (None, vec![kk])
    } else {
        let o = cx.f.new_var("i", DType::I32);
        let ov = Expr::Var(o, DType::I32);
        (Some(o), if dim == 1 { vec![ov, kk] } else { vec![kk, ov] })
    };
    let load = Expr::Load(src, idx.clone(), sb.dtype).cast(t);
    let scan = Stmt::For {
        loc: cx.loc,
        var: k,
        start: Expr::int(0),
        extent: Expr::int(len),
        kind: ForKind::Serial,
        body: Box::new(Stmt::Seq(vec![
            Stmt::Assign {
                var: acc,
                value: Expr::add(Expr::Var(acc, t), load),
            },
            Stmt::Store {
                loc: cx.loc,
                buf: dst,
                idx,
                value: Expr::Var(acc, t),
            },
        ])),
    };
    let body = Stmt::Seq(vec![
        Stmt::Local {
            var: acc,
            init: Expr::Int(0, DType::I32).cast(t),
        },
        scan,
    ]);
    out.push(match outer {
        None => body,
        Some(o) => Stmt::For {
            loc: cx.loc,
            var: o,
            start: Expr::int(0),
            extent: Expr::int(ss[1 - dim as usize]),
            kind: ForKind::Parallel,
            body: Box::new(body),
        },
    });
}

/// `T::atomic_add(buf[idx], value)` for one element, or
/// `T::atomic_add(dst.at([..]), tile)` for a tile (like `T::copy`, adding).
fn atomic_add(cx: &mut Ctx, c: &syn::ExprCall, out: &mut Vec<Stmt>) {
    let args: Vec<&syn::Expr> = c.args.iter().collect();
    if args.len() != 2 {
        cx.err(
            range(c),
            "`T::atomic_add` takes `(dst[idx], value)` or `(dst.at([..]), tile)`",
        );
        return;
    }
    let writable = |cx: &mut Ctx, b: BufId, e: &syn::Expr| -> bool {
        let buf = cx.f.buf(b).clone();
        if buf.scope == Scope::Global && !buf.mutable {
            cx.err(
                range(e),
                format!(
                    "`{}` is an input (`Tensor`); declare it `TensorMut` to write to it",
                    buf.name
                ),
            );
            return false;
        }
        if matches!(buf.scope, Scope::Fragment | Scope::Local) {
            cx.err(
                range(e),
                format!(
                    "`T::atomic_add` targets global or shared memory; `{}` is {}",
                    buf.name,
                    buf.scope.name()
                ),
            );
            return false;
        }
        true
    };
    if let syn::Expr::Index(ix) = args[0] {
        let (buf, idx) = expr::index(cx, ix);
        let v = expr::lower(cx, args[1]);
        let Some(b) = buf else { return };
        if !writable(cx, b, args[0]) {
            return;
        }
        let t = cx.f.buf(b).dtype;
        let name = cx.f.buf(b).name.clone();
        let value = expr::convert_for_store(cx, range(args[1]), v, t, &format!("buffer `{name}`"));
        out.push(Stmt::AtomicAdd {
            loc: cx.loc,
            buf: b,
            idx,
            value,
        });
        return;
    }
    let (Some(dst), Some(src)) = (region_ref(cx, args[0]), region_ref(cx, args[1])) else {
        return;
    };
    if !writable(cx, dst.buf, args[0]) {
        return;
    }
    if let Some(Stmt::Copy { src, dst, .. }) = copy(cx, src, dst, range(c)) {
        out.push(Stmt::AtomicAddTile {
            loc: cx.loc,
            src,
            dst,
        });
    }
}

/// `T::print(value)`, `T::print(value, "label")`, or `T::print(buffer)`.
fn print(cx: &mut Ctx, c: &syn::ExprCall, out: &mut Vec<Stmt>) {
    let args: Vec<&syn::Expr> = c.args.iter().collect();
    let label = match args.get(1) {
        Some(syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        })) if args.len() == 2 => Some(s.value()),
        None if args.len() == 1 => None,
        _ => {
            cx.err(
                range(c),
                "`T::print` takes a value or buffer and an optional string label",
            );
            return;
        }
    };
    // A whole on-chip buffer prints element by element.
    if let syn::Expr::Path(p) = args[0] {
        if let Some(Sym::Buf(b)) = p.path.get_ident().and_then(|i| cx.lookup(&i.to_string())) {
            let buf = cx.f.buf(b).clone();
            let Some(shape) = buf.const_shape() else {
                cx.err(
                    range(args[0]),
                    "`T::print` of a buffer needs a constant shape",
                );
                return;
            };
            let vars: Vec<VarId> = shape
                .iter()
                .map(|_| cx.f.new_var("p", DType::I32))
                .collect();
            let idx: Vec<Expr> = vars.iter().map(|&v| Expr::Var(v, DType::I32)).collect();
            let name = label.unwrap_or(buf.name.clone());
            let mut s = Stmt::Print {
                loc: cx.loc,
                label: name,
                value: Expr::Load(b, idx, buf.dtype),
            };
            for (v, n) in vars.into_iter().zip(shape).rev() {
                s = Stmt::For {
                    loc: cx.loc,
                    var: v,
                    start: Expr::int(0),
                    extent: Expr::int(n),
                    kind: ForKind::Serial,
                    body: Box::new(s),
                };
            }
            out.push(s);
            return;
        }
    }
    let value = expr::lower(cx, args[0]);
    let label = label.unwrap_or_else(|| quote::ToTokens::to_token_stream(args[0]).to_string());
    out.push(Stmt::Print {
        loc: cx.loc,
        label,
        value,
    });
}

/// `T::annotate_layout(buf, T::swizzled)`: store a shared tile of 2-byte
/// elements in the swizzled order (16-byte chunks XOR-permuted per row), so
/// that column-wise and row-wise 16-byte accesses are free of bank conflicts.
/// Layouts change where elements live, never what a program computes; the
/// CPU backend ignores them.
fn annotate_layout(cx: &mut Ctx, c: &syn::ExprCall) {
    let args: Vec<&syn::Expr> = c.args.iter().collect();
    let usage = "`T::annotate_layout(shared_buffer, T::swizzled)`";
    let [buf, layout] = args.as_slice() else {
        cx.err(range(c), format!("{usage} takes a buffer and a layout"));
        return;
    };
    let Some(b) = expr::buffer_ref(cx, buf) else {
        return;
    };
    if !matches!(layout, syn::Expr::Path(_))
        || expr::t_fn_name(layout).as_deref() != Some("swizzled")
    {
        cx.err(
            range(*layout),
            format!("unknown layout; the supported one is `T::swizzled`: {usage}"),
        );
        return;
    }
    let bb = cx.f.buf(b).clone();
    let shape = bb.const_shape().unwrap_or_default();
    let ok = bb.scope == Scope::Shared
        && bb.dtype.bytes() == 2
        && shape.len() == 2
        && shape[0] % 8 == 0
        && shape[1] % 8 == 0
        && (shape[1] / 8) & (shape[1] / 8 - 1) == 0;
    if !ok {
        cx.err(
            range(*buf),
            format!(
                "`{}` cannot be swizzled: the swizzled layout is for 2-D shared tiles of 2-byte elements \
                 whose rows are a multiple of 8 and whose row length is 8 times a power of two \
                 (it is {} {:?} {})",
                bb.name,
                bb.scope.name(),
                shape,
                bb.dtype
            ),
        );
        return;
    }
    cx.f.buffers[b.0 as usize].layout = Some(Layout::Swizzled);
}
