//! Allocations, the builtins bound by `let`: on-chip buffers
//! (`T::alloc_shared`, `T::alloc_fragment`, `T::alloc_local`) and mutable
//! scalars (`T::alloc_var`).

use super::builtins::Call;
use super::{expr, limits, Ctx, Sym};
use crate::diag::{range, At};
use crate::ir::*;

/// `let name = T::alloc_shared::<f16>([m, k])` or `T::alloc_shared([m, k], f16)`
/// (and `alloc_fragment`, `alloc_local`): an on-chip buffer of `scope`.
pub(super) fn buffer(cx: &mut Ctx, k: &Call, name: &str, scope: Scope, out: &mut Vec<Stmt>) {
    match new_buffer(cx, k, name, scope) {
        Some(b) => {
            out.push(Stmt::Alloc {
                loc: cx.loc,
                buf: b,
            });
            cx.bind(name, Sym::Buf(b));
        }
        // Reported; its uses stay quiet.
        None => cx.bind(name, Sym::Poison),
    }
}

fn new_buffer(cx: &mut Ctx, k: &Call, name: &str, scope: Scope) -> Option<BufId> {
    let (fname, usage) = (k.name(), k.usage());
    if cx.parallel_depth > 0 && scope != Scope::Local {
        cx.err(
            k.span(),
            format!(
                "`T::{fname}` inside a `T::parallel` loop: the buffer belongs to the whole block; \
                 allocate it before the loop"
            ),
        );
        return None;
    }
    let (shape_arg, dtype) = match (k.turbofish(), k.args.as_slice()) {
        (Some(t), [s]) => (*s, expr::dtype_of_type(t)),
        (None, [s, d @ syn::Expr::Path(_)]) => (*s, expr::dtype_of_name(d)),
        _ => {
            cx.err(
                k.span(),
                format!("`T::{fname}` takes a shape and a dtype: {usage}"),
            );
            return None;
        }
    };
    let Some(dtype) = dtype else {
        cx.err(
            k.span(),
            format!("unknown element type in `T::{fname}`: {usage}"),
        );
        return None;
    };
    let dims = expr::elems(shape_arg);
    if dims.is_empty() {
        cx.err(range(&shape_arg), "a buffer has at least one dim");
        return None;
    }
    let mut shape = Vec::new();
    for d in dims {
        let e = expr::lower(cx, d);
        match e.as_int() {
            Some(v) if v > 0 => shape.push(v),
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
    if !limits::check_buffer(cx, k.span(), name, scope, dtype, &shape) {
        return None;
    }
    Some(cx.f.new_buf(Buffer {
        layout: None,
        name: name.to_string(),
        dtype,
        shape: shape.into_iter().map(Expr::int).collect(),
        scope,
        mutable: true,
    }))
}

/// `let name = T::alloc_var::<f32>(init)`: a mutable scalar (zero without
/// `init`).
pub(super) fn var(cx: &mut Ctx, k: &Call, name: &str, out: &mut Vec<Stmt>) {
    let Some(t) = k.turbofish().and_then(expr::dtype_of_type) else {
        cx.err(k.span(), format!("{} needs a dtype", k.usage()));
        return;
    };
    let init = match k.args.first() {
        Some(e) => {
            let v = expr::lower(cx, e);
            expr::convert_for_store(cx, At::Expr(e), v, t, &format!("`{name}`"))
        }
        None => Expr::Int(0, DType::I32).cast(t),
    };
    let var = cx.f.new_var(name, t);
    out.push(Stmt::Local { var, init });
    cx.bind(name, Sym::Mut(var));
}
