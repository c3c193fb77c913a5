//! The tile builtins that combine a tile's elements along a dim:
//! `T::reduce_sum`/`_max`/`_min`/`_abssum` and `T::cumsum`, with their
//! positional-or-keyword options (`dim`, `clear`, `reverse`).

use super::builtins::Call;
use super::tile_ops::{no_pairs, whole_tile_op};
use super::{expr, Ctx};
use crate::diag::range;
use crate::ir::*;

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
pub(super) fn reduce(cx: &mut Ctx, k: &Call, op: ReduceOp, out: &mut Vec<Stmt>) {
    if !whole_tile_op(cx, k) {
        return;
    }
    if let Some(r) = check_reduce(cx, k, op) {
        out.push(Stmt::Reduce(r));
    }
}

fn check_reduce(cx: &mut Ctx, k: &Call, op: ReduceOp) -> Option<Reduce> {
    let f = k.name();
    let (pos, kw) = split_args(&k.args);
    if pos.len() < 2 || pos.len() > 4 || kw.iter().any(|(k, _)| k != "dim" && k != "clear") {
        cx.err(
            k.span(),
            format!("`T::{f}` takes `(src, dst)` plus optional `dim` and `clear`"),
        );
        return None;
    }
    let src = expr::buffer_ref(cx, &pos[0])?;
    let dst = expr::buffer_ref(cx, &pos[1])?;
    let (sb, db) = (cx.f.buf(src).clone(), cx.f.buf(dst).clone());
    if !no_pairs(cx, k.span(), f, &[&sb, &db]) {
        return None;
    }
    let (Some(ss), Some(ds)) = (sb.const_shape(), db.const_shape()) else {
        cx.err(
            k.span(),
            format!("`T::{f}` reduces on-chip tiles (shared, fragment or local buffers)"),
        );
        return None;
    };
    if sb.scope == Scope::Global || db.scope == Scope::Global || ss.len() > 2 {
        cx.err(
            k.span(),
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
            k.span(),
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
            cx.err(k.span(), "`clear` is a bool");
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
            k.span(),
            format!(
                "`T::{f}` over dim {d} of `{}` {:?} gives {:?}, but `{}` is {:?}",
                sb.name, ss, want, db.name, ds
            ),
        );
        return None;
    }
    if let Some(t) = [sb.dtype, db.dtype].into_iter().find(|t| t.is_f8()) {
        cx.err(
            k.span(),
            format!(
                "`T::{f}` does not reduce {t} tiles (f8 is a storage type); copy the tile into an \
                 f32 fragment with `T::copy` and reduce that"
            ),
        );
        return None;
    }
    if !(sb.dtype.is_float() || sb.dtype.is_int()) || (sb.dtype.is_float() != db.dtype.is_float()) {
        cx.err(
            k.span(),
            format!(
                "`T::{f}` from {} into {}: both float or both integer",
                sb.dtype, db.dtype
            ),
        );
        return None;
    }
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
pub(super) fn cumsum(cx: &mut Ctx, k: &Call, out: &mut Vec<Stmt>) {
    if !whole_tile_op(cx, k) {
        return;
    }
    let (pos, kw) = split_args(&k.args);
    if pos.len() < 2 || pos.len() > 4 || kw.iter().any(|(k, _)| k != "dim" && k != "reverse") {
        cx.err(
            k.span(),
            "`T::cumsum` takes `(src, dst)` plus optional `dim` and `reverse`",
        );
        return;
    }
    let (Some(src), Some(dst)) = (expr::buffer_ref(cx, &pos[0]), expr::buffer_ref(cx, &pos[1]))
    else {
        return;
    };
    let (sb, db) = (cx.f.buf(src).clone(), cx.f.buf(dst).clone());
    if !no_pairs(cx, k.span(), "cumsum", &[&sb, &db]) {
        return;
    }
    let (Some(ss), Some(ds)) = (sb.const_shape(), db.const_shape()) else {
        cx.err(k.span(), "`T::cumsum` scans on-chip tiles");
        return;
    };
    if ss != ds || ss.len() > 2 || sb.scope == Scope::Global || db.scope == Scope::Global {
        cx.err(
            k.span(),
            format!(
                "`T::cumsum` takes two on-chip tiles of one 1-D or 2-D shape; got {:?} and {:?}",
                ss, ds
            ),
        );
        return;
    }
    if let Some(t) = [sb.dtype, db.dtype].into_iter().find(|t| t.is_f8()) {
        cx.err(
            k.span(),
            format!("`T::cumsum` does not scan {t} tiles (f8 is a storage type); scan an f32 copy"),
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
            k.span(),
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
