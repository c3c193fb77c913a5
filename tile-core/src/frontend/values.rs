//! The value builtins: `T::ceildiv`, `T::max`, `T::min`, the math functions,
//! `T::if_then_else`, `T::padded`, the dtype constants `T::infinity` and `T::max_value`,
//! and `T::get_thread_binding`. Each gets a call whose argument count the
//! table has checked, and gives an expression.

use super::builtins::Call;
use super::expr::{self, arith, select, unify};
use super::Ctx;
use crate::diag::{range, At};
use crate::ir::*;

/// The arguments, lowered in order.
fn operands(cx: &mut Ctx, k: &Call) -> Vec<Expr> {
    k.args.iter().map(|a| expr::lower(cx, a)).collect()
}

pub(super) fn ceildiv(cx: &mut Ctx, k: &Call) -> Expr {
    let span = k.span();
    let [a, b]: [Expr; 2] = operands(cx, k).try_into().expect("arity 2");
    if !a.dtype().is_int() || !b.dtype().is_int() {
        cx.err(span, "`T::ceildiv` takes integers");
    }
    let (a, b) = unify(cx, span.into(), a, b);
    let one = Expr::Int(1, b.dtype());
    let num = Expr::bin(BinOp::Sub, Expr::add(a, b.clone()), one);
    Expr::bin(BinOp::Div, num, b)
}

/// `T::max(a, b)` and `T::min(a, b)`.
pub(super) fn binary(cx: &mut Ctx, k: &Call, op: BinOp) -> Expr {
    let [a, b]: [Expr; 2] = operands(cx, k).try_into().expect("arity 2");
    arith(cx, k.span().into(), op, a, b)
}

pub(super) fn if_then_else(cx: &mut Ctx, k: &Call) -> Expr {
    let [c, a, b]: [Expr; 3] = operands(cx, k).try_into().expect("arity 3");
    select(cx, k.span().into(), c, a, b)
}

/// `T::padded(x[i], pad)`: `x[i]`, or `pad` where the index is outside the
/// tensor `x` (a guarded read is 0 there otherwise). `inject_bounds` makes
/// it a select on the read's bounds, or the plain read where it proves them.
pub(super) fn padded(cx: &mut Ctx, k: &Call) -> Expr {
    let v = expr::lower(cx, k.args[0]);
    let Expr::Load(b, ..) = &v else {
        cx.err(
            range(k.args[0]),
            "`T::padded` takes an element of a tensor argument, `x[i]` or `x[(i, j)]`",
        );
        return v;
    };
    let buf = cx.f.buf(*b).clone();
    if buf.scope != Scope::Global {
        cx.err(
            range(k.args[0]),
            format!(
                "`T::padded` is for reads of a tensor argument, which may fall outside it; `{}` is a \
                 {} buffer, never read out of bounds",
                buf.name,
                buf.scope.name()
            ),
        );
        return v;
    }
    let t = v.dtype();
    let pad = expr::lower(cx, k.args[1]);
    let what = format!("the padding of a read of `{}`", buf.name);
    let pad = expr::convert_for_store(cx, At::Expr(k.args[1]), pad, t, &what);
    Expr::Call(Intrin::Padded, vec![v, pad], t)
}

/// `T::clamp(x, lo, hi)`: `T::min(T::max(x, lo), hi)`, for integers and floats.
pub(super) fn clamp(cx: &mut Ctx, k: &Call) -> Expr {
    let [x, lo, hi]: [Expr; 3] = operands(cx, k).try_into().expect("arity 3");
    let span = k.span();
    let low = arith(cx, span.into(), BinOp::Max, x, lo);
    arith(cx, span.into(), BinOp::Min, low, hi)
}

/// `T::exp(x)` and the other math functions of floats (`T::pow(x, y)`,
/// `T::fma(a, b, c)`): every operand is a float, of one type.
pub(super) fn math(cx: &mut Ctx, k: &Call, i: Intrin) -> Expr {
    let args: Vec<Expr> = operands(cx, k).into_iter().map(expr::computed).collect();
    if let Some(p) = args.iter().map(Expr::dtype).find(|t| t.is_packed()) {
        return packed_math(cx, k, i, p, args);
    }
    if args.len() != 1 {
        if let Some(t) = args.iter().map(Expr::dtype).find(|t| !t.is_float()) {
            cx.err(
                k.span(),
                format!("`T::{}` takes float values, got {t}", k.name()),
            );
            return Expr::Float(0.0, DType::F32);
        }
        let mut args = args;
        let first = args.remove(0);
        let mut out = vec![first];
        for b in args {
            let a = out.pop().expect("one operand");
            let (a, b) = unify(cx, k.span().into(), a, b);
            // A wider later operand widens the earlier ones too.
            let t = a.dtype();
            out = out.into_iter().map(|x| x.cast(t)).collect();
            out.push(a);
            out.push(b);
        }
        let t = out[0].dtype();
        return Expr::Call(i, out, t);
    }
    let [a]: [Expr; 1] = args.try_into().expect("arity 1");
    let t = a.dtype();
    if i == Intrin::Abs && t.is_int() && t.is_signed() {
        let zero = Expr::Int(0, t);
        let neg = Expr::Neg(Box::new(a.clone()), t);
        return Expr::Select(
            Box::new(Expr::lt(a.clone(), zero)),
            Box::new(neg),
            Box::new(a),
            t,
        );
    }
    if !t.is_float() {
        cx.err(
            k.span(),
            format!("`T::{}` takes a float value, got {t}", k.name()),
        );
        // A float, as meant: its uses report nothing more.
        return Expr::Float(0.0, DType::F32);
    }
    Expr::Call(i, vec![a], t)
}

/// `T::fma(a, b, c)` of packed pairs, half by half with one rounding
/// (`HFMA2`); a constant operand stands in both halves. The other math
/// functions have no paired form.
fn packed_math(cx: &mut Ctx, k: &Call, i: Intrin, p: DType, args: Vec<Expr>) -> Expr {
    if i != Intrin::Fma {
        cx.err(
            k.span(),
            format!(
                "`T::{}` has no form for {p} pairs (they take `+ - * /`, `T::fma`, `T::max` and \
                 `T::min`); apply it to the halves, `T::low(v)` and `T::high(v)`",
                k.name()
            ),
        );
        return Expr::Float(0.0, p);
    }
    let mut out = Vec::new();
    for (a, e) in args.into_iter().zip(&k.args) {
        let (_, a) = unify(cx, At::Expr(e), Expr::Float(0.0, p), a);
        if a.dtype() != p {
            return Expr::Float(0.0, p);
        }
        out.push(a);
    }
    Expr::Call(i, out, p)
}

/// `T::pack2(lo, hi)`: the packed pair of two f16 (an `f16x2`) or two bf16
/// values; `T::pack2::<f16x2>(1.0, 2.0)` names the pair where both halves
/// are constants.
pub(super) fn pack2(cx: &mut Ctx, k: &Call) -> Expr {
    let [lo, hi]: [Expr; 2] = operands(cx, k).try_into().expect("arity 2");
    let named = k.turbofish().and_then(expr::dtype_of_type);
    let p = match named {
        Some(p) if p.is_packed() => Some(p),
        Some(_) => None,
        None => [&lo, &hi]
            .iter()
            .filter(|x| !matches!(x, Expr::Int(..) | Expr::Float(..)))
            .find_map(|x| x.dtype().pair()),
    };
    let Some(p) = p else {
        cx.err(
            k.span(),
            "`T::pack2` takes two f16 or two bf16 values (`T::pack2::<f16x2>(a, b)` names the \
             pair where both are constants)",
        );
        return Expr::Float(0.0, DType::F16x2);
    };
    let half = |cx: &mut Ctx, x: Expr, e: &syn::Expr| {
        expr::convert_for_store(cx, At::Expr(e), x, p.lane(), "a half of the pair")
    };
    let lo = half(cx, lo, k.args[0]);
    let hi = half(cx, hi, k.args[1]);
    Expr::Call(Intrin::Pack2, vec![lo, hi], p)
}

/// `T::splat::<f16x2>(x)`: the pair with `x` (converted to the half's dtype)
/// in both halves.
pub(super) fn splat(cx: &mut Ctx, k: &Call) -> Expr {
    let [x]: [Expr; 1] = operands(cx, k).try_into().expect("arity 1");
    let Some(p) = k
        .turbofish()
        .and_then(expr::dtype_of_type)
        .filter(|t| t.is_packed())
    else {
        cx.err(
            k.span(),
            "`T::splat` takes the pair's dtype: `T::splat::<f16x2>(x)` or `T::splat::<bf16x2>(x)`",
        );
        return x;
    };
    if !(x.dtype().is_float() || x.dtype().is_int()) {
        cx.err(
            k.span(),
            format!("`T::splat` takes a number, got {}", x.dtype()),
        );
        return Expr::Float(0.0, p);
    }
    x.cast(p.lane()).cast(p)
}

/// `T::low(v)` and `T::high(v)`: the first (low 16 bits) and second half of
/// a packed pair.
pub(super) fn half_of(cx: &mut Ctx, k: &Call, i: Intrin) -> Expr {
    let [v]: [Expr; 1] = operands(cx, k).try_into().expect("arity 1");
    let t = v.dtype();
    if !t.is_packed() {
        cx.err(
            k.span(),
            format!(
                "`T::{}` takes a packed pair (f16x2, bf16x2), got {t}",
                k.name()
            ),
        );
        return v;
    }
    Expr::Call(i, vec![v], t.lane())
}

/// `T::bitcast::<D>(x)`: the bits of `x` read as dtype `D`, which must have
/// the size of `x`'s dtype (what dequantization tricks need: `q | 0x4b000000`
/// read as f32 is `2^23 + q`, one integer op and no int-to-float convert).
pub(super) fn bitcast(cx: &mut Ctx, k: &Call) -> Expr {
    let [x]: [Expr; 1] = operands(cx, k).try_into().expect("arity 1");
    let Some(to) = k.turbofish().and_then(expr::dtype_of_type) else {
        cx.err(
            k.span(),
            "`T::bitcast` takes the dtype to read the bits as: `T::bitcast::<f32>(bits)`",
        );
        return x;
    };
    let from = x.dtype();
    if from == DType::Bool || to == DType::Bool {
        cx.err(k.span(), "`T::bitcast` does not take or give bool values");
        return Expr::Int(0, to).cast(to);
    }
    if from.bytes() != to.bytes() {
        cx.err(
            k.span(),
            format!(
                "`T::bitcast::<{t}>` of a {f} value: {t} has {} bytes, {f} has {}; \
                 bitcast keeps the size (cast with `as` to convert a value)",
                to.bytes(),
                from.bytes(),
                t = to.rust_name(),
                f = from.rust_name(),
            ),
        );
        return Expr::Int(0, to).cast(to);
    }
    if from == to {
        return x;
    }
    Expr::Call(Intrin::Bitcast, vec![x], to)
}

/// The dtype of `T::f::<dtype>()` or `T::f(dtype)`.
fn type_arg(cx: &mut Ctx, k: &Call) -> Option<DType> {
    let t = match (k.turbofish(), k.args.as_slice()) {
        (Some(t), []) => expr::dtype_of_type(t),
        (None, [e]) => expr::dtype_of_name(e),
        _ => None,
    };
    if t.is_none() {
        let f = k.name();
        cx.err(
            k.span(),
            format!("`T::{f}` takes a dtype: `T::{f}::<f32>()`"),
        );
    }
    t
}

pub(super) fn infinity(cx: &mut Ctx, k: &Call) -> Expr {
    match type_arg(cx, k) {
        Some(DType::F8E4M3) => {
            cx.err(
                k.span(),
                "f8e4m3 has no infinity (its largest value is 448); use `T::max_value::<f8e4m3>()`",
            );
            Expr::int(0)
        }
        Some(t) if t.is_float() => Expr::Float(f64::INFINITY, t),
        Some(t) => {
            cx.err(
                k.span(),
                format!("`T::infinity` needs a float dtype, got {t}"),
            );
            Expr::int(0)
        }
        None => Expr::int(0),
    }
}

pub(super) fn max_value(cx: &mut Ctx, k: &Call) -> Expr {
    let Some(t) = type_arg(cx, k) else {
        return Expr::int(0);
    };
    match t {
        DType::F16 => Expr::Float(65504.0, t),
        DType::BF16 => Expr::Float(3.3895313892515355e38, t),
        DType::F32 => Expr::Float(f32::MAX as f64, t),
        DType::F64 => Expr::Float(f64::MAX, t),
        DType::F8E4M3 => Expr::Float(448.0, t),
        DType::F8E5M2 => Expr::Float(57344.0, t),
        DType::I8 => Expr::Int(i8::MAX as i64, t),
        DType::U8 => Expr::Int(u8::MAX as i64, t),
        DType::I16 => Expr::Int(i16::MAX as i64, t),
        DType::U16 => Expr::Int(u16::MAX as i64, t),
        DType::I32 => Expr::Int(i32::MAX as i64, t),
        DType::U32 => Expr::Int(u32::MAX as i64, t),
        DType::I64 => Expr::Int(i64::MAX, t),
        t => {
            cx.err(k.span(), format!("`T::max_value` has no value for {t}"));
            Expr::int(0)
        }
    }
}

/// `T::get_thread_binding()` (or `(0)`, the x dimension): CUDA only.
pub(super) fn thread_binding(cx: &mut Ctx, k: &Call) -> Expr {
    let x_dim = |e: &syn::Expr| matches!(e, syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) if i.base10_digits() == "0");
    if !k.args.iter().all(|a| x_dim(a)) {
        cx.err(
            k.span(),
            "`T::get_thread_binding()` takes no argument (or 0: the x dimension)",
        );
    }
    if !cx.f.cuda_only {
        cx.err(
            k.span(),
            "`T::get_thread_binding` exists only on CUDA, and this kernel is also built for the CPU \
             target; add `target = \"cuda\"` to the attribute to build it for CUDA only",
        );
    }
    Expr::Thread
}
