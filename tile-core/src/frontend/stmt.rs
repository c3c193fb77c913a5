//! Statements of a block body: `let`, assignments and stores, `if`, blocks,
//! and the dispatch of the rest: `for` loops to `loops`, `let x = T::alloc_..`
//! and `T::f(..);` statements to their builtin's lowering function.
//!
//! Every IR statement made while lowering a source statement carries that
//! statement's position (`Ctx::loc`), set here.

use super::builtins::{self, Call, Lower, Position};
use super::{expr, limits, loops, Ctx, Sym};
use crate::diag::{expr_range, range, stmt_range, At};
use crate::ir::*;

pub fn lower_block(cx: &mut Ctx, b: &syn::Block) -> Vec<Stmt> {
    lower_stmts(cx, &b.stmts)
}

/// Statements of a block, in a scope of their own.
pub fn lower_stmts(cx: &mut Ctx, stmts: &[syn::Stmt]) -> Vec<Stmt> {
    cx.push();
    let mut out = Vec::new();
    for s in stmts {
        lower_stmt(cx, s, &mut out);
    }
    cx.pop();
    out
}

pub fn lower_stmt(cx: &mut Ctx, s: &syn::Stmt, out: &mut Vec<Stmt>) {
    // An expression statement is placed without its `;`: a tile op at its call.
    let at = match s {
        syn::Stmt::Expr(e, _) => expr_range(e),
        s => stmt_range(s),
    };
    let max = limits::MAX_NESTING;
    if limits::nesting(s, max) > max {
        cx.err(
            at,
            format!(
                "this statement nests more than {max} levels deep (operators, parentheses, calls, \
                 blocks); split it with `let`s"
            ),
        );
        return;
    }
    let outer = std::mem::replace(&mut cx.loc, at.into());
    let poisoned = std::mem::replace(&mut cx.poisoned, false);
    lower_stmt_at(cx, s, out);
    cx.loc = outer;
    cx.poisoned = poisoned;
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

/// The names a refused pattern would bind: their uses stay quiet (the
/// pattern was reported).
fn poison_names(cx: &mut Ctx, p: &syn::Pat) {
    match p {
        syn::Pat::Ident(pi) => cx.bind(&super::name_of(&pi.ident), Sym::Poison),
        syn::Pat::Tuple(t) => t.elems.iter().for_each(|e| poison_names(cx, e)),
        syn::Pat::Paren(q) => poison_names(cx, &q.pat),
        syn::Pat::Type(t) => poison_names(cx, &t.pat),
        _ => {}
    }
}

fn local(cx: &mut Ctx, l: &syn::Local, out: &mut Vec<Stmt>) {
    let (ident, mutable, ty) = match &l.pat {
        syn::Pat::Ident(pi) => (pi.ident.clone(), pi.mutability.is_some(), None),
        syn::Pat::Type(pt) => match &*pt.pat {
            syn::Pat::Ident(pi) => (pi.ident.clone(), pi.mutability.is_some(), Some(&*pt.ty)),
            p => {
                cx.err(range(&p), "`let` binds one plain name");
                poison_names(cx, p);
                return;
            }
        },
        p => {
            cx.err(
                range(&p),
                "`let` binds one plain name (write one `let` per value)",
            );
            poison_names(cx, p);
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
    let name = cx.def_name(&ident);
    // `let buf = T::alloc_shared::<f16>(..)` and the other allocations.
    if let syn::Expr::Call(c) = &*init.expr {
        if let Some(b) = builtins::builtin_of(c) {
            if let Lower::Alloc(lower) = b.lower {
                let k = Call::new(b, c);
                if builtins::check_arity(cx, &k) {
                    lower(cx, &k, &name, out);
                }
                return;
            }
        }
    }
    let mut v = expr::lower(cx, &init.expr);
    if cx.poisoned {
        // A value made from a name already reported: the new name is quiet
        // too (its type would be a guess).
        cx.bind(&name, Sym::Poison);
        return;
    }
    if let Some(ty) = ty {
        match expr::dtype_of_type(ty) {
            Some(t) => {
                v = expr::convert_for_store(cx, At::Expr(&init.expr), v, t, &format!("`{name}`"))
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

fn stmt_expr(cx: &mut Ctx, e: &syn::Expr, out: &mut Vec<Stmt>) {
    match e {
        syn::Expr::Assign(a) => assign(cx, &a.left, None, &a.right, At::Expr(e), out),
        syn::Expr::Binary(b) => {
            use syn::BinOp as B;
            let op = match b.op {
                B::AddAssign(_) => BinOp::Add,
                B::SubAssign(_) => BinOp::Sub,
                B::MulAssign(_) => BinOp::Mul,
                B::DivAssign(_) => BinOp::Div,
                B::RemAssign(_) => BinOp::Rem,
                B::BitAndAssign(_) => BinOp::BitAnd,
                B::BitOrAssign(_) => BinOp::BitOr,
                B::BitXorAssign(_) => BinOp::BitXor,
                B::ShlAssign(_) => BinOp::Shl,
                B::ShrAssign(_) => BinOp::Shr,
                _ => {
                    cx.err(range(&e), "this expression has no effect; statements are stores, loops, `if`, `let` or `T::` tile ops");
                    return;
                }
            };
            assign(cx, &b.left, Some(op), &b.right, At::Expr(e), out)
        }
        syn::Expr::ForLoop(f) => loops::for_loop(cx, f, out),
        syn::Expr::If(i) => out.extend(taken(if_stmt(cx, i))),
        syn::Expr::Block(b) => out.push(Stmt::Seq(lower_block(cx, &b.block))),
        syn::Expr::Call(c) => call(cx, c, out),
        other => cx.err(
            range(&other),
            format!(
                "unsupported statement in a kernel: {}",
                expr::describe(other)
            ),
        ),
    }
}

/// An `if` whose condition folded to a constant (one over compile-time
/// parameters, `if fill == 1`) as the statements of the branch it takes,
/// spliced into the enclosing block: a variant's dead branch then leaves no
/// statement behind for the passes to plan around (a warp-specialized
/// pipeline needs the statements before it to be simple). Both branches
/// were lowered and checked first.
fn taken(s: Stmt) -> Vec<Stmt> {
    match s {
        Stmt::If {
            cond: Expr::Bool(c),
            then,
            els,
            ..
        } => match if c { Some(*then) } else { els.map(|e| *e) } {
            Some(Stmt::Seq(v)) => v,
            Some(x) => taken(x),
            None => Vec::new(),
        },
        s => vec![s],
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
    span: At<'_>,
    out: &mut Vec<Stmt>,
) {
    match lhs {
        syn::Expr::Index(ix) => {
            let (buf, idx) = expr::index(cx, ix);
            let rhs_v = expr::lower(cx, rhs);
            let Some(b) = buf else { return };
            let (bname, dtype) = (cx.f.buf(b).name.clone(), cx.f.buf(b).dtype);
            if !expr::check_writable(cx, b, range(&ix.expr)) {
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
                At::Expr(rhs),
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
            let n = p.path.get_ident().map(super::name_of).unwrap_or_default();
            let rhs_v = expr::lower(cx, rhs);
            match cx.lookup(&n) {
                Some(Sym::Mut(v)) => {
                    let t = cx.f.var(v).dtype;
                    let value = match op {
                        Some(op) => expr::arith(cx, span, op, Expr::Var(v, t), rhs_v),
                        None => rhs_v,
                    };
                    let value = expr::convert_for_store(cx, At::Expr(rhs), value, t, &format!("`{n}`"));
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

/// A statement `T::f(..);`.
fn call(cx: &mut Ctx, c: &syn::ExprCall, out: &mut Vec<Stmt>) {
    let Some(k) = builtins::resolve(cx, c) else {
        return;
    };
    match k.builtin.lower {
        Lower::Stmt(lower) => {
            if builtins::check_arity(cx, &k) {
                lower(cx, &k, out);
            }
        }
        _ => builtins::misplaced(cx, &k, Position::Stmt),
    }
}
