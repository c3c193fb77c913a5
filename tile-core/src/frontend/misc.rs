//! The builtins that are neither allocations, loops nor tile ops:
//! `T::print` (device printf) and `T::annotate_layout` (a buffer's layout).

use super::builtins::{self, Call};
use super::{expr, Ctx, Sym};
use crate::diag::range;
use crate::ir::*;

/// Why `T::print` refuses a packed pair.
const PRINT_PAIR: &str =
    "`T::print` prints numbers; print a packed pair's halves, `T::low(v)` and `T::high(v)`";

/// `T::print(value)`, `T::print(value, "label")`, or `T::print(buffer)`.
pub(super) fn print(cx: &mut Ctx, k: &Call, out: &mut Vec<Stmt>) {
    let args = &k.args;
    let label = match args.get(1) {
        Some(syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        })) if args.len() == 2 => Some(s.value()),
        None if args.len() == 1 => None,
        _ => {
            cx.err(
                k.span(),
                "`T::print` takes a value or buffer and an optional string label",
            );
            return;
        }
    };
    // A whole on-chip buffer prints element by element.
    if let syn::Expr::Path(p) = args[0] {
        if let Some(Sym::Buf(b)) = p
            .path
            .get_ident()
            .and_then(|i| cx.lookup(&super::name_of(i)))
        {
            let buf = cx.f.buf(b).clone();
            if buf.dtype.is_packed() {
                cx.err(range(args[0]), PRINT_PAIR);
                return;
            }
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
    if value.dtype().is_packed() {
        cx.err(range(args[0]), PRINT_PAIR);
        return;
    }
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
pub(super) fn annotate_layout(cx: &mut Ctx, k: &Call, _: &mut Vec<Stmt>) {
    let [buf, layout] = k.args[..] else {
        return;
    };
    let Some(b) = expr::buffer_ref(cx, buf) else {
        return;
    };
    let Some(layout) = builtins::layout_of(layout) else {
        cx.err(
            range(layout),
            format!(
                "unknown layout; {}: {}",
                builtins::layouts_phrase(),
                k.usage()
            ),
        );
        return;
    };
    let bb = cx.f.buf(b).clone();
    let shape = bb.const_shape().unwrap_or_default();
    let ok = !matches!(layout, Layout::Swizzled)
        || bb.scope == Scope::Shared
            && bb.dtype.bytes() == 2
            && shape.len() == 2
            && shape[0] % 8 == 0
            && shape[1] % 8 == 0
            && (shape[1] / 8) & (shape[1] / 8 - 1) == 0;
    if !ok {
        cx.err(
            range(buf),
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
    cx.f.buffers[b.0 as usize].layout = Some(layout);
}
